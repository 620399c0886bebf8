package fencing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// An Election is leader election on the server's fencing.campaign(),
// fencing.resign() and fencing.leader(), like etcd's concurrency.Election
// and client-go's leaderelection: the leader holds the lease on the
// resource named by the election, kept alive like any lease, and its token
// fences its writes (an *Election is a Fence: Fenced and Exec take it).
// Candidates wait in order, first come first served; changes of leader are
// notified on the channel fencing_election at the commit of each grant and
// resign, which Observe listens to (no polling).
type Election struct {
	connString string
	name       string
	ttl        time.Duration
	o          electionOptions

	life   context.Context // ends with Close: recampaigns run under it
	finish context.CancelFunc

	mu       sync.Mutex
	term     *Lease // the current or last leadership
	given    bool   // term was given up by Resign already
	resigned bool   // Resign or Close: no recampaign

	events   chan func() // the callbacks, in order, on one goroutine
	emitMu   sync.Mutex
	quiet    bool           // Close has closed events
	watchers sync.WaitGroup // watch goroutines

	readMu sync.Mutex
	reader *pgx.Conn // Leader()'s connection
}

// LeaderInfo is an election's live leader as fencing.leader() shows it.
type LeaderInfo struct {
	Holder    string
	Token     int64
	GrantedAt time.Time
	ExpiresAt time.Time
}

// ElectionOption tunes NewElection: WithHolder (the candidate, default
// DefaultHolder()), WithWait (bounds Campaign's wait), WithLogger, and
// Recampaign, OnStartedLeading, OnStoppedLeading, OnNewLeader.
type ElectionOption interface{ applyElection(*electionOptions) }

type electionOptions struct {
	acquire    []AcquireOption
	recampaign bool
	onStarted  func(token int64)
	onStopped  func()
	onLeader   func(holder string, token int64)
}

func (f AcquireOption) applyElection(o *electionOptions) { o.acquire = append(o.acquire, f) }

type electionOption func(*electionOptions)

func (f electionOption) applyElection(o *electionOptions) { f(o) }

// Recampaign makes a leader that lost its leadership (not by Resign or
// Close) campaign again, in the background, until Close.
func Recampaign() ElectionOption {
	return electionOption(func(o *electionOptions) { o.recampaign = true })
}

// OnStartedLeading is called with the token when this candidate becomes
// the leader.
func OnStartedLeading(fn func(token int64)) ElectionOption {
	return electionOption(func(o *electionOptions) { o.onStarted = fn })
}

// OnStoppedLeading is called when this candidate's leadership ends: lost
// (e.Context()'s cause says why), resigned or closed.
func OnStoppedLeading(fn func()) ElectionOption {
	return electionOption(func(o *electionOptions) { o.onStopped = fn })
}

// OnNewLeader is called by Observe with each new leader, holder "" and
// token 0 when there is none.
func OnNewLeader(fn func(holder string, token int64)) ElectionOption {
	return electionOption(func(o *electionOptions) { o.onLeader = fn })
}

// NewElection prepares the candidacy in election with the given ttl; it
// connects only to Campaign, Leader or Observe. Callbacks run one at a time
// on a goroutine of the election, in the order of the events.
func NewElection(connString, election string, ttl time.Duration, opts ...ElectionOption) (*Election, error) {
	if election == "" {
		return nil, errors.New("fencing: an election needs a name")
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("fencing: ttl must be positive, not %v", ttl)
	}
	if _, err := pgx.ParseConfig(connString); err != nil {
		return nil, err
	}
	var o electionOptions
	for _, opt := range opts {
		if opt != nil {
			opt.applyElection(&o)
		}
	}
	// The candidate is chosen once, so that every campaign of this
	// election is the same holder.
	ao, err := collect(o.acquire)
	if err != nil {
		return nil, err
	}
	o.acquire = append(o.acquire, WithHolder(ao.holder))
	e := &Election{connString: connString, name: election, ttl: ttl, o: o, events: make(chan func(), 256)}
	e.life, e.finish = context.WithCancel(context.Background())
	go e.dispatch()
	return e, nil
}

// Name is the election's name (the resource its leader leases).
func (e *Election) Name() string { return e.name }

// Candidate is this candidate's holder name.
func (e *Election) Candidate() string {
	o, _ := collect(e.o.acquire)
	return o.holder
}

func (e *Election) dispatch() {
	for fn := range e.events {
		fn()
	}
}

// emit queues a callback; after Close (an observer still running) none.
func (e *Election) emit(fn func()) {
	e.emitMu.Lock()
	defer e.emitMu.Unlock()
	if !e.quiet {
		e.events <- fn
	}
}

