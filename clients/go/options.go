package fencing

import (
	"fmt"
	"log/slog"
	"math"
	"time"
)

// Forever, given to WithWait, waits until the lease is granted or the
// context ends; the same as giving no WithWait at all.
const Forever time.Duration = math.MaxInt64

// AcquireOption tunes Acquire, Do, NewSession, Session.Acquire and
// NewElection.
type AcquireOption func(*acquireOptions)

type acquireOptions struct {
	wait   time.Duration
	holder string
	logger *slog.Logger
}

// WithWait bounds the wait for the lease (first come, first served) to d:
// past it the error is ErrLeaseTimeout. WithWait(0) is a try: ErrLeaseBusy
// at once if another holder has the lease. Without WithWait (or with
// Forever) the call waits until granted, as long as its context lasts. A
// negative d is an error.
func WithWait(d time.Duration) AcquireOption {
	return func(o *acquireOptions) { o.wait = d }
}

// WithHolder names the holder (at most 45 bytes) instead of DefaultHolder():
// a process that must resume its own lease after a restart uses the same
// name again.
func WithHolder(holder string) AcquireOption {
	return func(o *acquireOptions) { o.holder = holder }
}

// WithLogger logs failed renewals and losses there (default:
// slog.Default()). A renewal that fails is retried, reconnecting, until the
// deadline.
func WithLogger(l *slog.Logger) AcquireOption {
	return func(o *acquireOptions) { o.logger = l }
}

func collect(opts []AcquireOption) (acquireOptions, error) {
	o := acquireOptions{wait: Forever, logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.wait < 0 {
		return o, fmt.Errorf("fencing: wait must not be negative, not %v", o.wait)
	}
	if o.holder == "" {
		o.holder = DefaultHolder()
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	return o, nil
}
