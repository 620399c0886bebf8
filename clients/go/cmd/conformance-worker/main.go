// Command conformance-worker speaks clients/conformance/PROTOCOL.md: JSON
// requests on stdin, one JSON answer per line on stdout, driving the Go
// client the way a user would. It is a command of the module's own, for the
// conformance suite: a program that imports the package fencing never
// builds it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	fencing "github.com/fencing-pg/fencing/clients/go"
	"github.com/jackc/pgx/v5"
)

type request struct {
	Op         string          `json:"op"`
	Resource   string          `json:"resource"`
	Holder     string          `json:"holder"` // "" for null or absent: the default identity
	TTL        float64         `json:"ttl"`
	Wait       json.RawMessage `json:"wait"` // seconds, "forever", or null (a try)
	Resources  []string        `json:"resources"`
	Timeout    float64         `json:"timeout"`
	SQL        string          `json:"sql"`
	Token      *int64          `json:"token"`
	Hold       float64         `json:"hold"`
	Election   string          `json:"election"`
	Candidate  string          `json:"candidate"`
	Recampaign bool            `json:"recampaign"`
}

type answer map[string]any

type worker struct {
	ctx       context.Context
	conn      *pgx.Conn // the work connection
	leases    map[string]*fencing.Lease
	sessions  map[string]*fencing.Session
	pending   map[string]*pending // lease_async
	elections map[string]*election
	callbacks int
}

// pending is a lease_async acquisition running in the background.
type pending struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the acquisition has ended
	lease  *fencing.Lease
	err    error
}

// election is this worker's Election in one election, with its callbacks
// recorded in order.
type election struct {
	e        *fencing.Election
	mu       sync.Mutex
	events   []answer
	observed bool
	stop     context.CancelFunc // ends the campaign's wait and the observer
}

func (el *election) record(kind string, holder *string, token *int64) {
	el.mu.Lock()
	defer el.mu.Unlock()
	el.events = append(el.events, answer{"kind": kind, "holder": holder, "token": token})
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func main() {
	// slog.Default() as it is: the standard logger on stderr, which shows
	// the loss line as the client words it.
	w := &worker{ctx: context.Background(), leases: map[string]*fencing.Lease{}, sessions: map[string]*fencing.Session{},
		pending: map[string]*pending{}, elections: map[string]*election{}}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		var req request
		var a answer
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			a = failure(fmt.Errorf("bad request: %w", err))
		} else {
			a = w.handle(req)
		}
		_ = enc.Encode(a)
		_ = out.Flush()
		if req.Op == "quit" {
			break
		}
	}
	w.shutdown()
}

func (w *worker) handle(req request) answer {
	switch req.Op {
	case "lease":
		opts, err := leaseOptions(req)
		if err != nil {
			return failure(err)
		}
		l, err := fencing.Acquire(w.ctx, "", req.Resource, seconds(req.TTL), opts...)
		if err != nil {
			return failure(err)
		}
		w.leases[req.Resource] = l
		return answer{"ok": true, "token": l.Token(), "holder": l.Holder()}
	case "lease_async":
		return w.leaseAsync(req)
	case "await_lease":
		return w.awaitLease(req)
	case "cancel":
		p, ok := w.pending[req.Resource]
		if !ok {
			return failure(fmt.Errorf("no lease_async on %q in this worker", req.Resource))
		}
		p.cancel()
		<-p.done
		return answer{"ok": true, "cancelled": p.lease == nil}
	case "do":
		return w.do(req)
	case "write_hold":
		return w.writeHold(req)
	case "campaign", "election_status", "await_leader", "observe", "events", "current_leader", "resign":
		return w.election(req)
	case "session":
		s, err := fencing.NewSession(w.ctx, "", fencing.WithHolder(req.Holder))
		if err != nil {
			return failure(err)
		}
		tokens := []int64{}
		for _, r := range req.Resources {
			l, err := s.Acquire(w.ctx, r, seconds(req.TTL))
			if err != nil {
				_ = s.Close()
				return failure(err)
			}
			tokens = append(tokens, l.Token())
		}
		for _, l := range s.Leases() {
			w.leases[l.Resource()] = l
			w.sessions[l.Resource()] = s
		}
		return answer{"ok": true, "tokens": tokens}
	case "status":
		l, ok := w.leases[req.Resource]
		if !ok {
			return unknown(req.Resource)
		}
		return answer{"ok": true, "token": l.Token(), "lost": l.Lost(), "remaining": time.Until(l.Deadline()).Seconds()}
	case "await_lost":
		l, ok := w.leases[req.Resource]
		if !ok {
			return unknown(req.Resource)
		}
		l.Lost() // reads the clock: a lease past its deadline ends now
		timer := time.NewTimer(seconds(req.Timeout))
		defer timer.Stop()
		select {
		case <-l.Context().Done():
		case <-timer.C:
		}
		return answer{"ok": true, "lost": l.Lost()}
	case "write":
		return w.write(req)
	case "release":
		return w.release(req.Resource)
	case "raise_inside":
		token, err := raiseInside(w.ctx, req)
		if err != nil {
			return failure(err)
		}
		return answer{"ok": true, "token": token}
	case "stale_count":
		return answer{"ok": true, "count": fencing.StaleRefusals(), "callbacks": w.callbacks}
	case "quit":
		return answer{"ok": true}
	}
	return failure(fmt.Errorf("unknown op %s", req.Op))
}

