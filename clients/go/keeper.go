package fencing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// A keeper owns the keepalive connection of a Lease, a Session or an
// Election and the goroutine that renews its leases at a third of the
// shortest ttl they have. Failed renewals are retried, reconnecting, until
// each lease's deadline.
type keeper struct {
	config *pgx.ConnConfig
	holder string
	batch  bool // a Session: renew_all() for all its leases
	logger *slog.Logger
	// The functions that grant and release: fencing.acquire() and
	// fencing.release(), or fencing.campaign() and fencing.resign().
	grantFn, releaseFn string

	mu      sync.Mutex // the connection: one call at a time
	conn    *pgx.Conn
	notices *noticeSink // the connection's notices
	checked bool        // the server's version was read

	leasesMu sync.Mutex
	leases   map[string]*Lease // held leases by resource

	lastAck  time.Time     // start of the last acknowledged call (loop only)
	wake     chan struct{} // a lease was added: the loop computes its pause again
	quit     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	started  bool
}

// maxServerWait is the longest single fencing.acquire(..., wait) call: a
// longer wait is made of several (the server caps its wait at an hour).
const maxServerWait = time.Hour

// retryFloor is the shortest pause after a failed renewal.
const retryFloor = 50 * time.Millisecond

func newKeeper(connString, holder string, connectTimeout time.Duration, batch bool, logger *slog.Logger) (*keeper, error) {
	config, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	k := &keeper{config: config, holder: holder, batch: batch, logger: logger,
		grantFn: "fencing.acquire", releaseFn: "fencing.release",
		leases: map[string]*Lease{}, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		lastAck: time.Now()}
	k.notices = configure(config, "fencing keepalive "+holder)
	if connectTimeout > 0 && (config.ConnectTimeout == 0 || config.ConnectTimeout > connectTimeout) {
		config.ConnectTimeout = connectTimeout
	}
	return k, nil
}

// configure names a connection of the client's own and makes a cancelled
// context cancel the statement on the server (a cancel request), so that a
// wait given up leaves nothing queued in fencing.acquire(); it returns the
// sink of the connection's notices.
func configure(config *pgx.ConnConfig, name string) *noticeSink {
	config.RuntimeParams["application_name"] = name
	config.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: 5 * time.Second}
	}
	return collectNotices(config)
}

// connect returns the keepalive connection, reconnecting if it broke; the
// first connection reads the server's version (ErrUnsupportedServer).
// Callers hold k.mu.
func (k *keeper) connect(ctx context.Context) (*pgx.Conn, error) {
	if k.conn != nil && !k.conn.IsClosed() {
		return k.conn, nil
	}
	k.dropConn()
	conn, err := pgx.ConnectConfig(ctx, k.config)
	if err != nil {
		return nil, err
	}
	if !k.checked {
		if err := checkServer(ctx, conn); err != nil {
			conn.Close(context.Background())
			return nil, err
		}
		k.checked = true
	}
	k.conn = conn
	return conn, nil
}

// dropConn closes the connection after an error; the next call reconnects.
// Callers hold k.mu.
func (k *keeper) dropConn() {
	if k.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = k.conn.Close(ctx)
		cancel()
		k.conn = nil
	}
}

func (k *keeper) closeConn() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dropConn()
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// acquire asks for resource on the keepalive connection (a session's wait:
// on a connection of its own) and registers the lease with the keeper.
func (k *keeper) acquire(ctx context.Context, resource string, ttl, wait time.Duration, s *Session) (*Lease, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("fencing: ttl must be positive, not %v", ttl)
	}
	var token int64
	var deadline time.Time
	var err error
	if s != nil && wait > 0 {
		// A try first, on the keepalive connection; if busy, wait on a
		// connection of its own: a waiting call would hold up the
		// session's renewals.
		token, deadline, err = k.grantHere(ctx, resource, ttl, 0)
		if err != nil && !errors.Is(err, ErrLeaseBusy) {
			return nil, err
		}
	}
	if s != nil && wait > 0 && token == 0 {
		config := k.config.Copy()
		notices := configure(config, "fencing wait "+k.holder)
		conn, err := pgx.ConnectConfig(ctx, config)
		if err != nil {
			return nil, err
		}
		defer conn.Close(context.Background())
		token, deadline, err = k.grant(ctx, conn, notices, resource, ttl, wait)
		if err != nil {
			return nil, err
		}
	} else if token == 0 {
		if token, deadline, err = k.grantHere(ctx, resource, ttl, wait); err != nil {
			return nil, err
		}
	}
	l := newLease(k, s, resource, token, ttl, deadline)
	k.leasesMu.Lock()
	k.leases[resource] = l
	k.leasesMu.Unlock()
	select {
	case k.wake <- struct{}{}:
	default:
	}
	return l, nil
}

