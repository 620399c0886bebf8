package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A worker process spoken to over the protocol, as the driver does.
type process struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func start(t *testing.T) *process {
	t.Helper()
	if os.Getenv("PGHOST") == "" && os.Getenv("PGPORT") == "" && os.Getenv("PGDATABASE") == "" {
		if os.Getenv("FENCING_GO_REQUIRE_SERVER") != "" { // clients/run: never a silent skip
			t.Fatal("FENCING_GO_REQUIRE_SERVER is set but no PostgreSQL is: set PGHOST, PGPORT, PGUSER, PGDATABASE")
		}
		t.Skip("no PostgreSQL: set PGHOST, PGPORT, PGUSER, PGDATABASE (test/dev does)")
	}
	bin := filepath.Join(t.TempDir(), "worker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{t: t, cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("worker exit: %v", err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Error("the worker did not exit at EOF")
		}
	})
	return p
}

func (p *process) ask(req string) map[string]any {
	p.t.Helper()
	if _, err := fmt.Fprintln(p.in, req); err != nil {
		p.t.Fatal(err)
	}
	if !p.out.Scan() {
		p.t.Fatalf("no answer to %s", req)
	}
	var a map[string]any
	if err := json.Unmarshal(p.out.Bytes(), &a); err != nil {
		p.t.Fatalf("answer %q: %v", p.out.Text(), err)
	}
	return a
}

