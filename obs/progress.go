package obs

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"golang.org/x/term"
)

// IsTerminal reports whether w, or the writer it wraps (Writer.Unwrap), is a terminal.
func IsTerminal(w io.Writer) bool {
	for {
		switch v := w.(type) {
		case *os.File:
			return term.IsTerminal(int(v.Fd()))
		case interface{ Unwrap() io.Writer }:
			w = v.Unwrap()
		default:
			return false
		}
	}
}

// StartProgress shows a long operation's progress until the returned stop is called: on a
// terminal, bar() redrawn in place four times a second (and once more, with a line end, when
// stopped); else one log line msg with attrs() every interval (30s when interval is not
// positive). stop returns once the display has ended.
func StartProgress(w io.Writer, log *slog.Logger, interval time.Duration, msg string, bar func() string, attrs func() []any) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		showProgress(done, w, log, interval, msg, bar, attrs)
	}()
	return func() { close(done); <-ended }
}

func showProgress(done <-chan struct{}, w io.Writer, log *slog.Logger, interval time.Duration, msg string, bar func() string, attrs func() []any) {
	tty := IsTerminal(w)
	switch {
	case tty:
		interval = 250 * time.Millisecond
	case interval <= 0:
		interval = 30 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			if tty {
				fmt.Fprintf(w, "\r%s\n", bar())
			}
			return
		case <-t.C:
			if tty {
				fmt.Fprintf(w, "\r%s", bar())
			} else {
				log.Info(msg, attrs()...)
			}
		}
	}
}
