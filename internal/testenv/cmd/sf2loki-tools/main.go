// Command sf2loki-tools builds the pinned real servers and tools of the test suite into the
// cache outside the repository (see package toolcache) and prints where they are.
//
//	sf2loki-tools ensure all|<name>...   build what is missing (all: what the tests use); one status line per tool
//	sf2loki-tools path <name>            ensure the tool, then print its absolute path
//	sf2loki-tools list                   print the known tool names
//
// Progress goes to stderr; stdout carries only the results, so `$(sf2loki-tools path X)` works.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv/toolcache"
)

// maxParallelBuilds bounds concurrent builds: each go build already uses every core, so more
// would only compete for memory.
const maxParallelBuilds = 2

const usage = `usage:
  sf2loki-tools ensure all|<name>...   build the named tools (or all) into the cache if missing
  sf2loki-tools path <name>            ensure the tool, then print its absolute path
  sf2loki-tools list                   print the known tool names
tools: `

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sf2loki-tools:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("bad usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	tb := &toolcache.Toolbox{Progress: stderr}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage+strings.Join(toolcache.Names(), ", ")+"\n")
		return errUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "ensure":
		if len(rest) == 0 {
			return fmt.Errorf("%w: ensure needs \"all\" or tool names", errUsage)
		}
		if len(rest) == 1 && rest[0] == "all" {
			rest = toolcache.Prebuilt()
		}
		return ensure(ctx, tb, rest, stdout)
	case "path":
		if len(rest) != 1 {
			return fmt.Errorf("%w: path needs exactly one tool name", errUsage)
		}
		r, err := tb.Ensure(ctx, rest[0])
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, r.Path)
		return nil
	case "list":
		fmt.Fprintln(stdout, strings.Join(toolcache.Names(), "\n"))
		return nil
	default:
		fmt.Fprint(stderr, usage+strings.Join(toolcache.Names(), ", ")+"\n")
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
}

// ensure builds the tools, at most maxParallelBuilds at a time, printing one line per tool in
// the order given. It returns every failure.
func ensure(ctx context.Context, tb *toolcache.Toolbox, names []string, stdout io.Writer) error {
	type outcome struct {
		r   toolcache.ToolResult
		err error
	}
	outcomes := make([]outcome, len(names))
	done := make([]chan struct{}, len(names))
	for i := range done {
		done[i] = make(chan struct{})
	}
	queue := make(chan int)
	var wg sync.WaitGroup
	for range min(maxParallelBuilds, len(names)) {
		wg.Go(func() {
			for i := range queue {
				r, err := tb.Ensure(ctx, names[i])
				outcomes[i] = outcome{r, err}
				close(done[i])
			}
		})
	}
	go func() {
		for i := range names {
			queue <- i
		}
		close(queue)
	}()
	start := time.Now()
	var errs []error
	for i, name := range names {
		<-done[i]
		o := outcomes[i]
		switch {
		case o.err != nil:
			fmt.Fprintf(stdout, "%-24s FAILED\n", name)
			errs = append(errs, o.err)
		case o.r.Built:
			fmt.Fprintf(stdout, "%-24s %-18s built in %ds  %s\n", name, o.r.Version, int(o.r.Elapsed.Round(time.Second).Seconds()), o.r.Path)
		default:
			fmt.Fprintf(stdout, "%-24s %-18s cached  %s\n", name, o.r.Version, o.r.Path)
		}
	}
	wg.Wait()
	if len(names) > 1 {
		fmt.Fprintf(stdout, "all tools ready in %s\n", time.Since(start).Round(time.Second))
	}
	return errors.Join(errs...)
}
