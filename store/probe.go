package store

import (
	"context"
	"errors"
	"fmt"
)

// CheckConditionalWrites proves that b honors the preconditions the protocol relies on, on a
// probe object (never the real document): create-if-absent succeeds once and then conflicts,
// a write with the current version succeeds, a write with a stale version conflicts. It
// deletes the probe object afterwards. A backend that accepts a write it should have refused
// (an S3-compatible endpoint that ignores If-Match) yields ErrIntegrity. Doctor runs it.
func CheckConditionalWrites(ctx context.Context, b Backend) (err error) {
	if derr := b.Delete(ctx); derr != nil {
		return fmt.Errorf("probe %s: clearing: %w", b, derr)
	}
	defer func() {
		if derr := b.Delete(ctx); derr != nil && err == nil {
			err = fmt.Errorf("probe %s: cleaning up: %w", b, derr)
		}
	}()
	ignored := func(what string) error {
		return fmt.Errorf("%w: %s accepted %s: it ignores preconditions and cannot fence writers", ErrIntegrity, b, what)
	}
	v1, err := b.Store(ctx, []byte(`{"probe":1}`), "")
	if err != nil {
		return fmt.Errorf("probe %s: create: %w", b, err)
	}
	if _, err := b.Store(ctx, []byte(`{"probe":2}`), ""); err == nil {
		return ignored("a second create-if-absent")
	} else if !errors.Is(err, ErrConflict) {
		return fmt.Errorf("probe %s: second create: %w", b, err)
	}
	v2, err := b.Store(ctx, []byte(`{"probe":3}`), v1)
	if err != nil {
		return fmt.Errorf("probe %s: write with the current version: %w", b, err)
	}
	if v2 == v1 {
		return fmt.Errorf("%w: %s returned the same version for different bytes", ErrIntegrity, b)
	}
	if _, err := b.Store(ctx, []byte(`{"probe":4}`), v1); err == nil {
		return ignored("a write with a stale version")
	} else if !errors.Is(err, ErrConflict) {
		return fmt.Errorf("probe %s: write with a stale version: %w", b, err)
	}
	data, v, err := b.Load(ctx)
	if err != nil {
		return fmt.Errorf("probe %s: read back: %w", b, err)
	}
	if v != v2 || string(data) != `{"probe":3}` {
		return fmt.Errorf("%w: %s read back version %q %q, want %q %q", ErrIntegrity, b, v, data, v2, `{"probe":3}`)
	}
	return nil
}
