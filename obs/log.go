// Package obs holds sf2loki's observability plumbing: the process logger (log/slog, JSON or text
// on stderr) and the redaction that keeps secrets and URL credentials out of everything logged or
// printed.
package obs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// LogOptions configures NewLogger.
type LogOptions struct {
	Level  string // debug, info, warn, error ("" = info)
	Format string // json or text ("" = json)
	// Redactor scrubs known secret values and URL credentials from every string attribute and
	// message. Nil means URL credentials only.
	Redactor *Redactor
}

// ParseLevel turns a level name into a slog.Level.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "", "info":
		return slog.LevelInfo, nil
	case "debug":
		return slog.LevelDebug, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q (use debug, info, warn or error)", s)
}

// NewLogger returns a logger writing to w in the given format, scrubbing secrets.
func NewLogger(w io.Writer, opts LogOptions) (*slog.Logger, error) {
	level, err := ParseLevel(opts.Level)
	if err != nil {
		return nil, err
	}
	r := opts.Redactor
	if r == nil {
		r = NewRedactor()
	}
	ho := &slog.HandlerOptions{Level: level, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		return r.scrubAttr(a)
	}}
	var h slog.Handler
	switch strings.ToLower(opts.Format) {
	case "", "json":
		h = slog.NewJSONHandler(w, ho)
	case "text":
		h = slog.NewTextHandler(w, ho)
	default:
		return nil, fmt.Errorf("unknown log format %q (use json or text)", opts.Format)
	}
	return slog.New(&redactingHandler{Handler: h, r: r}), nil
}

// redactingHandler scrubs the message, which ReplaceAttr does not see before formatting.
type redactingHandler struct {
	slog.Handler
	r *Redactor
}

func (h *redactingHandler) Handle(ctx context.Context, rec slog.Record) error {
	if scrubbed := h.r.Scrub(rec.Message); scrubbed != rec.Message {
		nr := slog.NewRecord(rec.Time, rec.Level, scrubbed, rec.PC)
		rec.Attrs(func(a slog.Attr) bool { nr.AddAttrs(a); return true })
		rec = nr
	}
	return h.Handler.Handle(ctx, rec)
}

func (h *redactingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &redactingHandler{Handler: h.Handler.WithAttrs(attrs), r: h.r}
}

func (h *redactingHandler) WithGroup(name string) slog.Handler {
	return &redactingHandler{Handler: h.Handler.WithGroup(name), r: h.r}
}
