package fencing

import (
	"context"
	"errors"
	"sync"
	"time"
)

// A Session holds many leases of one holder with one ttl and keeps them all
// alive over one keepalive connection ("fencing keepalive <holder>") with
// one fencing.renew_all() call at a third of the ttl, like etcd's
// concurrency.Session. Each lease keeps its own deadline and Context.
type Session struct {
	keeper    *keeper
	closeOnce sync.Once
	closeErr  error
}

// NewSession connects (connString as for Acquire) and starts the
// keepalive. Close releases every lease the session still holds.
func NewSession(ctx context.Context, connString, holder string, ttl time.Duration, opts ...AcquireOption) (*Session, error) {
	o := collect(opts)
	k, err := newKeeper(connString, holder, ttl, true, o.logger)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	_, err = k.connect(ctx)
	k.mu.Unlock()
	if err != nil {
		return nil, err
	}
	k.start()
	return &Session{keeper: k}, nil
}

// Holder is the session's holder.
func (s *Session) Holder() string { return s.keeper.holder }

// Acquire asks for the lease on resource (errors as for the function
// Acquire). A wait (WithWait) runs on a connection of its own, so that the
// session's renewals go on meanwhile. Release the lease alone with
// lease.Release(), or all with Close().
func (s *Session) Acquire(ctx context.Context, resource string, opts ...AcquireOption) (*Lease, error) {
	o := collect(opts)
	if s.closed() {
		return nil, errors.New("fencing: the session is closed")
	}
	for _, l := range s.keeper.held() {
		if l.resource == resource {
			return nil, &LeaseAlreadyHeldError{Resource: resource, Holder: s.keeper.holder, Token: l.token}
		}
	}
	return s.keeper.acquire(ctx, resource, o.wait, s)
}

// Leases are the leases the session still holds.
func (s *Session) Leases() []*Lease { return s.keeper.held() }

func (s *Session) closed() bool {
	select {
	case <-s.keeper.quit:
		return true
	default:
		return false
	}
}

func (s *Session) release(l *Lease) error {
	return s.keeper.release([]*Lease{l})
}

// Close stops the keepalive, releases every lease still held and closes the
// connection; use it as `defer session.Close()`. The error is the first
// release's that failed (ErrLeaseLost for a lease lost meanwhile).
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.keeper.stop()
		leases := s.keeper.held()
		var errs []error
		for _, l := range leases {
			if err := l.Release(); err != nil {
				errs = append(errs, err)
			}
		}
		s.keeper.closeConn()
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
