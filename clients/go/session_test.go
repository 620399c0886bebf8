package fencing

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSessionRenewsAllOnOneConnection(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	holder := unique(t, "h")
	ttl := 700 * time.Millisecond
	s, err := NewSession(ctx, "", WithHolder(holder))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resources := []string{unique(t, "r"), unique(t, "r"), unique(t, "r")}
	// One ttl per lease: the session renews at a third of the shortest
	// (700 ms), so every lease outlives five of it.
	ttls := []time.Duration{3 * time.Second, ttl, 5 * time.Second}
	var leases []*Lease
	for i, r := range resources {
		l, err := s.Acquire(ctx, r, ttls[i])
		if err != nil {
			t.Fatalf("acquire %s: %v", r, err)
		}
		leases = append(leases, l)
	}
	if _, err := s.Acquire(ctx, resources[0], ttl); !errors.Is(err, ErrLeaseAlreadyHeld) {
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
	var last string
	if err := conn.QueryRow(ctx, "SELECT query FROM pg_stat_activity WHERE application_name = $1", "fencing keepalive "+holder).Scan(&last); err != nil || !strings.Contains(last, "renew_all") {
		t.Errorf("the keepalive's last statement %q (%v), want renew_all", last, err)
	}
	for i, l := range leases {
		if l.TTL() != ttls[i] {
			t.Errorf("lease %d: ttl %v, want %v", i, l.TTL(), ttls[i])
		}
	}
	// Each lease is renewed with its own ttl: the 5 s one has more than
	// 4 s left (renewed within the last third of 700 ms), the 700 ms one
	// at most 700 ms.
	for i, within := range [][2]float64{{2, 3}, {0, 0.7}, {4, 5}} {
		var left float64
		if err := conn.QueryRow(ctx, "SELECT extract(epoch FROM expires_at - clock_timestamp())::float8 FROM fencing.leases WHERE resource = $1", resources[i]).Scan(&left); err != nil || left < within[0] || left > within[1] {
			t.Errorf("lease %d: %.3f s left on the server (%v), want %v to %v", i, left, err, within[0], within[1])
		}
	}

	if ok, err := leases[0].Release(); !ok || err != nil {
		t.Errorf("release one: %v %v, want true", ok, err)
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
	s, err := NewSession(ctx, "", WithHolder(holder))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := s.Acquire(ctx, unique(t, "r"), 900*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Acquire(ctx, unique(t, "r"), 900*time.Millisecond)
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
	s, err := NewSession(ctx, "", WithHolder(holder))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, err := s.Acquire(ctx, unique(t, "r"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	busy := unique(t, "r")
	blocker, err := Acquire(ctx, "", busy, 10*time.Second, WithHolder(other))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(4 * ttl)
		blocker.Release()
	}()
	second, err := s.Acquire(ctx, busy, ttl, WithWait(10*time.Second))
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
