package fencing

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A lease with no server behind it, to test the deadline rule alone.
func offlineLease(t *testing.T, ttl time.Duration) *Lease {
	k, err := newKeeper("host=127.0.0.1 port=1", "offline", ttl, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return newLease(k, nil, "r", 7, ttl, time.Now().Add(ttl))
}

func TestDeadlineCountsFromTheStartOfTheAcknowledgedCall(t *testing.T) {
	ttl := time.Second
	l := offlineLease(t, ttl)
	start := time.Now()
	time.Sleep(50 * time.Millisecond) // the call takes a while
	l.extend(start)
	if d := l.Deadline(); !d.Equal(start.Add(ttl)) {
		t.Errorf("deadline %v, want the start of the call + ttl %v", d, start.Add(ttl))
	}
	// An older acknowledgement never moves the deadline back.
	l.extend(start.Add(-500 * time.Millisecond))
	if d := l.Deadline(); !d.Equal(start.Add(ttl)) {
		t.Errorf("deadline moved back to %v", d)
	}
}

func TestRenewalStartedAfterTheDeadlineDoesNotRevive(t *testing.T) {
	l := offlineLease(t, 100*time.Millisecond)
	deadline := l.Deadline()
	l.extend(deadline.Add(time.Millisecond))
	if !l.Lost() || !errors.Is(l.Check(), ErrLeaseLost) || l.Context().Err() == nil {
		t.Fatalf("a renewal started after the deadline revived the lease: lost %v", l.Lost())
	}
	time.Sleep(150 * time.Millisecond)
	l.extend(time.Now())
	if !l.Lost() {
		t.Error("a lost lease came back")
	}
}

func TestLostByTheClockWithoutTheTimer(t *testing.T) {
	l := offlineLease(t, 50*time.Millisecond)
	l.timer.Stop() // as if no goroutine had run since: a stopped process thawing
	time.Sleep(80 * time.Millisecond)
	if l.Context().Err() != nil {
		t.Fatal("the timer was stopped")
	}
	if !l.Lost() || l.Context().Err() == nil {
		t.Error("Lost() did not read the clock")
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, ErrLeaseLost) {
		t.Errorf("cause %v", cause)
	}
}

// Renewals that fail (the server unreachable) are retried until the
// deadline; the loss is signalled then, not at the first failure.
func TestFailedRenewalsRetriedUntilTheDeadline(t *testing.T) {
	conn := connect(t)
	r, a := unique(t, "r"), unique(t, "a")
	ttl := 900 * time.Millisecond
	lease, err := Acquire(context.Background(), "", r, ttl, WithHolder(a))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	lease.keeper.mu.Lock()
	lease.keeper.config.Port = 1 // every reconnection fails from now on
	for _, f := range lease.keeper.config.Fallbacks {
		f.Port = 1
	}
	lease.keeper.mu.Unlock()
	terminated := time.Now()
	if _, err := conn.Exec(context.Background(),
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", "fencing keepalive "+a); err != nil {
		t.Fatal(err)
	}
	<-lease.Context().Done()
	lost := time.Now()
	deadline := lease.Deadline()
	if lost.Before(deadline) {
		t.Errorf("the loss was signalled %v before the deadline", deadline.Sub(lost))
	}
	if late := lost.Sub(deadline); late > 200*time.Millisecond {
		t.Errorf("the loss was signalled %v after the deadline", late)
	}
	if held := lost.Sub(terminated); held < ttl/2 {
		t.Errorf("lost %v after the connection died: not retried until the deadline", held)
	}
}
