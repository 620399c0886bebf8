package fencing

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Do runs fn under the lease on resource, like cirello/pglock's Do: it
// acquires as Acquire does (waiting until granted unless WithWait says
// otherwise, ctx bounding the wait), calls fn with a context that is
// cancelled when the lease is lost (or ctx ends), and releases the lease
// when fn returns or panics. Do returns fn's error; if the lease was lost
// while fn ran, an error wrapping ErrLeaseLost (and fn's error, if any).
// Write with the lease inside fn: Exec(ctx, db, lease, sql) or
// Fenced(ctx, db, lease, func(tx pgx.Tx) error).
func Do(ctx context.Context, connString, resource string, ttl time.Duration, fn func(ctx context.Context, lease *Lease) error, opts ...AcquireOption) (err error) {
	if fn == nil {
		return errors.New("fencing: Do needs a function")
	}
	lease, err := Acquire(ctx, connString, resource, ttl, opts...)
	if err != nil {
		return err
	}
	defer func() {
		if _, rerr := lease.Release(); rerr != nil && err == nil {
			err = rerr
		}
	}()
	inner, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(lease.Context(), func() { cancel(context.Cause(lease.Context())) })
	defer stop()
	err = fn(inner, lease)
	if lost := lease.Check(); lost != nil {
		switch {
		case err == nil, errors.Is(err, ErrLeaseLost):
			return lost
		default:
			return fmt.Errorf("%w (the function returned: %w)", lost, err)
		}
	}
	return err
}
