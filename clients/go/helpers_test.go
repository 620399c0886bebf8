package fencing

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The tests run against the server of the libpq environment (PGHOST, PGPORT,
// PGUSER, PGDATABASE), as test/dev sets it; without one they skip.
func connect(t *testing.T) *pgx.Conn {
	t.Helper()
	if os.Getenv("PGHOST") == "" && os.Getenv("PGPORT") == "" && os.Getenv("PGDATABASE") == "" && os.Getenv("PGSERVICE") == "" {
		if os.Getenv("FENCING_GO_REQUIRE_SERVER") != "" { // clients/run: never a silent skip
			t.Fatal("FENCING_GO_REQUIRE_SERVER is set but no PostgreSQL is: set PGHOST, PGPORT, PGUSER, PGDATABASE")
		}
		t.Skip("no PostgreSQL: set PGHOST, PGPORT, PGUSER, PGDATABASE (test/dev does)")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, "")
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS fencing"); err != nil {
		t.Fatalf("CREATE EXTENSION: %v", err)
	}
	return conn
}

var serial atomic.Int64

// unique names a resource or holder for one test, short enough that
// "fencing keepalive <holder>" fits application_name (63 bytes).
func unique(t *testing.T, what string) string {
	name := t.Name()
	if len(name) > 24 {
		name = name[len(name)-24:]
	}
	return fmt.Sprintf("%s:%s:%d:%d", name, what, os.Getpid(), serial.Add(1))
}

func live(t *testing.T, conn *pgx.Conn, resource string) (holder string, token int64, ok bool) {
	t.Helper()
	err := conn.QueryRow(context.Background(),
		"SELECT holder, token FROM fencing.leases WHERE resource = $1 AND live", resource).Scan(&holder, &token)
	if err == pgx.ErrNoRows {
		return "", 0, false
	}
	if err != nil {
		t.Fatalf("fencing.leases: %v", err)
	}
	return holder, token, true
}

func keepalives(t *testing.T, conn *pgx.Conn, holder string) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", "fencing keepalive "+holder).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// eventually polls cond for up to d.
func eventually(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
