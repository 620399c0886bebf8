package fencing

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// protectedTable creates a protected table with one row (id 1) at token 10.
func protectedTable(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	ctx := context.Background()
	name := strings.NewReplacer(":", "_", "/", "_").Replace(strings.ToLower(unique(t, "t")))
	for _, q := range []string{
		"CREATE TABLE " + name + " (id int PRIMARY KEY, status text)",
		"SELECT fencing.protect('" + name + "')",
		"INSERT INTO " + name + " VALUES (1, 'new', 10)",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { conn.Exec(context.Background(), "DROP TABLE "+name) })
	return name
}

func TestFencedWriteAndStaleRefusal(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	table := protectedTable(t, conn)
	update := func(status string) func(pgx.Tx) error {
		return func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "UPDATE "+table+" SET status = $1 WHERE id = 1", status)
			return err
		}
	}
	if err := Fenced(ctx, conn, Token(12), update("paid")); err != nil {
		t.Fatalf("fenced write: %v", err)
	}

	var seen []*StaleTokenError
	before := StaleRefusals()
	err := Fenced(ctx, conn, Token(11), update("late"), OnStale(func(e *StaleTokenError) { seen = append(seen, e) }))
	var stale *StaleTokenError
	if !errors.As(err, &stale) {
		t.Fatalf("stale write: %v, want *StaleTokenError", err)
	}
	want := StaleTokenError{Schema: "public", Table: table, Column: "last_fencing_token",
		Constraint: "fencing_stale_token", Key: "(id)=(1)", Mode: "monotonic", Presented: 11, Stored: 12}
	got := *stale
	got.err = nil
	if got != want {
		t.Errorf("stale error\n got %+v\nwant %+v", got, want)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23T01" {
		t.Errorf("the driver's error is not in the chain: %v", err)
	}
	if len(seen) != 1 || seen[0] != stale {
		t.Errorf("OnStale saw %v", seen)
	}
	if n := StaleRefusals() - before; n != 1 {
		t.Errorf("StaleRefusals went up by %d", n)
	}
	var status string
	if err := conn.QueryRow(ctx, "SELECT status FROM "+table+" WHERE id = 1").Scan(&status); err != nil || status != "paid" {
		t.Errorf("status %q (%v) after the refused write", status, err)
	}
	// The token never outlives the transaction: the connection carries none.
	var setting string
	if err := conn.QueryRow(ctx, "SELECT coalesce(current_setting('fencing.token', true), '')").Scan(&setting); err != nil || setting != "" {
		t.Errorf("fencing.token after Fenced: %q (%v)", setting, err)
	}
}

func TestMissingTokenMapped(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	table := protectedTable(t, conn)
	err := MapError(pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE "+table+" SET status = 'x' WHERE id = 1")
		return err
	}))
	var missing *MissingTokenError
	if !errors.As(err, &missing) {
		t.Fatalf("unfenced write: %v, want *MissingTokenError", err)
	}
	if missing.Table != table || missing.Column != "last_fencing_token" || missing.Key != "(id)=(1)" ||
		missing.Stored != 10 || missing.Constraint != "fencing_missing_token" {
		t.Errorf("missing error %+v", *missing)
	}
}

func TestFencedWithLease(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	table := protectedTable(t, conn)
	lease, err := Acquire(ctx, "", unique(t, "r"), 10*time.Second, WithHolder(unique(t, "a")))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	var rows int64
	err = Fenced(ctx, conn, lease, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "UPDATE "+table+" SET status = 'paid' WHERE id = 1")
		rows = tag.RowsAffected()
		return err
	})
	if err != nil || rows != 1 {
		t.Fatalf("fenced write with the lease: %d rows, %v", rows, err)
	}
	var stored int64
	if err := conn.QueryRow(ctx, "SELECT last_fencing_token FROM "+table+" WHERE id = 1").Scan(&stored); err != nil || stored != lease.Token() {
		t.Errorf("stored token %d, want %d (%v)", stored, lease.Token(), err)
	}

	// Lost between the statements and COMMIT: rolled back, ErrLeaseLost.
	err = Fenced(ctx, conn, lease, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "UPDATE "+table+" SET status = 'lost' WHERE id = 1"); err != nil {
			return err
		}
		_, err := lease.Release()
		return err
	})
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("lost before COMMIT: %v, want ErrLeaseLost", err)
	}
	var status string
	if err := conn.QueryRow(ctx, "SELECT status FROM "+table+" WHERE id = 1").Scan(&status); err != nil || status != "paid" {
		t.Errorf("status %q after a write whose lease was lost before COMMIT", status)
	}

	// Lost on entry: nothing is sent.
	called := false
	err = Fenced(ctx, conn, lease, func(pgx.Tx) error { called = true; return nil })
	if !errors.Is(err, ErrLeaseLost) || called {
		t.Errorf("lost on entry: %v, fn called %v", err, called)
	}
}