// grantHere grants on the keepalive connection.
func (k *keeper) grantHere(ctx context.Context, resource string, ttl, wait time.Duration) (int64, time.Time, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	conn, err := k.connect(ctx)
	if err != nil {
		return 0, time.Time{}, err
	}
	token, deadline, err := k.grant(ctx, conn, k.notices, resource, ttl, wait)
	if err != nil && (conn.IsClosed() || ctx.Err() != nil) {
		k.dropConn()
	}
	return token, deadline, err
}

// grant calls the grant function (a try, or waits of at most an hour each
// until the wait or the context ends) and returns the token and the
// deadline.
func (k *keeper) grant(ctx context.Context, conn *pgx.Conn, notices *noticeSink, resource string, ttl, wait time.Duration) (int64, time.Time, error) {
	begin := time.Now()
	var until time.Time // zero: no end but the context's cancellation
	if wait != Forever {
		until = begin.Add(wait)
	}
	byContext := false
	if d, ok := ctx.Deadline(); ok && wait > 0 && (until.IsZero() || d.Before(until)) {
		until, byContext = d, true
	}
	for {
		if err := ctx.Err(); err != nil {
			return 0, time.Time{}, k.ended(ctx, resource, err)
		}
		notices.take()
		start := time.Now()
		var token *int64
		var err error
		if wait == 0 {
			err = conn.QueryRow(ctx, "SELECT "+k.grantFn+"($1, $2, make_interval(secs => $3))",
				resource, k.holder, seconds(ttl)).Scan(&token)
		} else {
			chunk := maxServerWait
			if !until.IsZero() {
				chunk = max(min(time.Until(until), chunk), time.Millisecond)
			}
			err = conn.QueryRow(ctx, "SELECT "+k.grantFn+"($1, $2, make_interval(secs => $3), make_interval(secs => $4))",
				resource, k.holder, seconds(ttl), seconds(chunk)).Scan(&token)
		}
		if err != nil {
			if ctx.Err() != nil {
				return 0, time.Time{}, k.ended(ctx, resource, err)
			}
			return 0, time.Time{}, err
		}
		if token != nil {
			return k.granted(ctx, conn, resource, *token, ttl, start)
		}
		if held := k.ownLease(notices.take(), resource); held != nil {
			return 0, time.Time{}, held
		}
		switch {
		case wait == 0:
			return 0, time.Time{}, fmt.Errorf("%w: %s is held by another holder", ErrLeaseBusy, resource)
		case !until.IsZero() && !time.Now().Before(until) && byContext:
			return 0, time.Time{}, fmt.Errorf("%w: %s: still held by another holder at the context's deadline: %w", ErrLeaseTimeout, resource, context.DeadlineExceeded)
		case !until.IsZero() && !time.Now().Before(until):
			return 0, time.Time{}, fmt.Errorf("%w: %s: still held by another holder after %v", ErrLeaseTimeout, resource, wait)
		}
	}
}

// ended is the error of a wait that the context ended (the server's call
// was cancelled by a cancel request): ErrLeaseTimeout at the context's
// deadline, the context's cause otherwise.
func (k *keeper) ended(ctx context.Context, resource string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s: still held by another holder at the context's deadline: %w", ErrLeaseTimeout, resource, context.DeadlineExceeded)
	}
	return fmt.Errorf("fencing: the wait for %s ended: %w", resource, context.Cause(ctx))
}