func db(t *testing.T) *pgx.Conn {
	conn, err := pgx.Connect(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	for _, q := range []string{
		"CREATE EXTENSION IF NOT EXISTS fencing",
		"DROP TABLE IF EXISTS go_worker_orders",
		"CREATE TABLE go_worker_orders (id int PRIMARY KEY, status text)",
		"SELECT fencing.protect('go_worker_orders')",
		"INSERT INTO go_worker_orders VALUES (1, 'new', 1)",
	} {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return conn
}

// The frozen worker: stopped past its ttl, it sees the loss when it thaws,
// its fenced write answers LeaseLost without reaching the server, and the
// same write with the raw token is refused by the storage.
func TestFrozenWorker(t *testing.T) {
	p := start(t)
	conn := db(t)
	ctx := context.Background()
	resource := fmt.Sprintf("frozen:%d", os.Getpid())
	a := p.ask(`{"op":"lease","resource":"` + resource + `","holder":"frozen-a","ttl":1,"wait":null}`)
	if a["ok"] != true {
		t.Fatalf("lease: %v", a)
	}
	token := int64(a["token"].(float64))
	if a := p.ask(`{"op":"write","resource":"` + resource + `","sql":"UPDATE go_worker_orders SET status = 'a' WHERE id = 1"}`); a["ok"] != true || a["rows"] != 1.0 {
		t.Fatalf("write: %v", a)
	}

	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	var next int64
	if err := conn.QueryRow(ctx, "SELECT fencing.acquire($1, 'frozen-b', '10 s')", resource).Scan(&next); err != nil {
		t.Fatalf("the next holder: %v", err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx.Exec(ctx, "SELECT set_config('fencing.token', $1, true)", fmt.Sprint(next))
	if _, err := tx.Exec(ctx, "UPDATE go_worker_orders SET status = 'b' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	if a := p.ask(`{"op":"status","resource":"` + resource + `"}`); a["lost"] != true || a["remaining"].(float64) >= 0 {
		t.Errorf("status on thaw: %v", a)
	}
	if a := p.ask(`{"op":"await_lost","resource":"` + resource + `","timeout":0.5}`); a["lost"] != true {
		t.Errorf("await_lost: %v", a)
	}
	if a := p.ask(`{"op":"write","resource":"` + resource + `","sql":"UPDATE go_worker_orders SET status = 'late' WHERE id = 1"}`); a["error"] != "LeaseLost" {
		t.Errorf("fenced write after the loss: %v", a)
	}
	a = p.ask(fmt.Sprintf(`{"op":"write","token":%d,"sql":"UPDATE go_worker_orders SET status = 'late' WHERE id = 1"}`, token))
	if a["error"] != "StaleToken" || a["table"] != "go_worker_orders" || a["column"] != "last_fencing_token" ||
		a["constraint"] != "fencing_stale_token" || a["key"] != "(id)=(1)" || a["presented"] != float64(token) || a["stored"] != float64(next) {
		t.Errorf("write with the raw token: %v", a)
	}
	if a := p.ask(`{"op":"stale_count"}`); a["count"] != 1.0 || a["callbacks"] != 1.0 {
		t.Errorf("stale_count: %v", a)
	}
	if a := p.ask(`{"op":"write","sql":"UPDATE go_worker_orders SET status = 'none' WHERE id = 1"}`); a["error"] != "MissingToken" || a["stored"] != float64(next) {
		t.Errorf("write without a token: %v", a)
	}
	if a := p.ask(`{"op":"release","resource":"` + resource + `"}`); a["ok"] != true || a["released"] != false {
		t.Errorf("release of the lost lease: %v", a)
	}
}

func TestSessionRaiseInsideAndQuit(t *testing.T) {
	p := start(t)
	conn := db(t)
	ctx := context.Background()
	r1, r2 := fmt.Sprintf("s1:%d", os.Getpid()), fmt.Sprintf("s2:%d", os.Getpid())
	a := p.ask(`{"op":"session","holder":"sess-h","ttl":0.9,"resources":["` + r1 + `","` + r2 + `"]}`)
	if a["ok"] != true || len(a["tokens"].([]any)) != 2 {
		t.Fatalf("session: %v", a)
	}
	if a := p.ask(`{"op":"lease","resource":"` + r1 + `","holder":"other","ttl":1,"wait":null}`); a["error"] != "LeaseBusy" {
		t.Errorf("busy: %v", a)
	}
	time.Sleep(3 * time.Second)
	if a := p.ask(`{"op":"status","resource":"` + r2 + `"}`); a["lost"] != false || a["remaining"].(float64) <= 0 {
		t.Errorf("status after three ttls: %v", a)
	}
	raised := fmt.Sprintf("raise:%d", os.Getpid())
	a = p.ask(`{"op":"raise_inside","resource":"` + raised + `","holder":"raiser","ttl":10}`)
	if a["ok"] != true {
		t.Fatalf("raise_inside: %v", a)
	}
	var live bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM fencing.leases WHERE resource = $1 AND live)", raised).Scan(&live); err != nil || live {
		t.Errorf("live after raise_inside: %v %v", live, err)
	}
	if a := p.ask(`{"op":"release","resource":"` + r1 + `"}`); a["released"] != true {
		t.Errorf("release: %v", a)
	}
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM fencing.leases WHERE resource IN ($1, $2) AND live)", r1, r2).Scan(&live); err != nil || live {
		t.Errorf("session leases live after release: %v %v", live, err)
	}
	if a := p.ask(`{"op":"quit"}`); a["ok"] != true {
		t.Errorf("quit: %v", a)
	}
}

