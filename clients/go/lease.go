package fencing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A Lease is a lease on one resource from fencing.acquire(), kept alive on
// a connection of its own until Release. Its deadline is counted on the
// monotonic clock from the start of the last call the server acknowledged
// (the grant or a renewal): past it the lease is lost, whatever the server
// says later, and Context() is cancelled.
type Lease struct {
	resource string
	holder   string
	token    int64
	ttl      time.Duration
	keeper   *keeper
	session  *Session // nil for a lease of its own (Acquire)

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	deadline time.Time   // has a monotonic reading
	ended    error       // why the lease ended (lost or released); nil while held
	released bool        // ended by Release, not lost
	refused  bool        // lost because the server refused a renewal
	timer    *time.Timer // fires at the deadline

	releaseOnce sync.Once
	releasedOK  bool
	releaseErr  error
}

// Acquire asks for the lease on resource with the given ttl, over a new
// connection made from connString (pgx syntax; "" reads the libpq
// environment: PGHOST, PGPORT, ...) whose application_name is "fencing
// keepalive <holder>". That connection then renews the lease at a third of
// the ttl until Release. The holder is DefaultHolder() unless WithHolder
// names one (lease.Holder() tells). Without WithWait the call waits until
// granted, first come first served, as long as ctx lasts: ctx's deadline
// ends it with ErrLeaseTimeout, its cancellation with ctx's cause, and
// either cancels the server's call, so nothing stays queued. WithWait(d)
// bounds the wait (ErrLeaseTimeout), WithWait(0) is a try (ErrLeaseBusy).
// ErrLeaseAlreadyHeld: the holder has the lease already;
// ErrUnsupportedServer: the database's fencing is older than 0.4.0. ctx
// bounds this call only, not the lease.
func Acquire(ctx context.Context, connString, resource string, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	o, err := collect(opts)
	if err != nil {
		return nil, err
	}
	return acquireWith(ctx, connString, resource, ttl, o, nil)
}

// acquireWith makes the keeper of one lease (a lease, or an election's
// term: tune sets its grant and release functions) and acquires.
func acquireWith(ctx context.Context, connString, resource string, ttl time.Duration, o acquireOptions, tune func(*keeper)) (*Lease, error) {
	k, err := newKeeper(connString, o.holder, ttl, false, o.logger)
	if err != nil {
		return nil, err
	}
	if tune != nil {
		tune(k)
	}
	l, err := k.acquire(ctx, resource, ttl, o.wait, nil)
	if err != nil {
		k.closeConn()
		return nil, err
	}
	k.start()
	return l, nil
}

func newLease(k *keeper, s *Session, resource string, token int64, ttl time.Duration, deadline time.Time) *Lease {
	l := &Lease{resource: resource, holder: k.holder, token: token, ttl: ttl,
		keeper: k, session: s, deadline: deadline}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	l.mu.Lock() // the timer may fire at once: expire() waits for l.timer
	l.timer = time.AfterFunc(time.Until(deadline), l.expire)
	l.mu.Unlock()
	return l
}

// Resource is the resource leased.
func (l *Lease) Resource() string { return l.resource }

// Holder is the holder the lease was granted to.
func (l *Lease) Holder() string { return l.holder }

// Token is the fencing token of the grant: present it with every write.
func (l *Lease) Token() int64 { return l.token }

// TTL is the lease's time to live, renewed at a third of it.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Deadline is when the lease is lost unless renewed: the start of the last
// acknowledged call plus the ttl. It carries a monotonic clock reading, so
// time.Until(l.Deadline()) is immune to changes of the wall clock.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Context is cancelled when the lease is lost or released;
// context.Cause tells which (errors.Is(cause, ErrLeaseLost) either way).
// Run the lease's work under it.
func (l *Lease) Context() context.Context { return l.ctx }

// Lost reports whether the lease was lost (not released): its deadline
// passed, by the clock, even if no goroutine has run since (a process
// that was stopped sees the loss the moment it runs again), or a renewal
// was refused.
func (l *Lease) Lost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checkLocked()
	return l.ended != nil && !l.released
}

// Check returns nil while the lease is held, else an error wrapping
// ErrLeaseLost. Call it before acting on the lease's behalf.
func (l *Lease) Check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checkLocked()
	return l.ended
}

func (l *Lease) checkLocked() {
	if l.ended == nil && !time.Now().Before(l.deadline) {
		l.loseLocked("the deadline passed")
	}
}

// expire runs at the deadline (the timer may be stale after an extension).
func (l *Lease) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended != nil {
		return
	}
	l.checkLocked()
	if l.ended == nil {
		l.timer.Reset(time.Until(l.deadline))
	}
}

// extend moves the deadline after the server acknowledged a renewal that
// started at start; a renewal started after the deadline cannot revive it.
func (l *Lease) extend(start time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checkLocked()
	if l.ended != nil {
		return
	}
	if !start.Before(l.deadline) {
		l.loseLocked("the deadline passed")
		return
	}
	if d := start.Add(l.ttl); d.After(l.deadline) {
		l.deadline = d
		l.timer.Reset(time.Until(d))
	}
}

// lose ends the lease as lost, for the reason given; refused: the server
// said so.
func (l *Lease) lose(why string, refused bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended == nil {
		l.loseLocked(why)
		l.refused = refused
	}
}

func (l *Lease) endLocked(err error, released bool) {
	l.ended = err
	l.released = released
	l.timer.Stop()
	l.cancel(err)
}

// loseLocked ends the lease as lost and logs it at warning level, in the
// words every client uses.
func (l *Lease) loseLocked(why string) {
	l.endLocked(lostError(l.resource, l.token, why), false)
	l.keeper.logger.Warn(fmt.Sprintf("fencing: lease on %s lost (holder %s, token %d): %s", l.resource, l.holder, l.token, why))
}

// live reports whether the lease is neither lost nor released.
func (l *Lease) live() bool { return l.Check() == nil }

// Release gives the lease back (fencing.release()) and closes its
// connection; use it as `defer lease.Release()`, which also runs when the
// function returns an error or panics. It returns true if the server had
// the lease and released it, false if the lease had been lost already (not
// an error), and an error if the server could not be told (the lease then
// expires at its ttl). Later calls return the first call's result.
func (l *Lease) Release() (bool, error) {
	l.releaseOnce.Do(func() {
		if l.session != nil {
			l.releasedOK, l.releaseErr = l.keeper.release(l)
			return
		}
		l.keeper.stop()
		l.releasedOK, l.releaseErr = l.keeper.release(l)
		l.keeper.closeConn()
	})
	return l.releasedOK, l.releaseErr
}

// markReleased ends the lease after the release function answered ok;
// true if it was released.
func (l *Lease) markReleased(ok bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended == nil {
		if !ok {
			l.loseLocked("lost before the release")
			return false
		}
		l.endLocked(fmt.Errorf("%w: %s (token %d): released", ErrLeaseLost, l.resource, l.token), true)
		return true
	}
	// Lost here by the deadline, but if the server's clock had not expired
	// it yet (ok): released, and free for the next holder now.
	return ok
}

// abandon ends the lease without telling the server (it expires at its ttl).
func (l *Lease) abandon(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended == nil {
		l.endLocked(fmt.Errorf("%w: %s (token %d): not released: %v", ErrLeaseLost, l.resource, l.token, err), true)
	}
	if errors.Is(err, ErrLeaseLost) {
		return err
	}
	return fmt.Errorf("fencing: release of %s (token %d): %w", l.resource, l.token, err)
}
