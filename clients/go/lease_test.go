package fencing

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLeaseGrantBusyOwnRelease(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	r, a, b := unique(t, "r"), unique(t, "a"), unique(t, "b")

	before := time.Now()
	lease, err := Acquire(ctx, "", r, 10*time.Second, WithHolder(a))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	defer lease.Release()
	after := time.Now()
	if d := lease.Deadline(); d.Before(before.Add(10*time.Second)) || d.After(after.Add(10*time.Second)) {
		t.Errorf("deadline %v not counted from the start of the call (%v to %v, + 10s)", d, before, after)
	}
	if holder, token, ok := live(t, conn, r); !ok || holder != a || token != lease.Token() {
		t.Fatalf("fencing.leases: %v %v %v, want %s %d", holder, token, ok, a, lease.Token())
	}
	if n := keepalives(t, conn, a); n != 1 {
		t.Errorf("%d keepalive connections named for %s, want 1", n, a)
	}

	asked := time.Now()
	if _, err := Acquire(ctx, "", r, 10*time.Second, WithHolder(b), WithWait(0)); !errors.Is(err, ErrLeaseBusy) || errors.Is(err, ErrLeaseTimeout) || time.Since(asked) > 2*time.Second {
		t.Errorf("another holder's try: %v after %v, want ErrLeaseBusy (not ErrLeaseTimeout) at once", err, time.Since(asked))
	}
	if _, err := Acquire(ctx, "", r, 10*time.Second, WithHolder(a)); !errors.Is(err, ErrLeaseAlreadyHeld) {
		t.Errorf("the same holder again: %v, want ErrLeaseAlreadyHeld", err)
	}
	var notice bool // this server names the holder's own lease in a NOTICE (01T01)
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_proc WHERE proname = 'renew_all')").Scan(&notice); err != nil {
		t.Fatal(err)
	}
	var held *LeaseAlreadyHeldError
	if _, err := Acquire(ctx, "", r, 10*time.Second, WithHolder(a)); !errors.As(err, &held) || held.Token != lease.Token() || held.Resource != r || held.Holder != a {
		t.Errorf("the holder again: %v, want a *LeaseAlreadyHeldError naming token %d (notice %v)", err, lease.Token(), notice)
	}
	asked = time.Now()
	if _, err := Acquire(ctx, "", r, 10*time.Second, WithHolder(a), WithWait(5*time.Second)); !errors.Is(err, ErrLeaseAlreadyHeld) || time.Since(asked) > 2*time.Second {
		t.Errorf("the same holder again, waiting: %v after %v, want ErrLeaseAlreadyHeld at once", err, time.Since(asked))
	}
	if err := lease.Check(); err != nil {
		t.Errorf("check: %v", err)
	}

	if ok, err := lease.Release(); !ok || err != nil {
		t.Fatalf("release: %v %v, want true", ok, err)
	}
	if _, _, ok := live(t, conn, r); ok {
		t.Error("still live after release")
	}
	if lease.Context().Err() == nil || lease.Lost() || lease.Check() == nil {
		t.Errorf("after release: ctx %v, lost %v, check %v", lease.Context().Err(), lease.Lost(), lease.Check())
	}
	if ok, err := lease.Release(); !ok || err != nil {
		t.Errorf("second release: %v %v, want the first's true", ok, err)
	}
	if !eventually(2*time.Second, func() bool { return keepalives(t, conn, a) == 0 }) {
		t.Errorf("%d keepalive connections after release", keepalives(t, conn, a))
	}
}

func TestLeaseKeptAliveForFiveTTLs(t *testing.T) {
	conn := connect(t)
	r, a := unique(t, "r"), unique(t, "a")
	ttl := 600 * time.Millisecond
	lease, err := Acquire(context.Background(), "", r, ttl, WithHolder(a))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	time.Sleep(5 * ttl)
	if err := lease.Check(); err != nil {
		t.Fatalf("after five ttls: %v", err)
	}
	if _, token, ok := live(t, conn, r); !ok || token != lease.Token() {
		t.Fatalf("not live on the server after five ttls")
	}
	if left := time.Until(lease.Deadline()); left < ttl/3 || left > ttl {
		t.Errorf("%v left of a %v lease renewed at a third", left, ttl)
	}
}