// granted returns the token and the deadline of a grant whose call started
// at start: after a long wait the lease is renewed at once, so that it
// starts with a full ttl.
func (k *keeper) granted(ctx context.Context, conn *pgx.Conn, resource string, token int64, ttl time.Duration, start time.Time) (int64, time.Time, error) {
	if time.Since(start) > ttl/3 {
		// Granted just now by the server's clock: a full ttl from now at
		// most for the renewal; a cancellation now would leave it held.
		start = time.Now()
		renewCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), start.Add(ttl))
		defer cancel()
		var renewed bool
		if err := conn.QueryRow(renewCtx, "SELECT fencing.renew($1, $2, $3, make_interval(secs => $4))",
			resource, k.holder, token, seconds(ttl)).Scan(&renewed); err != nil {
			return 0, time.Time{}, err
		}
		if !renewed {
			return 0, time.Time{}, lostError(resource, token, "lost right after its grant")
		}
	}
	return token, start.Add(ttl), nil
}

// ownLeaseNotice is the SQLSTATE of acquire()'s NOTICE to a holder that
// asks again for its own live lease: "holder "h" already holds the lease on
// resource "r" with token N".
const ownLeaseNotice = "01T01"

var heldToken = regexp.MustCompile(`with token (\d+)$`)

// ownLease is the LeaseAlreadyHeldError that a NULL grant's notices tell,
// or nil: another holder has the lease.
func (k *keeper) ownLease(notices []*pgconn.Notice, resource string) error {
	for _, n := range notices {
		if n.Code == ownLeaseNotice {
			held := &LeaseAlreadyHeldError{Resource: resource, Holder: k.holder}
			if m := heldToken.FindStringSubmatch(n.Message); m != nil {
				held.Token, _ = strconv.ParseInt(m[1], 10, 64)
			}
			return held
		}
	}
	return nil
}

// held returns the leases still held (and forgets the others).
func (k *keeper) held() []*Lease {
	k.leasesMu.Lock()
	defer k.leasesMu.Unlock()
	var out []*Lease
	for r, l := range k.leases {
		if l.live() {
			out = append(out, l)
		} else {
			delete(k.leases, r)
		}
	}
	return out
}

func (k *keeper) forget(leases []*Lease) {
	k.leasesMu.Lock()
	defer k.leasesMu.Unlock()
	for _, l := range leases {
		if k.leases[l.resource] == l {
			delete(k.leases, l.resource)
		}
	}
}

// start runs the renewal loop.
func (k *keeper) start() {
	k.started = true
	go k.run()
}

// stop ends the renewal loop and waits for it.
func (k *keeper) stop() {
	k.stopOnce.Do(func() { close(k.quit) })
	if k.started {
		<-k.done
	}
}

// shortestTTL is the shortest ttl of the leases (0 for none).
func shortestTTL(leases []*Lease) time.Duration {
	var ttl time.Duration
	for _, l := range leases {
		if ttl == 0 || l.ttl < ttl {
			ttl = l.ttl
		}
	}
	return ttl
}

// retryInterval is the pause after a failed renewal: a tenth of the ttl,
// within 50 ms to 1 s.
func retryInterval(ttl time.Duration) time.Duration {
	return min(max(ttl/10, retryFloor), time.Second)
}

func (k *keeper) run() {
	defer close(k.done)
	failing := false
	for {
		leases := k.held()
		if !k.batch && len(leases) == 0 {
			// A Lease's keeper ends with its lease, released or not.
			k.closeConn()
			return
		}
		ttl := shortestTTL(leases)
		var timer <-chan time.Time
		switch {
		case ttl == 0: // an empty session: until a lease comes
		case failing:
			timer = time.After(retryInterval(ttl))
		default:
			timer = time.After(ttl/3 - time.Since(k.lastAck))
		}
		select {
		case <-k.quit:
			return
		case <-k.wake:
			continue
		case <-timer:
		}
		err := k.renew()
		switch {
		case err != nil && !failing:
			k.logger.Warn("fencing: renewal failed, retrying until the deadline", "holder", k.holder, "error", err)
		case err != nil:
			k.logger.Debug("fencing: renewal failed again", "holder", k.holder, "error", err)
		case failing:
			k.logger.Info("fencing: renewed again", "holder", k.holder)
		}
		failing = err != nil
	}
}

