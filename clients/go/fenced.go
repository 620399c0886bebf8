package fencing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A Fence is what a fenced write presents: a *Lease, checked before the
// write and again before COMMIT, or a Token from another lock manager.
type Fence interface {
	Token() int64
	Check() error
}

// Token is a fencing token from another lock manager (Redis, etcd,
// ZooKeeper) for Fenced: fencing.Token(n).
type Token int64

// Token returns the token itself.
func (t Token) Token() int64 { return int64(t) }

// Check accepts every positive token; the storage judges the rest.
func (t Token) Check() error {
	if t <= 0 {
		return fmt.Errorf("fencing: a token must be positive, not %d", int64(t))
	}
	return nil
}

// Beginner starts transactions: *pgx.Conn, *pgxpool.Pool, *pgxpool.Conn.
// Not a pgx.Tx: the token must end with the transaction Fenced commits.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// FencedOption tunes Fenced.
type FencedOption func(*fencedOptions)

type fencedOptions struct {
	onStale   func(*StaleTokenError)
	txOptions *pgx.TxOptions
}

// OnStale calls fn with every stale refusal (the dead-letter hook: park the
// work for the new holder) before Fenced returns it.
func OnStale(fn func(*StaleTokenError)) FencedOption {
	return func(o *fencedOptions) { o.onStale = fn }
}

// WithTxOptions begins the transaction with these options (the db must
// then have BeginTx, as *pgx.Conn and *pgxpool.Pool do).
func WithTxOptions(opts pgx.TxOptions) FencedOption {
	return func(o *fencedOptions) { o.txOptions = &opts }
}

var staleRefusals atomic.Int64

// StaleRefusals counts the writes Fenced saw refused with 23T01 in this
// process.
func StaleRefusals() int64 { return staleRefusals.Load() }

// Fenced runs fn in a transaction on db with the fence's token set for that
// transaction only (SET LOCAL fencing.token, sent as set_config(...,
// true)), and commits if fn returns nil. A lease is checked first and again
// before COMMIT: if it is lost, Fenced returns an error wrapping
// ErrLeaseLost, sending nothing (or a ROLLBACK). Refusals come back as
// *StaleTokenError (counted, passed to OnStale) and *MissingTokenError.
// fn's other errors roll back and are returned as they are; a panic in fn
// rolls back and goes on.
func Fenced(ctx context.Context, db Beginner, fence Fence, fn func(tx pgx.Tx) error, opts ...FencedOption) (err error) {
	var o fencedOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := fence.Check(); err != nil {
		return err
	}
	defer func() {
		err = MapError(err)
		var stale *StaleTokenError
		if errors.As(err, &stale) {
			staleRefusals.Add(1)
			if o.onStale != nil {
				o.onStale(stale)
			}
		}
	}()
	if err := refuseOpenTransaction(db); err != nil {
		return err
	}
	var tx pgx.Tx
	if o.txOptions != nil {
		b, ok := db.(interface {
			BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
		})
		if !ok {
			return fmt.Errorf("fencing: WithTxOptions needs a db with BeginTx, not %T", db)
		}
		tx, err = b.BeginTx(ctx, *o.txOptions)
	} else {
		tx, err = db.Begin(ctx)
	}
	if err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			panic(r)
		}
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err = setLocal(ctx, tx, fence); err != nil {
		return lostMeanwhile(fence, err)
	}
	if err = fn(tx); err != nil {
		return lostMeanwhile(fence, err)
	}
	if err = fence.Check(); err != nil {
		return err
	}
	return lostMeanwhile(fence, tx.Commit(ctx))
}

// A deadlined fence (a *Lease, an *Election) bounds the transaction of a
// fenced write by the time it has left.
type deadlined interface {
	Deadline() time.Time
}

// setLocal sets the token for the transaction (SET LOCAL fencing.token,
// sent as set_config(..., true)); for a fence with a deadline also SET
// LOCAL idle_in_transaction_session_timeout, and transaction_timeout on
// PostgreSQL 17 or later, to the milliseconds left (at least 1, at most
// maxTimeoutMs, the largest the settings take: a ttl may be 366 days): a holder
// frozen between its statements and its COMMIT is ended by the server at
// its deadline, and its row locks no longer hold up the next holder.
func setLocal(ctx context.Context, tx pgx.Tx, fence Fence) error {
	token := strconv.FormatInt(fence.Token(), 10)
	d, ok := fence.(deadlined)
	if !ok {
		_, err := tx.Exec(ctx, "SELECT set_config('fencing.token', $1, true)", token)
		return err
	}
	left := strconv.FormatInt(min(max(time.Until(d.Deadline()).Milliseconds(), 1), maxTimeoutMs), 10)
	sql := "SELECT set_config('fencing.token', $1, true), set_config('idle_in_transaction_session_timeout', $2, true)"
	if serverMajor(tx.Conn()) >= 17 {
		sql += ", set_config('transaction_timeout', $2, true)"
	}
	_, err := tx.Exec(ctx, sql, token, left)
	return err
}

// maxTimeoutMs is the largest idle_in_transaction_session_timeout and
// transaction_timeout PostgreSQL takes (INT_MAX milliseconds, ~24.8 days).
const maxTimeoutMs = math.MaxInt32

// serverMajor is the server's major version from its server_version
// parameter (0 if unknown).
func serverMajor(conn *pgx.Conn) int {
	return majorVersion(conn.PgConn().ParameterStatus("server_version"))
}

// majorVersion: "17.2", "18beta1", "15.20 (Debian 15.20-0+deb12u1)" → 17,
// 18, 15; 0 without leading digits.
func majorVersion(v string) int {
	end := 0
	for end < len(v) && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	n, _ := strconv.Atoi(v[:end])
	return n
}

// lostMeanwhile: an error of a write whose lease was lost meanwhile (the
// server ended the transaction at the lease's deadline, say) also wraps
// ErrLeaseLost.
func lostMeanwhile(fence Fence, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := fence.(deadlined); !ok || errors.Is(err, ErrLeaseLost) {
		return err
	}
	if lost := fence.Check(); lost != nil {
		return fmt.Errorf("%w (the write failed: %w)", lost, err)
	}
	return err
}

// Exec runs one statement as a fenced write (Fenced with a function that
// calls tx.Exec) and returns its command tag: the short form for a write of
// one statement.
func Exec(ctx context.Context, db Beginner, fence Fence, sql string, args ...any) (tag pgconn.CommandTag, err error) {
	err = Fenced(ctx, db, fence, func(tx pgx.Tx) error {
		tag, err = tx.Exec(ctx, sql, args...)
		return err
	})
	return tag, err
}

// refuseOpenTransaction: Fenced runs a transaction of its own. In a
// caller's transaction its COMMIT would be a savepoint's, and the token
// would stay set for the caller's later statements.
func refuseOpenTransaction(db Beginner) error {
	switch c := db.(type) {
	case pgx.Tx:
		return errors.New("fencing: Fenced runs its own transaction: pass the connection or pool, not a pgx.Tx")
	case *pgx.Conn:
		if status := c.PgConn().TxStatus(); status != 'I' {
			return errors.New("fencing: Fenced runs its own transaction: commit or roll back the connection's open transaction first")
		}
	case interface{ Conn() *pgx.Conn }: // *pgxpool.Conn
		if conn := c.Conn(); conn != nil {
			if status := conn.PgConn().TxStatus(); status != 'I' {
				return errors.New("fencing: Fenced runs its own transaction: commit or roll back the connection's open transaction first")
			}
		}
	}
	return nil
}
