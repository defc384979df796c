package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/source/eventlogfile"
)

// backfillPlanOutput is what `backfill --plan --json` prints: the window and each org's plan.
type backfillPlanOutput struct {
	Since    time.Time         `json:"since"`
	Until    time.Time         `json:"until"`
	Interval string            `json:"interval"`
	Orgs     []backfillOrgPlan `json:"orgs"`
}

type backfillOrgPlan struct {
	Org string `json:"org,omitempty"`
	*eventlogfile.Plan
}

// runBackfillPlan lists the window's files of every org (no download, no lease, no document)
// and prints what the backfill would cost.
func runBackfillPlan(c *cli.Context, cfg *config.Config, plan *backfillPlan) error {
	bcfg := cfg.ForBackfill()
	log, _, err := newLogger(c, bcfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	sh, err := buildShaper(bcfg)
	if err != nil {
		return storeExit(err)
	}
	po := eventlogfile.PlanOptions{Throughput: c.Float64("throughput")}
	if po.Throughput == 0 {
		po.Throughput = float64(bcfg.Egress.BytesPerSecond.Int())
	}
	out := backfillPlanOutput{Since: plan.window.Since, Until: plan.window.Until, Interval: plan.interval}
	for _, o := range plan.orgs {
		if n := c.Int("row-bytes"); n > 0 {
			po.RowBytes = map[string]float64{}
			for _, t := range o.EventTypes {
				po.RowBytes[t] = float64(n)
			}
		}
		src, err := backfillSource(bcfg, plan, o, sh, nil, log)
		if err != nil {
			return storeExit(err)
		}
		p, err := src.Plan(ctx, po)
		if err != nil {
			log.Error("the backfill plan failed", "org", o.Name, "err", err)
			return &ExitError{Code: outcomeExit(job.OutcomeOf(err, false), true)}
		}
		out.Orgs = append(out.Orgs, backfillOrgPlan{Org: o.Name, Plan: p})
	}
	if c.Bool("json") {
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "%s\n", b)
		return nil
	}
	return writeBackfillPlan(c.App.Writer, out)
}

// writeBackfillPlan renders a plan as a table per org.
func writeBackfillPlan(w io.Writer, out backfillPlanOutput) error {
	fmt.Fprintf(w, "backfill plan %s..%s (%s), estimated from the file listing (nothing downloaded)\n",
		out.Since.Format(time.RFC3339), out.Until.Format(time.RFC3339), out.Interval)
	for _, o := range out.Orgs {
		if o.Org != "" {
			fmt.Fprintf(w, "\norg %s\n", o.Org)
		}
		if err := o.WriteText(w); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, "(--row-bytes and --throughput change what the estimates assume)")
	return err
}