// renew renews every held lease once.
func (k *keeper) renew() error {
	leases := k.held()
	if len(leases) == 0 {
		k.lastAck = time.Now()
		return nil
	}
	// A call may take until the last deadline; past it nothing is saved.
	var last time.Time
	for _, l := range leases {
		if d := l.Deadline(); d.After(last) {
			last = d
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), last)
	defer cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	conn, err := k.connect(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	renewed, err := k.renewOn(ctx, conn, leases)
	if err != nil {
		k.dropConn()
		return err
	}
	for _, l := range leases {
		if renewed[l] {
			l.extend(start)
		} else {
			l.lose("the renewal was refused", true)
		}
	}
	k.lastAck = start
	return nil
}

// renewOn calls renew() for a lease of its own, and for a session one
// renew_all() per ttl its leases have.
func (k *keeper) renewOn(ctx context.Context, conn *pgx.Conn, leases []*Lease) (map[*Lease]bool, error) {
	renewed := map[*Lease]bool{}
	if !k.batch {
		for _, l := range leases {
			var ok bool
			if err := conn.QueryRow(ctx, "SELECT fencing.renew($1, $2, $3, make_interval(secs => $4))",
				l.resource, k.holder, l.token, seconds(l.ttl)).Scan(&ok); err != nil {
				return nil, err
			}
			renewed[l] = ok
		}
		return renewed, nil
	}
	byTTL := map[time.Duration][]*Lease{}
	for _, l := range leases {
		byTTL[l.ttl] = append(byTTL[l.ttl], l)
	}
	type key struct {
		resource string
		token    int64
	}
	for ttl, group := range byTTL {
		resources := make([]string, len(group))
		tokens := make([]int64, len(group))
		for i, l := range group {
			resources[i], tokens[i] = l.resource, l.token
		}
		rows, err := conn.Query(ctx, "SELECT resource, token, renewed FROM fencing.renew_all($1, make_interval(secs => $2), $3::text[], $4::bigint[])",
			k.holder, seconds(ttl), resources, tokens)
		if err != nil {
			return nil, err
		}
		ok := map[key]bool{}
		var r string
		var t int64
		var b bool
		if _, err := pgx.ForEachRow(rows, []any{&r, &t, &b}, func() error {
			ok[key{r, t}] = b
			return nil
		}); err != nil {
			return nil, err
		}
		for _, l := range group {
			renewed[l] = ok[key{l.resource, l.token}]
		}
	}
	return renewed, nil
}

// release calls the release function for l and ends it: true if the
// server released it, false if it had been lost; an error if the server
// could not be told (the lease then expires at its ttl).
func (k *keeper) release(l *Lease) (bool, error) {
	k.forget([]*Lease{l})
	ctx, cancel := context.WithTimeout(context.Background(), max(l.ttl, 5*time.Second))
	defer cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	l.mu.Lock()
	refused := l.refused
	l.mu.Unlock()
	if refused {
		return false, nil // the server refused a renewal: nothing to release
	}
	conn, err := k.connect(ctx)
	if err != nil {
		return false, l.abandon(err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT "+k.releaseFn+"($1, $2, $3)", l.resource, k.holder, l.token).Scan(&ok); err != nil {
		k.dropConn()
		return false, l.abandon(err)
	}
	return l.markReleased(ok), nil
}

// noticeSink keeps a connection's notices until the caller takes them.
type noticeSink struct {
	mu   sync.Mutex
	list []*pgconn.Notice
}

func collectNotices(config *pgx.ConnConfig) *noticeSink {
	s := &noticeSink{}
	config.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		s.mu.Lock()
		s.list = append(s.list, n)
		s.mu.Unlock()
	}
	return s
}

func (s *noticeSink) take() []*pgconn.Notice {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.list
	s.list = nil
	return list
}
