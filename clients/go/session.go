package fencing

import (
	"context"
	"errors"
	"sync"
	"time"
)

// A Session holds many leases of one holder, each with its own ttl, and
// keeps them all alive over one keepalive connection ("fencing keepalive
// <holder>") with fencing.renew_all() (one call per distinct ttl) at a third
// of the shortest ttl it holds, like etcd's concurrency.Session. Each lease
// keeps its own deadline and Context.
type Session struct {
	keeper    *keeper
	closeOnce sync.Once
	closeErr  error
}

// NewSession connects (connString as for Acquire; ErrUnsupportedServer
// below fencing 0.4.0) and starts the keepalive. Options: WithHolder
// (default DefaultHolder()), WithLogger. Close releases every lease the
// session still holds.
func NewSession(ctx context.Context, connString string, opts ...AcquireOption) (*Session, error) {
	o, err := collect(opts)
	if err != nil {
		return nil, err
	}
	k, err := newKeeper(connString, o.holder, 0, true, o.logger)
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

// Acquire asks for the lease on resource with its ttl; the wait and the
// errors are Acquire's (WithWait; WithHolder and WithLogger are the
// session's and ignored here). A wait runs on a connection of its own, so
// that the session's renewals go on meanwhile. Release the lease alone with
// lease.Release(), or all with Close().
func (s *Session) Acquire(ctx context.Context, resource string, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	o, err := collect(opts)
	if err != nil {
		return nil, err
	}
	if s.closed() {
		return nil, errors.New("fencing: the session is closed")
	}
	for _, l := range s.keeper.held() {
		if l.resource == resource {
			return nil, &LeaseAlreadyHeldError{Resource: resource, Holder: s.keeper.holder, Token: l.token}
		}
	}
	return s.keeper.acquire(ctx, resource, ttl, o.wait, s)
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

// Close stops the keepalive, releases every lease still held and closes the
// connection; use it as `defer session.Close()`. The error is that of the
// releases the server could not be told (a lease lost meanwhile is none).
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.keeper.stop()
		var errs []error
		for _, l := range s.keeper.held() {
			if _, err := l.Release(); err != nil {
				errs = append(errs, err)
			}
		}
		s.keeper.closeConn()
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
