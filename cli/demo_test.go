package cli

import (
	"bytes"
	"context"
	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/internal/demo"
	"github.com/sf2loki/sf2loki/job"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestDemoShipsRecordsAndAdvancesCursors(t *testing.T) {
	var out bytes.Buffer
	err := demo.Run(context.Background(), &out, demo.Options{Runs: 3, MaxRecords: 1500, StateDir: t.TempDir()}, func(ctx context.Context, cfg *config.Config) *job.Report {
		return runInvocation(ctx, cfg, slog.New(slog.DiscardHandler), invocationFlags{})
	})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	text := out.String()
	runs := regexp.MustCompile(`run (\d): outcome ok, epoch (\d+), (\d+) records`).FindAllStringSubmatch(text, -1)
	if len(runs) != 3 {
		t.Fatalf("want 3 ok runs:\n%s", text)
	}
	total := 0
	for i, r := range runs {
		if epoch, _ := strconv.Atoi(r[2]); epoch != i+1 {
			t.Errorf("run %d has epoch %d; epochs must advance by one per run", i+1, epoch)
		}
		n, _ := strconv.Atoi(r[3])
		total += n
	}
	// Each run that sampled the org limits shipped one entry besides the records.
	total += strings.Count(text, "org limits sampled and shipped")
	m := regexp.MustCompile(`receiver: (\d+) entries in \d+ streams \((\d+) exact duplicates\)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no receiver summary:\n%s", text)
	}
	if got, _ := strconv.Atoi(m[1]); got != total || got == 0 {
		t.Errorf("receiver holds %d entries, the runs reported %d", got, total)
	}
	if m[2] != "0" {
		t.Errorf("%s duplicates in a demo without faults", m[2])
	}
	if !strings.Contains(text, "cursor soql:SetupAuditTrail") {
		t.Errorf("the demo does not show cursors advancing:\n%s", text)
	}
}
