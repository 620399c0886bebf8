package fencing

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestDoRunsUnderTheLeaseAndReleases(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	table := protectedTable(t, conn)
	r := unique(t, "r")
	var token int64
	var holder string
	err := Do(ctx, "", r, 900*time.Millisecond, func(ctx context.Context, lease *Lease) error {
		token, holder = lease.Token(), lease.Holder()
		tag, err := Exec(ctx, conn, lease, "UPDATE "+table+" SET status = 'paid' WHERE id = 1")
		if err != nil || tag.RowsAffected() != 1 {
			t.Errorf("Exec: %v %v", tag, err)
		}
		time.Sleep(1500 * time.Millisecond) // longer than the ttl: kept alive
		if h, tok, ok := live(t, conn, r); !ok || h != holder || tok != token {
			t.Errorf("during the function: %q %d %v", h, tok, ok)
		}
		return ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := live(t, conn, r); ok {
		t.Error("live after Do returned")
	}
	if !eventually(2*time.Second, func() bool { return keepalives(t, conn, holder) == 0 }) {
		t.Error("a keepalive connection is left")
	}
	var stored int64
	if err := conn.QueryRow(ctx, "SELECT last_fencing_token FROM "+table+" WHERE id = 1").Scan(&stored); err != nil || stored != token {
		t.Errorf("stored %d, want %d (%v)", stored, token, err)
	}

	// The function's error comes back as it is, the lease released.
	mine := errors.New("mine")
	if err := Do(ctx, "", r, time.Second, func(context.Context, *Lease) error { return mine }); err != mine {
		t.Errorf("Do returned %v, want the function's error", err)
	}
	// A panic releases too, and goes on.
	func() {
		defer func() { _ = recover() }()
		_ = Do(ctx, "", r, time.Second, func(context.Context, *Lease) error { panic("inside") })
	}()
	if _, _, ok := live(t, conn, r); ok {
		t.Error("live after a panic inside Do")
	}
	// A busy try: the function never runs.
	other, err := Acquire(ctx, "", r, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	ran := false
	if err := Do(ctx, "", r, time.Second, func(context.Context, *Lease) error { ran = true; return nil }, WithWait(0)); !errors.Is(err, ErrLeaseBusy) || ran {
		t.Errorf("busy: %v, ran %v", err, ran)
	}
}

// A loss while the function runs cancels its context, and Do ends with
// ErrLeaseLost.
func TestDoLossCancelsTheContext(t *testing.T) {
	conn := connect(t)
	r := unique(t, "r")
	ttl := 900 * time.Millisecond
	var released time.Time
	err := Do(context.Background(), "", r, ttl, func(ctx context.Context, lease *Lease) error {
		if _, err := conn.Exec(context.Background(), "SELECT fencing.release($1, $2, $3)", r, lease.Holder(), lease.Token()); err != nil {
			t.Fatal(err)
		}
		released = time.Now()
		select {
		case <-ctx.Done():
			if took := time.Since(released); took > ttl/3+time.Second {
				t.Errorf("the loss was seen %v after the release", took)
			}
			return ctx.Err()
		case <-time.After(10 * time.Second):
			t.Error("ctx not cancelled at the loss")
			return nil
		}
	})
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(err, context.Canceled) {
		t.Errorf("Do: %v, want ErrLeaseLost (wrapping the function's context.Canceled)", err)
	}
}

// A lease longer than the largest timeout the server takes (INT_MAX ms,
// ~24.8 days; a ttl may be 366 days) is bounded at that largest timeout.
func TestFencedBoundOfALongLease(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	lease, err := Acquire(ctx, "", unique(t, "r"), 366*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	var idle int64
	err = Fenced(ctx, conn, lease, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SELECT setting::bigint FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'").Scan(&idle)
	})
	if err != nil || idle != 2147483647 {
		t.Fatalf("a fenced write of a 366-day lease: timeout %d, %v; want 2147483647, nil", idle, err)
	}
}

// The fenced transaction of a lease is bounded by its remaining time; a
// plain token's is not.
func TestFencedBoundsTheTransactionByTheLease(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	lease, err := Acquire(ctx, "", unique(t, "r"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	show := func(fence Fence) (idle, xact string) {
		err := Fenced(ctx, conn, fence, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, "SELECT current_setting('idle_in_transaction_session_timeout'), coalesce(current_setting('transaction_timeout', true), '')").Scan(&idle, &xact); err != nil {
				return err
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return idle, xact
	}
	ms := func(s string) int64 {
		var n int64
		var unit string
		for i, c := range s {
			if c < '0' || c > '9' {
				n, _ = strconv.ParseInt(s[:i], 10, 64)
				unit = s[i:]
				break
			}
		}
		switch unit {
		case "ms":
			return n
		case "s":
			return n * 1000
		}
		return -1
	}
	idle, xact := show(lease)
	if n := ms(idle); n < 4000 || n > 5000 {
		t.Errorf("idle_in_transaction_session_timeout %q with a 5 s lease", idle)
	}
	if serverMajor(conn) >= 17 {
		if n := ms(xact); n < 4000 || n > 5000 {
			t.Errorf("transaction_timeout %q with a 5 s lease on PostgreSQL 17+", xact)
		}
	}
	idle, xact = show(Token(1))
	if idle != "0" || (xact != "" && xact != "0") {
		t.Errorf("with a plain token: %q %q, want nothing set", idle, xact)
	}
	// SET LOCAL: gone after the transaction.
	var after string
	if err := conn.QueryRow(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&after); err != nil || after != "0" {
		t.Errorf("after the transaction: %q %v", after, err)
	}
}

// A holder frozen in its fenced transaction (here: asleep between its
// UPDATE and its COMMIT) is ended by the server at its deadline, and the
// next holder's write of the row goes through then, not when it wakes.
func TestFrozenInTransactionEndedAtTheDeadline(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	table := protectedTable(t, conn)
	r := unique(t, "r")
	lease, err := Acquire(ctx, "", r, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	frozen, err := pgx.Connect(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Close(ctx)
	updated := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		result <- Fenced(ctx, frozen, lease, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "UPDATE "+table+" SET status = 'a' WHERE id = 1"); err != nil {
				return err
			}
			close(updated)
			lease.keeper.stop() // the holder is frozen: no renewals either
			time.Sleep(2500 * time.Millisecond)
			return nil
		})
	}()
	<-updated
	start := time.Now()
	tag, err := conn.Exec(ctx, "UPDATE "+table+" SET status = 'b', last_fencing_token = 99999999999999999 WHERE id = 1")
	if took := time.Since(start); err != nil || tag.RowsAffected() != 1 || took > 1500*time.Millisecond {
		t.Errorf("the next write: %v %v after %v, want through by the lease's deadline", tag, err, took)
	}
	if err := <-result; !errors.Is(err, ErrLeaseLost) {
		t.Errorf("the frozen holder's write: %v, want ErrLeaseLost", err)
	}
	var status string
	if err := conn.QueryRow(ctx, "SELECT status FROM "+table+" WHERE id = 1").Scan(&status); err != nil || status != "b" {
		t.Errorf("status %q (%v), want b", status, err)
	}
}
