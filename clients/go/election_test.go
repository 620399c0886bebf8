package fencing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// recorder keeps an election's callbacks in order.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func (r *recorder) options() []ElectionOption {
	return []ElectionOption{
		OnStartedLeading(func(token int64) { r.add(fmt.Sprintf("started %d", token)) }),
		OnStoppedLeading(func() { r.add("stopped") }),
		OnNewLeader(func(holder string, token int64) { r.add(fmt.Sprintf("leader %s %d", holder, token)) }),
	}
}

func newElection(t *testing.T, name string, ttl time.Duration, opts ...ElectionOption) *Election {
	t.Helper()
	e, err := NewElection("", name, ttl, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// One leader; the next candidate waits in order and leads at once after the
// resign; callbacks in order; Leader() and fencing.leader() agree; the
// leader's token fences its writes, a candidate's write is refused.
func TestElectionCampaignResignHandOver(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	table := protectedTable(t, conn)
	name := unique(t, "e")
	var ra, rb recorder
	a := newElection(t, name, 2*time.Second, append(ra.options(), WithHolder(unique(t, "a")))...)
	b := newElection(t, name, 2*time.Second, append(rb.options(), WithHolder(unique(t, "b")))...)
	if err := a.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	if !a.IsLeader() || a.Token() == 0 || a.Check() != nil || a.Context().Err() != nil {
		t.Fatalf("A after its campaign: leader %v token %d", a.IsLeader(), a.Token())
	}
	if err := a.Campaign(ctx); err != nil { // leading already
		t.Errorf("a second campaign of the leader: %v", err)
	}
	bDone := make(chan error, 1)
	go func() { bDone <- b.Campaign(ctx) }()
	if !eventually(5*time.Second, func() bool { pid, _ := waiting(t, conn, "fencing keepalive "+b.Candidate()); return pid != 0 }) {
		t.Fatal("B does not wait in fencing.campaign()")
	}
	if b.IsLeader() || b.Token() != 0 || !errors.Is(b.Check(), ErrLeaseLost) || b.Context().Err() == nil {
		t.Error("B leads while waiting")
	}
	info, err := b.Leader(ctx)
	if err != nil || info == nil || info.Holder != a.Candidate() || info.Token != a.Token() {
		t.Errorf("B's Leader(): %+v %v, want A", info, err)
	}
	if tag, err := Exec(ctx, conn, a, "UPDATE "+table+" SET status = 'a' WHERE id = 1"); err != nil || tag.RowsAffected() != 1 {
		t.Errorf("the leader's write: %v %v", tag, err)
	}
	if _, err := Exec(ctx, conn, b, "UPDATE "+table+" SET status = 'b' WHERE id = 1"); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("a candidate's write: %v, want ErrLeaseLost", err)
	}
	tokenA := a.Token()
	resigned := time.Now()
	if ok, err := a.Resign(ctx); !ok || err != nil {
		t.Fatalf("resign: %v %v", ok, err)
	}
	select {
	case err := <-bDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("B does not lead after A's resign")
	}
	if took := time.Since(resigned); took > time.Second {
		t.Errorf("B led %v after the resign", took)
	}
	if !b.IsLeader() || b.Token() <= tokenA || a.IsLeader() {
		t.Errorf("after the resign: A %v, B %v with %d (A had %d)", a.IsLeader(), b.IsLeader(), b.Token(), tokenA)
	}
	if ok, err := a.Resign(ctx); ok || err != nil {
		t.Errorf("a second resign: %v %v, want false", ok, err)
	}
	var holder string
	var token int64
	if err := conn.QueryRow(ctx, "SELECT holder, token FROM fencing.leader($1)", name).Scan(&holder, &token); err != nil || holder != b.Candidate() || token != b.Token() {
		t.Errorf("fencing.leader(): %q %d %v", holder, token, err)
	}
	if !eventually(2*time.Second, func() bool { return len(ra.list()) == 2 }) || strings.Join(ra.list(), ",") != fmt.Sprintf("started %d,stopped", tokenA) {
		t.Errorf("A's callbacks: %v", ra.list())
	}
	if ok, err := b.Resign(ctx); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if info, err := a.Leader(ctx); info != nil || err != nil {
		t.Errorf("no leader after both resigned: %+v %v", info, err)
	}
}

// Observe sees each leader in order, at once, without polling.
func TestElectionObserve(t *testing.T) {
	connect(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	name := unique(t, "e")
	var ro recorder
	o := newElection(t, name, 2*time.Second, ro.options()...)
	seen := o.Observe(ctx)
	next := func(what string) LeaderInfo {
		t.Helper()
		select {
		case l, ok := <-seen:
			if !ok {
				t.Fatalf("%s: the channel closed", what)
			}
			return l
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: nothing observed within 2 s", what)
		}
		return LeaderInfo{}
	}
	if l := next("at the start"); l.Holder != "" {
		t.Fatalf("a leader before any campaign: %+v", l)
	}
	a := newElection(t, name, 2*time.Second)
	if err := a.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	if l := next("A's grant"); l.Holder != a.Candidate() || l.Token != a.Token() {
		t.Errorf("observed %+v, want A", l)
	}
	b := newElection(t, name, 2*time.Second)
	bDone := make(chan error, 1)
	go func() { bDone <- b.Campaign(ctx) }()
	time.Sleep(300 * time.Millisecond)
	a.Resign(ctx)
	l := next("A's resign")
	if l.Holder == "" { // the release's notification may come before the grant's
		l = next("B's grant")
	}
	if err := <-bDone; err != nil || l.Holder != b.Candidate() || l.Token != b.Token() {
		t.Errorf("observed %+v (%v), want B", l, err)
	}
	stop()
	if _, ok := <-seen; ok {
		for range seen {
		}
	}
	want := fmt.Sprintf("leader %s %d", b.Candidate(), b.Token())
	eventually(2*time.Second, func() bool { got := ro.list(); return got[len(got)-1] == want })
	got := ro.list()
	if len(got) < 3 || got[0] != "leader  0" || got[1] != fmt.Sprintf("leader %s %d", a.Candidate(), a.Token()) ||
		got[len(got)-1] != fmt.Sprintf("leader %s %d", b.Candidate(), b.Token()) {
		t.Errorf("OnNewLeader: %v", got)
	}
}

// An expiry without a successor is no notification: the observer reads
// fencing.leader() again at the leader's expires_at.
func TestElectionObserveExpiry(t *testing.T) {
	conn := connect(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	name := unique(t, "e")
	a := newElection(t, name, time.Second)
	if err := a.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	seen := newElection(t, name, time.Second).Observe(ctx)
	if l := <-seen; l.Holder != a.Candidate() {
		t.Fatalf("observed %+v", l)
	}
	// The leader freezes: its renewals stop.
	a.current().keeper.stop()
	select {
	case l := <-seen:
		if l.Holder != "" {
			t.Errorf("after the expiry: %+v", l)
		}
	case <-time.After(3 * time.Second):
		t.Error("the expiry was not observed")
	}
	_ = conn
}

// With Recampaign a leader that lost campaigns again; without, it stays out.
func TestElectionRecampaign(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	var ra, rb recorder
	a := newElection(t, unique(t, "e"), 900*time.Millisecond, append(ra.options(), Recampaign())...)
	b := newElection(t, unique(t, "e"), 900*time.Millisecond, rb.options()...)
	for _, e := range []*Election{a, b} {
		if err := e.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "SELECT fencing.release($1, $2, $3)", e.Name(), e.Candidate(), e.Token()); err != nil {
			t.Fatal(err)
		}
	}
	first := a.Token()
	if !eventually(4*time.Second, func() bool { return a.IsLeader() && a.Token() > first }) {
		t.Fatalf("A does not lead again: %v", ra.list())
	}
	if got := ra.list(); len(got) != 3 || got[0] != fmt.Sprintf("started %d", first) || got[1] != "stopped" || got[2] != fmt.Sprintf("started %d", a.Token()) {
		t.Errorf("A's callbacks: %v", got)
	}
	time.Sleep(time.Second)
	if b.IsLeader() || strings.Join(rb.list(), ",") != fmt.Sprintf("started %d,stopped", b.Token()) {
		t.Errorf("B without Recampaign: leader %v, callbacks %v", b.IsLeader(), rb.list())
	}
	if info, err := b.Leader(ctx); info != nil || err != nil {
		t.Errorf("B's election has a leader: %+v %v", info, err)
	}
}

func TestElectionBadInputs(t *testing.T) {
	connect(t)
	ctx := context.Background()
	e := newElection(t, strings.Repeat("x", 1001), time.Second)
	var pgErr *pgconn.PgError
	if err := e.Campaign(ctx); !errors.As(err, &pgErr) || pgErr.Code != "22023" {
		t.Errorf("a 1001-byte election: %v, want 22023", err)
	}
	if e.IsLeader() {
		t.Error("leads after a refused campaign")
	}
	if ok, err := e.Resign(ctx); ok || err != nil {
		t.Errorf("resign without leading: %v %v", ok, err)
	}
	closed := newElection(t, unique(t, "e"), time.Second)
	closed.Close()
	if err := closed.Campaign(ctx); err == nil {
		t.Error("a closed election campaigned")
	}
	busy := newElection(t, unique(t, "e"), time.Second)
	if err := busy.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	try := newElection(t, busy.Name(), time.Second, WithWait(0))
	if err := try.Campaign(ctx); !errors.Is(err, ErrLeaseBusy) {
		t.Errorf("a try on a led election: %v, want ErrLeaseBusy", err)
	}
}

// Close ends a campaign that waits, and nothing stays queued.
func TestElectionCloseEndsTheCampaign(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	name := unique(t, "e")
	leader := newElection(t, name, 2*time.Second)
	if err := leader.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	waiter, err := NewElection("", name, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- waiter.Campaign(ctx) }()
	if !eventually(5*time.Second, func() bool { pid, _ := waiting(t, conn, "fencing keepalive "+waiter.Candidate()); return pid != 0 }) {
		t.Fatal("the candidate does not wait")
	}
	waiter.Close()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("the campaign after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the campaign")
	}
	if !eventually(time.Second, func() bool { pid, _ := waiting(t, conn, "fencing keepalive "+waiter.Candidate()); return pid == 0 }) {
		t.Error("the closed candidate still waits on the server")
	}
}
