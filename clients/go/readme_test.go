package fencing

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// README.md shows examples/worker/main.go verbatim, and that program runs.
func TestReadmeExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("examples/worker/main.go")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(readme)
	if block == nil || string(block[1]) != string(example) {
		t.Fatal("README.md's first go block is not examples/worker/main.go")
	}

	conn := connect(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, status text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	var protected bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM fencing.protected_tables WHERE relation = 'orders'::regclass)").Scan(&protected); err != nil {
		t.Fatal(err)
	}
	if !protected {
		if _, err := conn.Exec(ctx, "SELECT fencing.protect('orders')"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, "INSERT INTO orders VALUES ('order:101', 'new', 33) ON CONFLICT (id) DO NOTHING"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "run", "./examples/worker").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "order:101 paid with token") {
		t.Fatalf("the example: %v\n%s", err, out)
	}
	var status string
	if err := conn.QueryRow(ctx, "SELECT status FROM orders WHERE id = 'order:101'").Scan(&status); err != nil || status != "paid" {
		t.Errorf("status %q (%v)", status, err)
	}
}

// docs/clients.md's Go section shows examples/seed/main.go verbatim, and
// that program runs in a new database.
func TestClientsSectionExample(t *testing.T) {
	section, err := os.ReadFile("../../docs/clients.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("examples/seed/main.go")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(section)
	if block == nil || string(block[1]) != string(example) {
		t.Fatal("docs/clients.md's first go block is not examples/seed/main.go")
	}

	conn := connect(t)
	ctx := context.Background()
	db := fmt.Sprintf("fencing_go_seed_%d", os.Getpid())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "DROP DATABASE "+db+" WITH (FORCE)")
	config := conn.Config().Copy()
	config.Database = db
	other, err := pgx.ConnectConfig(ctx, config)
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.Exec(ctx, "CREATE EXTENSION fencing")
	other.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "./examples/seed")
	cmd.Env = append(os.Environ(), "PGDATABASE="+db)
	out, err := cmd.CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^paid with token \d+\nrefused: orders \(id\)=\(101\) (\d+) < (\d+)\n$`).Match(out) {
		t.Fatalf("the example: %v\n%s", err, out)
	}
}