func TestLeaseRenewalRefusedCancelsContext(t *testing.T) {
	conn := connect(t)
	r, a := unique(t, "r"), unique(t, "a")
	lease, err := Acquire(context.Background(), "", r, 900*time.Millisecond, WithHolder(a))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	// Someone else releases it on the holder's behalf: the next renewal is refused.
	if _, err := conn.Exec(context.Background(), "SELECT fencing.release($1, $2, $3)", r, a, lease.Token()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Context().Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the context was not cancelled")
	}
	if cause := context.Cause(lease.Context()); !errors.Is(cause, ErrLeaseLost) {
		t.Errorf("cause %v, want ErrLeaseLost", cause)
	}
	if !lease.Lost() || !errors.Is(lease.Check(), ErrLeaseLost) {
		t.Errorf("lost %v check %v", lease.Lost(), lease.Check())
	}
	if !eventually(2*time.Second, func() bool { return keepalives(t, conn, a) == 0 }) {
		t.Error("the keepalive connection of a lost lease stays open")
	}
	if ok, err := lease.Release(); ok || err != nil {
		t.Errorf("release of a lost lease: %v %v, want false and no error", ok, err)
	}
}

func TestLeaseKeepaliveReconnects(t *testing.T) {
	conn := connect(t)
	r, a := unique(t, "r"), unique(t, "a")
	ttl := 900 * time.Millisecond
	lease, err := Acquire(context.Background(), "", r, ttl, WithHolder(a))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	for i := 0; i < 2; i++ {
		if _, err := conn.Exec(context.Background(),
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", "fencing keepalive "+a); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * ttl)
		if err := lease.Check(); err != nil {
			t.Fatalf("after the keepalive connection was terminated: %v", err)
		}
	}
	if n := keepalives(t, conn, a); n != 1 {
		t.Errorf("%d keepalive connections, want 1", n)
	}
}

func TestLeaseLostAtTheDeadlineWithoutRenewals(t *testing.T) {
	connect(t)
	r, a := unique(t, "r"), unique(t, "a")
	ttl := 500 * time.Millisecond
	lease, err := Acquire(context.Background(), "", r, ttl, WithHolder(a))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	lease.keeper.stop() // as if the process stood still: no more renewals
	deadline := lease.Deadline()
	<-lease.Context().Done()
	if late := time.Since(deadline); late < 0 || late > 200*time.Millisecond {
		t.Errorf("loss signalled %v after the deadline", late)
	}
	if !lease.Lost() {
		t.Error("not lost")
	}
}

func TestLeaseWaitsForTheHolder(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	r, a, b := unique(t, "r"), unique(t, "a"), unique(t, "b")
	first, err := Acquire(ctx, "", r, 10*time.Second, WithHolder(a))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		first.Release()
	}()
	start := time.Now()
	second, err := Acquire(ctx, "", r, 10*time.Second, WithHolder(b), WithWait(5*time.Second))
	if err != nil {
		t.Fatalf("waiting acquire: %v", err)
	}
	defer second.Release()
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Errorf("granted after %v, before the release", waited)
	}
	if second.Token() <= first.Token() {
		t.Errorf("token %d not above %d", second.Token(), first.Token())
	}
	if holder, _, _ := live(t, conn, r); holder != b {
		t.Errorf("holder %q", holder)
	}

	if _, err := Acquire(ctx, "", r, 10*time.Second, WithHolder(a), WithWait(300*time.Millisecond)); !errors.Is(err, ErrLeaseTimeout) {
		t.Errorf("wait passed: %v, want ErrLeaseTimeout", err)
	}
}

func TestLeaseReleasedOnPanic(t *testing.T) {
	conn := connect(t)
	r, a := unique(t, "r"), unique(t, "a")
	var token int64
	func() {
		defer func() { _ = recover() }()
		lease, err := Acquire(context.Background(), "", r, 10*time.Second, WithHolder(a))
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release()
		token = lease.Token()
		panic("inside the lease")
	}()
	if token == 0 {
		t.Fatal("not acquired")
	}
	if _, _, ok := live(t, conn, r); ok {
		t.Error("still live after a panic inside the lease")
	}
}

// A grant after a wait longer than a third of the ttl is renewed at once:
// the lease starts with a full ttl.
func TestLeaseAfterALongWaitStartsWithAFullTTL(t *testing.T) {
	connect(t)
	ctx := context.Background()
	r, a, b := unique(t, "r"), unique(t, "a"), unique(t, "b")
	ttl := 600 * time.Millisecond
	first, err := Acquire(ctx, "", r, 10*time.Second, WithHolder(a))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(ttl)
		first.Release()
	}()
	second, err := Acquire(ctx, "", r, ttl, WithHolder(b), WithWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release()
	if left := time.Until(second.Deadline()); left < ttl*3/4 {
		t.Errorf("%v left right after a long wait, want about the ttl %v", left, ttl)
	}
}
