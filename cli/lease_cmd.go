package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/sf2loki/sf2loki/lease"
)

func leaseCommand() *cli.Command {
	return &cli.Command{
		Name:  "lease",
		Usage: "show or release the lease",
		Subcommands: []*cli.Command{
			{
				Name: "show", Usage: "print the holder, epoch, renew age, expiry and uid of the lease (read-only)",
				Flags:  append(documentFlags(), &cli.BoolFlag{Name: "json", Usage: "print JSON"}),
				Action: leaseShow,
			},
			{
				Name: "release",
				Usage: "release the lease: an expired holder's, or the holder named by --holder; a live holder's only with --force" +
					" (a store lease is released by claiming it one epoch up, which also fences its holder)",
				Flags: append(documentFlags(),
					&cli.StringFlag{Name: "holder", Usage: "release only if this is the holder (as printed by lease show)"},
					&cli.BoolFlag{Name: "force", Usage: "release a live holder's lease: its run stops at its next renewal"},
				),
				Action: leaseRelease,
			},
		},
	}
}

// leaseView is what `lease show --json` prints.
func leaseShow(c *cli.Context) error {
	t, stop, err := openTarget(c)
	if err != nil {
		return err
	}
	defer stop()
	l, err := buildLease(t.cfg, t.st, lease.NewInvocation(), t.log)
	if err != nil {
		return storeExit(err)
	}
	now := time.Now()
	var v lease.View
	rec, err := l.Inspect(t.ctx)
	switch {
	case errors.Is(err, lease.ErrAbsent):
		v = lease.AbsentView(l.Ref())
	case err != nil:
		return storeExit(err)
	default:
		v = rec.View(now, t.cfg.Lease.MaxClockSkew.D())
	}
	if snap, err := t.st.Read(t.ctx); err == nil {
		v.FenceEpoch = snap.Floor()
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return v.WriteText(c.App.Writer, now)
}

func leaseRelease(c *cli.Context) error {
	t, stop, err := openTarget(c)
	if err != nil {
		return err
	}
	defer stop()
	l, err := maintenanceLease(t.cfg, t.st, t.log)
	if err != nil {
		return storeExit(err)
	}
	f, err := lease.Free(t.ctx, l, lease.FreeOptions{Holder: c.String("holder"), Force: c.Bool("force"),
		Now: time.Now(), Skew: t.cfg.Lease.MaxClockSkew.D()})
	rec, state := f.Record, f.State
	switch {
	case err != nil:
		return storeExit(err)
	case f.Absent:
		_, err := fmt.Fprintf(c.App.Writer, "%s does not exist: nothing to release\n", l.Ref())
		return err
	case state == lease.StateReleased:
		_, err := fmt.Fprintf(c.App.Writer, "%s is already free (epoch %d)\n", rec.Ref, rec.Epoch)
		return err
	}
	note := ""
	switch {
	case state == lease.StateHeld && t.cfg.Lease.Type == "store":
		note = "; its run is fenced at its next renewal or commit"
	case state == lease.StateHeld:
		note = "; its run loses the lease at its next renewal and stops pulling"
	}
	_, err = fmt.Fprintf(c.App.Writer, "released %s held by %s (%s, epoch %d)%s\n", rec.Ref, rec.Holder, state, rec.Epoch, note)
	return err
}
