package fencing

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
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