// Campaign waits in order until this candidate leads (nil), ctx ends
// (its deadline: ErrLeaseTimeout; its cancellation: its cause, the
// server's wait cancelled) or WithWait's bound passes (ErrLeaseTimeout).
// Leading already: nil at once. The leadership lasts, renewed, until lost,
// Resign or Close, not until ctx ends.
func (e *Election) Campaign(ctx context.Context) error {
	if e.life.Err() != nil {
		return errors.New("fencing: the election is closed")
	}
	e.mu.Lock()
	if e.term != nil && e.term.live() {
		e.mu.Unlock()
		return nil
	}
	e.resigned = false
	e.mu.Unlock()
	// Close ends the wait too.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(e.life, func() { cancel(errors.New("fencing: the election was closed")) })
	defer stop()
	return e.campaign(ctx)
}

func (e *Election) campaign(ctx context.Context) error {
	o, err := collect(e.o.acquire)
	if err != nil {
		return err
	}
	term, err := acquireWith(ctx, e.connString, e.name, e.ttl, o, func(k *keeper) {
		k.grantFn, k.releaseFn = "fencing.campaign", "fencing.resign"
	})
	if err != nil {
		return err
	}
	e.mu.Lock()
	if e.resigned || e.life.Err() != nil { // resigned or closed meanwhile
		e.mu.Unlock()
		_, _ = term.Release()
		return errors.New("fencing: the election was resigned or closed during the campaign")
	}
	e.term, e.given = term, false
	e.mu.Unlock()
	if fn := e.o.onStarted; fn != nil {
		token := term.Token()
		e.emit(func() { fn(token) })
	}
	e.watchers.Add(1)
	go e.watch(term)
	return nil
}

// watch waits for the end of a term: OnStoppedLeading, then with
// Recampaign (a loss, not a resign) a campaign again.
func (e *Election) watch(term *Lease) {
	defer e.watchers.Done()
	select {
	case <-term.Context().Done():
	case <-e.life.Done():
		<-term.Context().Done() // Close resigns
	}
	if fn := e.o.onStopped; fn != nil {
		e.emit(fn)
	}
	e.mu.Lock()
	again := e.o.recampaign && !e.resigned && e.life.Err() == nil && e.term == term
	e.mu.Unlock()
	for again {
		err := e.campaign(e.life)
		if err == nil || e.life.Err() != nil {
			return
		}
		e.mu.Lock()
		again = !e.resigned
		e.mu.Unlock()
		if !again {
			return
		}
		e.o.logger().Warn("fencing: campaign again failed, retrying", "election", e.name, "error", err)
		select {
		case <-time.After(retryInterval(e.ttl)):
		case <-e.life.Done():
			return
		}
	}
}

func (o electionOptions) logger() interface {
	Warn(msg string, args ...any)
} {
	ao, _ := collect(o.acquire)
	return ao.logger
}

func (e *Election) current() *Lease {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.term
}

// IsLeader reports whether this candidate leads now (it reads the clock, as
// Lease.Check does).
func (e *Election) IsLeader() bool {
	t := e.current()
	return t != nil && t.live()
}

// Token is the current leadership's fencing token, 0 if this candidate
// has never led.
func (e *Election) Token() int64 {
	if t := e.current(); t != nil {
		return t.Token()
	}
	return 0
}

// Check returns nil while this candidate leads, else an error wrapping
// ErrLeaseLost (the Fence's check).
func (e *Election) Check() error {
	if t := e.current(); t != nil {
		return t.Check()
	}
	return fmt.Errorf("%w: %s: not the leader", ErrLeaseLost, e.name)
}

// Deadline is the current leadership's deadline (zero if none).
func (e *Election) Deadline() time.Time {
	if t := e.current(); t != nil {
		return t.Deadline()
	}
	return time.Time{}
}

var closedContext = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(fmt.Errorf("%w: not the leader", ErrLeaseLost))
	return ctx
}()

// Context is the current leadership's loss signal: cancelled when it is
// lost, resigned or closed (already cancelled if this candidate does not
// lead). Run the leader's work under it.
func (e *Election) Context() context.Context {
	if t := e.current(); t != nil {
		return t.Context()
	}
	return closedContext
}

// Done is Context().Done().
func (e *Election) Done() <-chan struct{} { return e.Context().Done() }

// Resign gives the leadership up (fencing.resign()), so that the next
// candidate in line leads at once, and stops recampaigning: true if this
// candidate led and the server released it, false if it did not lead (or
// had lost), an error if the server could not be told.
func (e *Election) Resign(ctx context.Context) (bool, error) {
	e.mu.Lock()
	e.resigned = true
	t, given := e.term, e.given
	e.given = true
	e.mu.Unlock()
	if t == nil || given {
		return false, nil
	}
	return t.Release()
}

