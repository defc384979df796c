package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Renewer renews a grant every interval in its own goroutine and cancels its Context as soon
// as the grant is lost (Renew reports ErrLost) or its validity passes without a successful
// renewal — within one renew interval of either.
type Renewer struct {
	l     Lease
	every time.Duration
	log   *slog.Logger

	ctx     context.Context
	cancel  context.CancelCauseFunc
	rpc     context.Context // renew calls; not canceled by the caller's context
	stopRPC context.CancelFunc
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once

	mu    sync.Mutex
	grant Grant
}

// NewRenewer starts renewing g every interval. Context() derives from parent (so the caller's
// own cancellation also shows there); the renewals themselves continue until Stop or loss.
func NewRenewer(parent context.Context, l Lease, g Grant, every time.Duration, log *slog.Logger) *Renewer {
	if log == nil {
		log = slog.Default()
	}
	r := &Renewer{l: l, every: every, log: log, grant: g, stop: make(chan struct{}), done: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancelCause(parent)
	r.rpc, r.stopRPC = context.WithCancel(context.WithoutCancel(parent))
	go r.run()
	return r
}

// Context is canceled when the grant is lost or Stop is called; context.Cause tells which.
func (r *Renewer) Context() context.Context { return r.ctx }

// Grant returns the latest renewed grant.
func (r *Renewer) Grant() Grant {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.grant
}

// Stop ends renewing (aborting an in-flight renewal), waits for the goroutine, and cancels
// Context with cause ErrReleased unless it was already canceled by a loss.
func (r *Renewer) Stop() {
	r.once.Do(func() { close(r.stop) })
	r.stopRPC()
	<-r.done
	r.cancel(ErrReleased)
}

// Lost returns the loss cause, or nil while the grant is held (or after a plain Stop).
func (r *Renewer) Lost() error {
	if err := context.Cause(r.ctx); errors.Is(err, ErrLost) {
		return err
	}
	return nil
}

func (r *Renewer) run() {
	defer close(r.done)
	g := r.Grant()
	validity := time.NewTimer(time.Until(g.ValidUntil))
	defer validity.Stop()
	tick := time.NewTicker(r.every)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-validity.C:
			r.lose(fmt.Errorf("%w: %w: epoch %d", ErrLost, ErrExpired, g.Epoch))
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(r.rpc, r.every)
		ng, err := r.l.Renew(ctx, g)
		cancel()
		switch {
		case err == nil:
			g = ng
			r.mu.Lock()
			r.grant = g
			r.mu.Unlock()
			if !g.Valid() { // written, but already past its validity (a clock step, a slow write)
				r.lose(fmt.Errorf("%w: %w: epoch %d: the renewal's validity passed before it returned", ErrLost, ErrExpired, g.Epoch))
				return
			}
			validity.Reset(time.Until(g.ValidUntil))
		case errors.Is(err, ErrLost):
			r.lose(err)
			return
		case r.rpc.Err() != nil: // stopping
			return
		case ng.Epoch == g.Epoch && ng.ValidUntil.Before(g.ValidUntil) && !ng.Valid():
			// The renewal may have landed, with a renew time the others read as expired (our
			// wall clock stepped back): its validity, not the grant's, is what they go by.
			r.lose(fmt.Errorf("%w: %w: epoch %d: a renewal that may have landed was valid no longer: %w", ErrLost, ErrExpired, g.Epoch, err))
			return
		case !g.Valid():
			r.lose(fmt.Errorf("%w: %w: epoch %d: renewals kept failing: %w", ErrLost, ErrExpired, g.Epoch, err))
			return
		default:
			if ng.Epoch == g.Epoch && ng.ValidUntil.Before(g.ValidUntil) { // a renewal that may have landed, valid less long
				g.ValidUntil = ng.ValidUntil
				validity.Reset(time.Until(g.ValidUntil))
			}
			r.log.Warn("lease renewal failed; retrying until the grant's validity passes",
				"epoch", g.Epoch, "valid_for", time.Until(g.ValidUntil).Round(time.Millisecond), "error", err)
		}
	}
}

func (r *Renewer) lose(err error) {
	r.log.Warn("lease lost; canceling the invocation", "error", err)
	r.cancel(err)
}
