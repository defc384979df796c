package cli

import (
	"encoding/json"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/source/eventlogfile"
)

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
	po := eventlogfile.PlanOptions{Throughput: c.Float64("throughput"), AnyRowBytes: float64(c.Int("row-bytes"))}
	if po.Throughput == 0 {
		po.Throughput = float64(bcfg.Egress.BytesPerSecond.Int())
	}
	out := eventlogfile.WindowPlan{Since: plan.window.Since, Until: plan.window.Until, Interval: plan.interval}
	for _, o := range plan.orgs {
		src, err := backfillSource(bcfg, plan, o, sh, nil, log)
		if err != nil {
			return storeExit(err)
		}
		p, err := src.Plan(ctx, po)
		if err != nil {
			log.Error("the backfill plan failed", "org", o.Name, "err", err)
			return &ExitError{Code: outcomeExit(job.OutcomeOf(err, false), true)}
		}
		out.Orgs = append(out.Orgs, eventlogfile.OrgPlan{Org: o.Name, Plan: p})
	}
	if c.Bool("json") {
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "%s\n", b)
		return nil
	}
	if err := out.WriteText(c.App.Writer); err != nil {
		return err
	}
	_, err = fmt.Fprintln(c.App.Writer, "(--row-bytes and --throughput change what the estimates assume)")
	return err
}
