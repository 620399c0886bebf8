package fencing

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSessionRenewsAllOnOneConnection(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	holder := unique(t, "h")
	ttl := 700 * time.Millisecond
	s, err := NewSession(ctx, "", holder, ttl)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resources := []string{unique(t, "r"), unique(t, "r"), unique(t, "r")}
	var leases []*Lease
	for _, r := range resources {
		l, err := s.Acquire(ctx, r)
		if err != nil {
			t.Fatalf("acquire %s: %v", r, err)
		}
		leases = append(leases, l)
	}
	if _, err := s.Acquire(ctx, resources[0]); !errors.Is(err, ErrLeaseAlreadyHeld) {
		t.Errorf("again: %v, want ErrLeaseAlreadyHeld", err)
	}
	time.Sleep(5 * ttl)
	for _, l := range leases {
		if err := l.Check(); err != nil {
			t.Errorf("after five ttls: %v", err)
		}
		if _, token, ok := live(t, conn, l.Resource()); !ok || token != l.Token() {
			t.Errorf("%s not live on the server", l.Resource())
		}
	}
	if n := keepalives(t, conn, holder); n != 1 {
		t.Errorf("%d keepalive connections, want 1", n)
	}
	var renewAll bool
	if err := conn.QueryRow(ctx, "SELECT to_regproc('fencing.renew_all') IS NOT NULL").Scan(&renewAll); err != nil {
		t.Fatal(err)
	}
	if renewAll && s.keeper.single {
		t.Error("the session renews lease by lease although the server has renew_all()")
	}

	if err := leases[0].Release(); err != nil {
		t.Errorf("release one: %v", err)
	}
	if len(s.Leases()) != 2 {
		t.Errorf("%d leases left, want 2", len(s.Leases()))
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	for _, l := range leases {
		if _, _, ok := live(t, conn, l.Resource()); ok {
			t.Errorf("%s live after Close", l.Resource())
		}
		if l.Context().Err() == nil {
			t.Errorf("%s: context not done after Close", l.Resource())
		}
	}
	if !eventually(2*time.Second, func() bool { return keepalives(t, conn, holder) == 0 }) {
		t.Errorf("%d keepalive connections after Close", keepalives(t, conn, holder))
	}
}

func TestSessionLosesOnlyTheRefusedLease(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	holder := unique(t, "h")
	s, err := NewSession(ctx, "", holder, 900*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := s.Acquire(ctx, unique(t, "r"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Acquire(ctx, unique(t, "r"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT fencing.release($1, $2, $3)", a.Resource(), holder, a.Token()); err != nil {
		t.Fatal(err)
	}
	if !eventually(2*time.Second, a.Lost) {
		t.Fatal("the released lease is not lost")
	}
	time.Sleep(time.Second)
	if err := b.Check(); err != nil {
		t.Errorf("the other lease: %v", err)
	}
}

// A waiting acquire does not hold up the session's renewals.
func TestSessionWaitKeepsOtherLeasesAlive(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	holder, other := unique(t, "h"), unique(t, "o")
	ttl := 600 * time.Millisecond
	s, err := NewSession(ctx, "", holder, ttl)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, err := s.Acquire(ctx, unique(t, "r"))
	if err != nil {
		t.Fatal(err)
	}
	busy := unique(t, "r")
	blocker, err := Acquire(ctx, "", busy, other, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(4 * ttl)
		blocker.Release()
	}()
	second, err := s.Acquire(ctx, busy, WithWait(10*time.Second))
	if err != nil {
		t.Fatalf("waiting acquire: %v", err)
	}
	if err := first.Check(); err != nil {
		t.Errorf("the first lease during the wait: %v", err)
	}
	if holder2, token, ok := live(t, conn, busy); !ok || holder2 != holder || token != second.Token() {
		t.Errorf("after the wait: %v %v %v", holder2, token, ok)
	}
}