// Close resigns and ends the election's goroutines (recampaigns, the
// callbacks once delivered: OnStoppedLeading of the resign is the last) and
// its connection.
func (e *Election) Close() error {
	_, err := e.Resign(context.Background())
	e.finish()
	e.watchers.Wait()
	e.emitMu.Lock()
	if !e.quiet {
		e.quiet = true
		close(e.events)
	}
	e.emitMu.Unlock()
	e.readMu.Lock()
	if e.reader != nil {
		e.reader.Close(context.Background())
		e.reader = nil
	}
	e.readMu.Unlock()
	return err
}

// Leader reads the election's live leader with fencing.leader(): nil if
// none.
func (e *Election) Leader(ctx context.Context) (*LeaderInfo, error) {
	e.readMu.Lock()
	defer e.readMu.Unlock()
	if e.reader == nil || e.reader.IsClosed() {
		conn, err := e.connectReader(ctx, "fencing leader ")
		if err != nil {
			return nil, err
		}
		e.reader = conn
	}
	info, err := readLeader(ctx, e.reader, e.name)
	if err != nil && e.reader.IsClosed() {
		e.reader = nil
	}
	return info, err
}

// connectReader opens a connection that reads the election (Leader,
// Observe) after checking the server's version.
func (e *Election) connectReader(ctx context.Context, what string) (*pgx.Conn, error) {
	config, err := pgx.ParseConfig(e.connString)
	if err != nil {
		return nil, err
	}
	config.RuntimeParams["application_name"] = what + e.Candidate()
	conn, err := pgx.ConnectConfig(ctx, config)
	if err != nil {
		return nil, err
	}
	if err := checkServer(ctx, conn); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

func readLeader(ctx context.Context, conn *pgx.Conn, election string) (*LeaderInfo, error) {
	var l LeaderInfo
	err := conn.QueryRow(ctx, "SELECT holder, token, granted_at, expires_at FROM fencing.leader($1)", election).
		Scan(&l.Holder, &l.Token, &l.GrantedAt, &l.ExpiresAt)
	if err == pgx.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// Observe follows the election's leader until ctx ends: on a connection of
// its own it LISTENs on fencing_election and reads fencing.leader() at the
// start, at each notification of this election and at the leader's
// expires_at (an expiry without a successor is not notified), never by
// polling. Each change of leader is sent on the channel (a LeaderInfo with
// Holder "" when there is none) and passed to OnNewLeader; the channel is
// closed when ctx ends. Read the channel: the observer waits for you. A
// broken connection is made again, and the leader read again then.
func (e *Election) Observe(ctx context.Context) <-chan LeaderInfo {
	out := make(chan LeaderInfo, 16)
	go e.observe(ctx, out)
	return out
}

func (e *Election) observe(ctx context.Context, out chan<- LeaderInfo) {
	defer close(out)
	var last *LeaderInfo
	first := true
	pause := retryFloor
	for ctx.Err() == nil {
		err := e.observeOn(ctx, func(now *LeaderInfo) bool {
			if !first && sameLeader(last, now) {
				return true
			}
			first, last = false, now
			info := LeaderInfo{}
			if now != nil {
				info = *now
			}
			if fn := e.o.onLeader; fn != nil {
				e.emit(func() { fn(info.Holder, info.Token) })
			}
			select {
			case out <- info:
				return true
			case <-ctx.Done():
				return false
			}
		})
		if ctx.Err() != nil {
			return
		}
		e.o.logger().Warn("fencing: observing the election failed, reconnecting", "election", e.name, "error", err)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return
		}
		pause = min(pause*2, time.Second)
	}
}

func sameLeader(a, b *LeaderInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Holder == b.Holder && a.Token == b.Token
}

// observeOn listens on one connection until an error or ctx's end,
// passing every leader read to seen (false: stop).
func (e *Election) observeOn(ctx context.Context, seen func(*LeaderInfo) bool) error {
	conn, err := e.connectReader(ctx, "fencing observe ")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN fencing_election"); err != nil {
		return err
	}
	for {
		now, err := readLeader(ctx, conn, e.name)
		if err != nil {
			return err
		}
		if !seen(now) {
			return ctx.Err()
		}
		// Until a notification of this election, or the leader's expiry.
		for {
			waitCtx, cancel := ctx, context.CancelFunc(func() {})
			if now != nil {
				// (at least a retry floor ahead: a server clock behind
				// ours must not make this a loop)
				at := now.ExpiresAt.Add(10 * time.Millisecond)
				if floor := time.Now().Add(retryFloor); at.Before(floor) {
					at = floor
				}
				waitCtx, cancel = context.WithDeadline(ctx, at)
			}
			n, err := conn.WaitForNotification(waitCtx)
			cancel()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				if now != nil && errors.Is(waitCtx.Err(), context.DeadlineExceeded) && !conn.IsClosed() {
					break // the leader's expires_at: read again
				}
				return err
			}
			if n.Payload == e.name {
				break
			}
		}
	}
}