func unknown(resource string) answer {
	return failure(fmt.Errorf("no lease on %q in this worker", resource))
}

// workConn returns the work connection, reconnecting if it broke.
func (w *worker) workConn() (*pgx.Conn, error) {
	if w.conn != nil && !w.conn.IsClosed() {
		return w.conn, nil
	}
	conn, err := pgx.Connect(w.ctx, "")
	if err != nil {
		return nil, err
	}
	w.conn = conn
	return conn, nil
}

func (w *worker) write(req request) answer {
	conn, err := w.workConn()
	if err != nil {
		return failure(err)
	}
	var rows int64
	run := func(tx pgx.Tx) error {
		tag, err := tx.Exec(w.ctx, req.SQL)
		rows = tag.RowsAffected()
		return err
	}
	var fence fencing.Fence
	switch {
	case req.Election != "":
		el, ok := w.elections[req.Election]
		if !ok {
			return failure(fmt.Errorf("%w: this worker never campaigned in %q", fencing.ErrLeaseLost, req.Election))
		}
		fence = el.e
	case req.Resource != "":
		l, ok := w.leases[req.Resource]
		if !ok {
			return unknown(req.Resource)
		}
		fence = l
	case req.Token != nil:
		fence = fencing.Token(*req.Token)
	default:
		err = pgx.BeginFunc(w.ctx, conn, run)
		if err != nil {
			return failure(fencing.MapError(err))
		}
		return answer{"ok": true, "rows": rows}
	}
	err = fencing.Fenced(w.ctx, conn, fence, run, fencing.OnStale(func(*fencing.StaleTokenError) { w.callbacks++ }))
	if err != nil {
		return failure(err)
	}
	return answer{"ok": true, "rows": rows}
}

func (w *worker) release(resource string) answer {
	l, ok := w.leases[resource]
	if !ok {
		return unknown(resource)
	}
	if s, ok := w.sessions[resource]; ok {
		err := s.Close()
		for r, other := range w.sessions {
			if other == s {
				delete(w.sessions, r)
				delete(w.leases, r)
			}
		}
		if err != nil {
			return failure(err)
		}
		released, _ := l.Release() // Close's result for this lease
		return answer{"ok": true, "released": released}
	}
	released, err := l.Release()
	delete(w.leases, resource)
	if err != nil {
		return failure(err)
	}
	return answer{"ok": true, "released": released}
}

// raiseInside acquires with the Go scoped form (defer lease.Release()),
// panics inside it and recovers outside.
func raiseInside(ctx context.Context, req request) (token int64, err error) {
	func() {
		defer func() {
			if r := recover(); r != nil {
				slog.Info("recovered outside the lease's scope", "panic", r)
			}
		}()
		lease, e := fencing.Acquire(ctx, "", req.Resource, seconds(req.TTL), fencing.WithHolder(req.Holder))
		if e != nil {
			err = e
			return
		}
		defer lease.Release()
		token = lease.Token()
		panic("raised inside the lease")
	}()
	return token, err
}

func (w *worker) shutdown() {
	for _, p := range w.pending {
		p.cancel()
		<-p.done
		if p.lease != nil {
			_, _ = p.lease.Release()
		}
	}
	for _, el := range w.elections {
		el.stop()
		_ = el.e.Close()
	}
	done := map[*fencing.Session]bool{}
	for r, l := range w.leases {
		if s, ok := w.sessions[r]; ok {
			if !done[s] {
				_ = s.Close()
				done[s] = true
			}
			continue
		}
		_, _ = l.Release()
	}
	if w.conn != nil {
		_ = w.conn.Close(w.ctx)
	}
}

