// Command conformance-worker speaks clients/conformance/PROTOCOL.md: JSON
// requests on stdin, one JSON answer per line on stdout, driving the Go
// client the way a user would.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	fencing "github.com/fencing-pg/fencing/clients/go"
	"github.com/jackc/pgx/v5"
)

type request struct {
	Op        string   `json:"op"`
	Resource  string   `json:"resource"`
	Holder    string   `json:"holder"`
	TTL       float64  `json:"ttl"`
	Wait      *float64 `json:"wait"`
	Resources []string `json:"resources"`
	Timeout   float64  `json:"timeout"`
	SQL       string   `json:"sql"`
	Token     *int64   `json:"token"`
}

type answer map[string]any

type worker struct {
	ctx       context.Context
	conn      *pgx.Conn // the work connection
	leases    map[string]*fencing.Lease
	sessions  map[string]*fencing.Session
	callbacks int
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	w := &worker{ctx: context.Background(), leases: map[string]*fencing.Lease{}, sessions: map[string]*fencing.Session{}}
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
		var opts []fencing.AcquireOption
		if req.Wait != nil {
			opts = append(opts, fencing.WithWait(seconds(*req.Wait)))
		}
		l, err := fencing.Acquire(w.ctx, "", req.Resource, req.Holder, seconds(req.TTL), opts...)
		if err != nil {
			return failure(err)
		}
		w.leases[req.Resource] = l
		return answer{"ok": true, "token": l.Token()}
	case "session":
		s, err := fencing.NewSession(w.ctx, "", req.Holder, seconds(req.TTL))
		if err != nil {
			return failure(err)
		}
		tokens := []int64{}
		for _, r := range req.Resources {
			l, err := s.Acquire(w.ctx, r)
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
	return failure(fmt.Errorf("unknown op %q", req.Op))
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
	var err error
	if s, ok := w.sessions[resource]; ok {
		err = s.Close()
		for r, other := range w.sessions {
			if other == s {
				delete(w.sessions, r)
				delete(w.leases, r)
			}
		}
	} else {
		err = l.Release()
		delete(w.leases, resource)
	}
	if err != nil && !errors.Is(err, fencing.ErrLeaseLost) {
		return failure(err)
	}
	return answer{"ok": true, "released": err == nil}
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
		lease, e := fencing.Acquire(ctx, "", req.Resource, req.Holder, seconds(req.TTL))
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
	done := map[*fencing.Session]bool{}
	for r, l := range w.leases {
		if s, ok := w.sessions[r]; ok {
			if !done[s] {
				_ = s.Close()
				done[s] = true
			}
			continue
		}
		_ = l.Release()
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