// The requests of issue 38, each once, and the bad ones.
func TestIssue38Requests(t *testing.T) {
	a, b := start(t), start(t)
	db(t)
	pid := os.Getpid()
	r := fmt.Sprintf("new:%d", pid)
	got := a.ask(`{"op":"lease","resource":"` + r + `","holder":null,"ttl":2,"wait":"forever"}`)
	holder, _ := got["holder"].(string)
	if got["ok"] != true || !regexp.MustCompile(`^.+:\d+:[0-9a-f]{8}$`).MatchString(holder) {
		t.Fatalf("lease without a holder: %v", got)
	}
	if got := b.ask(`{"op":"lease","resource":"` + r + `","ttl":2,"wait":0}`); got["error"] != "LeaseBusy" {
		t.Errorf("a try: %v", got)
	}
	if got := b.ask(`{"op":"lease","resource":"` + r + `","ttl":2,"wait":"soon"}`); got["ok"] != false || !strings.Contains(got["message"].(string), "bad wait") {
		t.Errorf("a bad wait: %v", got)
	}
	// lease_async, then cancelled; then one that is granted.
	if got := b.ask(`{"op":"lease_async","resource":"` + r + `","ttl":2,"wait":"forever"}`); got["ok"] != true {
		t.Fatalf("lease_async: %v", got)
	}
	if got := b.ask(`{"op":"await_lease","resource":"` + r + `","timeout":0.3}`); got["message"] != "pending" {
		t.Errorf("await_lease while A holds: %v", got)
	}
	if got := b.ask(`{"op":"cancel","resource":"` + r + `"}`); got["ok"] != true || got["cancelled"] != true {
		t.Errorf("cancel: %v", got)
	}
	if got := b.ask(`{"op":"cancel","resource":"nothing"}`); got["ok"] != false {
		t.Errorf("cancel of nothing: %v", got)
	}
	if got := a.ask(`{"op":"release","resource":"` + r + `"}`); got["released"] != true {
		t.Fatalf("release: %v", got)
	}
	// do: the write inside, the lease released after.
	got = b.ask(`{"op":"do","resource":"` + r + `","ttl":2,"sql":"UPDATE go_worker_orders SET status = 'do' WHERE id = 1","hold":0.2}`)
	if got["ok"] != true || got["rows"] != 1.0 {
		t.Errorf("do: %v", got)
	}
	// write_hold with a lease held.
	if got := a.ask(`{"op":"lease","resource":"` + r + `","ttl":2,"wait":5}`); got["ok"] != true {
		t.Fatalf("lease: %v", got)
	}
	if got := a.ask(`{"op":"write_hold","resource":"` + r + `","sql":"UPDATE go_worker_orders SET status = 'hold' WHERE id = 1","hold":0.1}`); got["ok"] != true || got["rows"] != 1.0 {
		t.Errorf("write_hold: %v", got)
	}
	// An election: A leads, B waits, A resigns, B leads.
	e := fmt.Sprintf("e:%d", pid)
	if got := a.ask(`{"op":"campaign","election":"` + e + `","candidate":null,"ttl":2,"recampaign":false}`); got["ok"] != true || got["candidate"] == nil {
		t.Fatalf("campaign: %v", got)
	}
	if got := a.ask(`{"op":"await_leader","election":"` + e + `","timeout":5}`); got["leader"] != true {
		t.Fatalf("await_leader: %v", got)
	}
	if got := b.ask(`{"op":"campaign","election":"` + e + `","candidate":"b-` + e + `","ttl":2,"recampaign":false}`); got["candidate"] != "b-"+e {
		t.Fatalf("B's campaign: %v", got)
	}
	if got := b.ask(`{"op":"election_status","election":"` + e + `"}`); got["leader"] != false || got["token"] != nil {
		t.Errorf("B's status while A leads: %v", got)
	}
	if got := b.ask(`{"op":"write","election":"` + e + `","sql":"UPDATE go_worker_orders SET status = 'b' WHERE id = 1"}`); got["error"] != "LeaseLost" {
		t.Errorf("B's write: %v", got)
	}
	if got := b.ask(`{"op":"current_leader","election":"` + e + `"}`); got["holder"] == nil || got["holder"] == "b-"+e {
		t.Errorf("current_leader: %v", got)
	}
	if got := a.ask(`{"op":"resign","election":"` + e + `"}`); got["resigned"] != true {
		t.Errorf("resign: %v", got)
	}
	if got := b.ask(`{"op":"await_leader","election":"` + e + `","timeout":5}`); got["leader"] != true {
		t.Errorf("B after the resign: %v", got)
	}
	if got := b.ask(`{"op":"write","election":"` + e + `","sql":"UPDATE go_worker_orders SET status = 'b' WHERE id = 1"}`); got["rows"] != 1.0 {
		t.Errorf("B's write as the leader: %v", got)
	}
	if got := a.ask(`{"op":"events","election":"` + e + `"}`); len(got["events"].([]any)) < 2 {
		t.Errorf("A's events: %v", got)
	}
	if got := a.ask(`{"op":"election_status","election":"nowhere"}`); got["ok"] != false {
		t.Errorf("an unknown election: %v", got)
	}
	if got := a.ask(`{"op":"frobnicate"}`); got["ok"] != false || got["message"] != "unknown op frobnicate" {
		t.Errorf("an unknown op: %v", got)
	}
}