// failure is a failed answer with the conformance name of err.
func failure(err error) answer {
	a := answer{"ok": false, "error": "Other", "message": err.Error()}
	var stale *fencing.StaleTokenError
	var missing *fencing.MissingTokenError
	switch {
	case errors.As(err, &stale):
		a["error"] = "StaleToken"
		fields(a, stale.Table, stale.Column, stale.Constraint, stale.Key, stale.Stored)
		a["presented"] = stale.Presented
	case errors.As(err, &missing):
		a["error"] = "MissingToken"
		fields(a, missing.Table, missing.Column, missing.Constraint, missing.Key, missing.Stored)
		a["presented"] = nil
	case errors.Is(err, fencing.ErrLeaseLost):
		a["error"] = "LeaseLost"
	case errors.Is(err, fencing.ErrLeaseBusy):
		a["error"] = "LeaseBusy"
	case errors.Is(err, fencing.ErrLeaseTimeout):
		a["error"] = "LeaseTimeout"
	case errors.Is(err, fencing.ErrLeaseAlreadyHeld):
		a["error"] = "LeaseAlreadyHeld"
		var held *fencing.LeaseAlreadyHeldError
		if errors.As(err, &held) && held.Token != 0 {
			a["token"] = held.Token
		}
	}
	return a
}

func fields(a answer, table, column, constraint, key string, stored int64) {
	a["table"], a["column"], a["constraint"], a["key"], a["stored"] = orNull(table), orNull(column), orNull(constraint), orNull(key), nil
	if stored != 0 {
		a["stored"] = stored
	}
}

func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// leaseOptions: the holder (none: the default identity) and the wait: a
// number of seconds, "forever" (no WithWait: until granted) or null (a try).
func leaseOptions(req request) ([]fencing.AcquireOption, error) {
	opts := []fencing.AcquireOption{fencing.WithHolder(req.Holder)}
	wait := strings.TrimSpace(string(req.Wait))
	switch wait {
	case "", "null":
		return append(opts, fencing.WithWait(0)), nil
	case `"forever"`:
		return append(opts, fencing.WithWait(fencing.Forever)), nil
	}
	var s float64
	if err := json.Unmarshal(req.Wait, &s); err != nil {
		return nil, fmt.Errorf("bad wait %s: seconds, \"forever\" or null", wait)
	}
	return append(opts, fencing.WithWait(seconds(s))), nil
}

func (w *worker) leaseAsync(req request) answer {
	opts, err := leaseOptions(req)
	if err != nil {
		return failure(err)
	}
	if _, ok := w.pending[req.Resource]; ok {
		return failure(fmt.Errorf("a lease_async on %q is running already", req.Resource))
	}
	ctx, cancel := context.WithCancel(w.ctx)
	p := &pending{cancel: cancel, done: make(chan struct{})}
	w.pending[req.Resource] = p
	go func() {
		defer close(p.done)
		p.lease, p.err = fencing.Acquire(ctx, "", req.Resource, seconds(req.TTL), opts...)
	}()
	return answer{"ok": true}
}

func (w *worker) awaitLease(req request) answer {
	p, ok := w.pending[req.Resource]
	if !ok {
		return failure(fmt.Errorf("no lease_async on %q in this worker", req.Resource))
	}
	timer := time.NewTimer(seconds(req.Timeout))
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		return failure(errors.New("pending"))
	}
	if p.err != nil {
		return failure(p.err)
	}
	w.leases[req.Resource] = p.lease
	return answer{"ok": true, "token": p.lease.Token(), "holder": p.lease.Holder()}
}

// do: fencing.Do waiting until granted, a fenced write of the request's
// SQL inside, then the loss signal awaited up to hold.
func (w *worker) do(req request) answer {
	conn, err := w.workConn()
	if err != nil {
		return failure(err)
	}
	var token, rows int64
	err = fencing.Do(w.ctx, "", req.Resource, seconds(req.TTL), func(ctx context.Context, lease *fencing.Lease) error {
		token = lease.Token()
		tag, err := fencing.Exec(ctx, conn, lease, req.SQL)
		if err != nil {
			return err
		}
		rows = tag.RowsAffected()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(seconds(req.Hold)):
			return nil
		}
	}, fencing.WithHolder(req.Holder))
	if err != nil {
		return failure(err)
	}
	return answer{"ok": true, "token": token, "rows": rows}
}

