package fencing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// waiting is the backend of the connection named name waiting in
// fencing.acquire or fencing.campaign (pid, query_start), or pid 0.
func waiting(t *testing.T, conn *pgx.Conn, name string) (pid int, since time.Time) {
	t.Helper()
	err := conn.QueryRow(context.Background(),
		"SELECT pid, query_start FROM pg_stat_activity WHERE application_name = $1 AND state = 'active' AND (query LIKE '%fencing.acquire%' OR query LIKE '%fencing.campaign%')",
		name).Scan(&pid, &since)
	if err == pgx.ErrNoRows {
		return 0, time.Time{}
	}
	if err != nil {
		t.Fatal(err)
	}
	return pid, since
}

// busyResource: A holds a new resource for ttl; the server connection, the
// resource, a second holder's name and A's lease.
func busyResource(t *testing.T, ttl time.Duration) (*pgx.Conn, string, string, *Lease) {
	t.Helper()
	conn := connect(t)
	r, a, b := unique(t, "r"), unique(t, "a"), unique(t, "b")
	first, err := Acquire(context.Background(), "", r, ttl, WithHolder(a))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Release() })
	return conn, r, b, first
}

func TestAcquireWithTheDefaultHolder(t *testing.T) {
	conn := connect(t)
	r := unique(t, "r")
	lease, err := Acquire(context.Background(), "", r, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	if !holderForm.MatchString(lease.Holder()) {
		t.Errorf("holder %q is not the default identity", lease.Holder())
	}
	if holder, token, ok := live(t, conn, r); !ok || holder != lease.Holder() || token != lease.Token() {
		t.Errorf("fencing.leases: %q %d %v", holder, token, ok)
	}
	if n := keepalives(t, conn, lease.Holder()); n != 1 {
		t.Errorf("%d keepalive connections for %s", n, lease.Holder())
	}
	// Another default holder is another identity: busy, not its own lease.
	if _, err := Acquire(context.Background(), "", r, 10*time.Second, WithWait(0)); !errors.Is(err, ErrLeaseBusy) {
		t.Errorf("a second default holder: %v, want ErrLeaseBusy", err)
	}
}

// Without WithWait the context bounds the wait: its deadline is a timeout,
// and nothing stays queued.
func TestWaitBoundedByTheContextDeadline(t *testing.T) {
	conn, r, b, _ := busyResource(t, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Acquire(ctx, "", r, 10*time.Second, WithHolder(b))
	if took := time.Since(start); !errors.Is(err, ErrLeaseTimeout) || !errors.Is(err, context.DeadlineExceeded) || took < 500*time.Millisecond || took > 3*time.Second {
		t.Errorf("after %v: %v, want ErrLeaseTimeout at the context's deadline", took, err)
	}
	if pid, _ := waiting(t, conn, "fencing keepalive "+b); pid != 0 {
		t.Errorf("backend %d still waits", pid)
	}
}

// A cancelled context ends the wait with the server's call cancelled: no
// backend waits any more, and the next grant goes to someone else.
func TestCancelEndsTheServerSideWait(t *testing.T) {
	conn, r, b, first := busyResource(t, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Acquire(ctx, "", r, 10*time.Second, WithHolder(b))
		done <- err
	}()
	if !eventually(5*time.Second, func() bool { pid, _ := waiting(t, conn, "fencing keepalive "+b); return pid != 0 }) {
		t.Fatal("B never waited in fencing.acquire")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrLeaseTimeout) {
			t.Errorf("cancelled: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled wait did not end")
	}
	if !eventually(time.Second, func() bool { pid, _ := waiting(t, conn, "fencing keepalive "+b); return pid == 0 }) {
		t.Error("B's backend still waits after the cancellation")
	}
	if ok, err := first.Release(); !ok || err != nil {
		t.Fatal(ok, err)
	}
	time.Sleep(200 * time.Millisecond)
	if holder, _, ok := live(t, conn, r); ok {
		t.Errorf("granted to %q after the cancelled wait", holder)
	}
}

// Forever is one server-side call (no polling) that ends with the grant.
func TestWaitForeverIsOneCall(t *testing.T) {
	conn, r, b, first := busyResource(t, 900*time.Millisecond)
	got := make(chan *Lease, 1)
	go func() {
		l, err := Acquire(context.Background(), "", r, 900*time.Millisecond, WithHolder(b), WithWait(Forever))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	var pid int
	var since time.Time
	if !eventually(5*time.Second, func() bool { pid, since = waiting(t, conn, "fencing keepalive "+b); return pid != 0 }) {
		t.Fatal("B never waited")
	}
	time.Sleep(1500 * time.Millisecond) // A renews meanwhile
	if p, s := waiting(t, conn, "fencing keepalive "+b); p != pid || !s.Equal(since) {
		t.Errorf("the wait is not one call: backend %d since %v, then %d since %v", pid, since, p, s)
	}
	if first.Lost() {
		t.Fatal("A lost its lease")
	}
	first.Release()
	select {
	case l := <-got:
		if l == nil || l.Token() <= first.Token() {
			t.Fatalf("B: %v", l)
		}
		l.Release()
	case <-time.After(2 * time.Second):
		t.Fatal("B not granted after A's release")
	}
}

func TestUnsupportedServer(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	for _, version := range []string{"", "0.3.0"} {
		db := fmt.Sprintf("fencing_go_old_%d_%s", os.Getpid(), strings.ReplaceAll(version, ".", "_"))
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
			t.Fatal(err)
		}
		defer conn.Exec(ctx, "DROP DATABASE "+db+" WITH (FORCE)")
		if version != "" {
			config := conn.Config().Copy()
			config.Database = db
			other, err := pgx.ConnectConfig(ctx, config)
			if err != nil {
				t.Fatal(err)
			}
			_, err = other.Exec(ctx, "CREATE EXTENSION fencing VERSION '"+version+"'")
			other.Close(ctx)
			if err != nil {
				t.Fatal(err)
			}
		}
		_, err := Acquire(ctx, "dbname="+db, "r", time.Second)
		if !errors.Is(err, ErrUnsupportedServer) {
			t.Errorf("fencing %q: %v, want ErrUnsupportedServer", version, err)
		}
		if version != "" && !strings.Contains(err.Error(), "ALTER EXTENSION fencing UPDATE") {
			t.Errorf("the error does not say ALTER EXTENSION fencing UPDATE: %v", err)
		}
		if _, err := NewSession(ctx, "dbname="+db); !errors.Is(err, ErrUnsupportedServer) {
			t.Errorf("a session on fencing %q: %v", version, err)
		}
	}
}