func TestFencedRollsBackOnPanic(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	table := protectedTable(t, conn)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not go on")
			}
		}()
		Fenced(ctx, conn, Token(20), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "UPDATE "+table+" SET status = 'panic' WHERE id = 1"); err != nil {
				return err
			}
			panic("inside the transaction")
		})
	}()
	var status string
	if err := conn.QueryRow(ctx, "SELECT status FROM "+table+" WHERE id = 1").Scan(&status); err != nil || status != "new" {
		t.Errorf("status %q (%v) after a panic", status, err)
	}
}

func TestStaleDetailParsed(t *testing.T) {
	for _, c := range []struct {
		detail, key, resource string
		stored                int64
	}{
		{"Relation public.t, key (id)=(1): presented token 5, stored token 7 (monotonic mode).", "(id)=(1)", "", 7},
		{`Relation "my schema"."a, key b", key (a, b)=(x: 1, y): presented token 5, stored token 7 (strict mode).`, "(a, b)=(x: 1, y)", "", 7},
		{"Relation public.t, all rows: presented token 5, stored token 7 (monotonic mode).", "", "", 7},
		{"Relation public.t, key (not visible): presented token 5, stored token (not visible) (monotonic mode).", "", "", 0},
		{`Resource "order:101": presented token 5, stored token 7 (monotonic mode).`, "", "order:101", 7},
	} {
		err := MapError(&pgconn.PgError{Code: "23T01", Detail: c.detail})
		var stale *StaleTokenError
		if !errors.As(err, &stale) {
			t.Fatalf("%s: %v", c.detail, err)
		}
		if stale.Presented != 5 || stale.Stored != c.stored || stale.Resource != c.resource || (c.key != "" && stale.Key != c.key) {
			t.Errorf("%s: %+v", c.detail, *stale)
		}
	}
	err := MapError(&pgconn.PgError{Code: "23T02", Detail: "Relation public.t, key (id)=(1): no token presented, stored token 7. fencing.token was ignored"})
	var missing *MissingTokenError
	if !errors.As(err, &missing) || missing.Key != "(id)=(1)" || missing.Stored != 7 {
		t.Errorf("missing: %v", err)
	}
}

func TestFencedRefusesAnOpenTransaction(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	noop := func(pgx.Tx) error { return nil }
	if err := Fenced(ctx, tx, Token(5), noop); err == nil || !strings.Contains(err.Error(), "its own transaction") {
		t.Errorf("in a pgx.Tx: %v", err)
	}
	if err := Fenced(ctx, conn, Token(5), noop); err == nil || !strings.Contains(err.Error(), "its own transaction") {
		t.Errorf("on a connection in a transaction: %v", err)
	}
}

// A connection checked out of a pool, inside a transaction begun with a
// plain BEGIN: Fenced refuses it too (its COMMIT would end the caller's).
func TestFencedRefusesAnOpenTransactionOnAPoolConn(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if _, err := c.Exec(ctx, "CREATE TEMP TABLE callers_work (v text)"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "INSERT INTO callers_work VALUES ('not to be committed by Fenced')"); err != nil {
		t.Fatal(err)
	}
	noop := func(pgx.Tx) error { return nil }
	if err := Fenced(ctx, c, Token(5), noop); err == nil || !strings.Contains(err.Error(), "its own transaction") {
		t.Errorf("on a pool's connection in a transaction: %v", err)
	}
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM callers_work").Scan(&n); err != nil || n != 0 {
		t.Errorf("the caller's work was committed by Fenced: %d rows (%v)", n, err)
	}
	_ = conn
}

// Fenced takes a pool as well as a connection.
var _ Beginner = (*pgxpool.Pool)(nil)

func TestOwnLeaseNoticeParsed(t *testing.T) {
	m := heldToken.FindStringSubmatch(`holder "a" already holds the lease on resource "r" with token 2262392188417142`)
	if m == nil || m[1] != "2262392188417142" {
		t.Errorf("%v", m)
	}
}