// writeHold: the fenced write with the lease, asleep hold seconds in its
// open transaction before the COMMIT.
func (w *worker) writeHold(req request) answer {
	l, ok := w.leases[req.Resource]
	if !ok {
		return unknown(req.Resource)
	}
	conn, err := w.workConn()
	if err != nil {
		return failure(err)
	}
	var rows int64
	err = fencing.Fenced(w.ctx, conn, l, func(tx pgx.Tx) error {
		tag, err := tx.Exec(w.ctx, req.SQL)
		if err != nil {
			return err
		}
		rows = tag.RowsAffected()
		time.Sleep(seconds(req.Hold))
		return nil
	})
	if err != nil {
		return failure(err)
	}
	return answer{"ok": true, "rows": rows}
}

// electionOf returns this worker's Election in name, made (with the
// candidate and recampaign of req, and the callbacks recorded) if new.
func (w *worker) electionOf(req request) (*election, error) {
	if el, ok := w.elections[req.Election]; ok {
		return el, nil
	}
	el := &election{stop: func() {}}
	ttl := seconds(req.TTL)
	if ttl <= 0 {
		ttl = 2 * time.Second // an observer that never campaigns
	}
	opts := []fencing.ElectionOption{
		fencing.WithHolder(req.Candidate),
		fencing.OnStartedLeading(func(token int64) { el.record("started", nil, &token) }),
		fencing.OnStoppedLeading(func() { el.record("stopped", nil, nil) }),
		fencing.OnNewLeader(func(holder string, token int64) {
			if holder == "" {
				el.record("new_leader", nil, nil)
				return
			}
			el.record("new_leader", &holder, &token)
		}),
	}
	if req.Recampaign {
		opts = append(opts, fencing.Recampaign())
	}
	e, err := fencing.NewElection("", req.Election, ttl, opts...)
	if err != nil {
		return nil, err
	}
	el.e = e
	w.elections[req.Election] = el
	return el, nil
}

func (w *worker) election(req request) answer {
	el, ok := w.elections[req.Election]
	if !ok && req.Op != "campaign" && req.Op != "observe" && req.Op != "current_leader" {
		return failure(fmt.Errorf("this worker has no election %q", req.Election))
	}
	if !ok {
		var err error
		if el, err = w.electionOf(req); err != nil {
			return failure(err)
		}
	}
	leader := func() answer {
		if el.e.IsLeader() {
			return answer{"ok": true, "leader": true, "token": el.e.Token()}
		}
		return answer{"ok": true, "leader": false, "token": nil}
	}
	switch req.Op {
	case "campaign":
		ctx, cancel := context.WithCancel(w.ctx)
		prev := el.stop
		el.stop = func() { cancel(); prev() }
		go func() {
			if err := el.e.Campaign(ctx); err != nil && ctx.Err() == nil {
				slog.Warn("campaign failed", "election", req.Election, "error", err)
			}
		}()
		w.observe(el)
		return answer{"ok": true, "candidate": el.e.Candidate()}
	case "election_status":
		return leader()
	case "await_leader":
		for end := time.Now().Add(seconds(req.Timeout)); !el.e.IsLeader() && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		return leader()
	case "observe":
		w.observe(el)
		return answer{"ok": true}
	case "events":
		el.mu.Lock()
		defer el.mu.Unlock()
		return answer{"ok": true, "events": append([]answer{}, el.events...)}
	case "current_leader":
		info, err := el.e.Leader(w.ctx)
		if err != nil {
			return failure(err)
		}
		if info == nil {
			return answer{"ok": true, "holder": nil, "token": nil}
		}
		return answer{"ok": true, "holder": info.Holder, "token": info.Token}
	case "resign":
		resigned, err := el.e.Resign(w.ctx)
		if err != nil {
			return failure(err)
		}
		return answer{"ok": true, "resigned": resigned}
	}
	return failure(fmt.Errorf("unknown op %q", req.Op))
}

// observe starts the election's observer once; its changes reach the
// OnNewLeader callback, the channel is drained.
func (w *worker) observe(el *election) {
	if el.observed {
		return
	}
	el.observed = true
	ctx, cancel := context.WithCancel(w.ctx)
	prev := el.stop
	el.stop = func() { cancel(); prev() }
	go func() {
		for range el.e.Observe(ctx) {
		}
	}()
}
