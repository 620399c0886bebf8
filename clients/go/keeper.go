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
)

// A keeper owns the keepalive connection of a Lease or a Session and the
// goroutine that renews its leases at a third of the ttl. Failed renewals
// are retried, reconnecting, until each lease's deadline.
type keeper struct {
	config *pgx.ConnConfig
	holder string
	ttl    time.Duration
	batch  bool // a Session: renew_all() for all its leases
	single bool // the server has no renew_all(): renew() each (loop only)
	logger *slog.Logger

	mu      sync.Mutex // the connection: one call at a time
	conn    *pgx.Conn
	notices *noticeSink // the connection's notices

	leasesMu sync.Mutex
	leases   map[string]*Lease // held leases by resource

	lastAck  time.Time // start of the last acknowledged call (loop only)
	quit     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	started  bool
}

const undefinedFunction = "42883"

func newKeeper(connString, holder string, ttl time.Duration, batch bool, logger *slog.Logger) (*keeper, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("fencing: ttl must be positive, not %v", ttl)
	}
	if logger == nil {
		logger = slog.Default()
	}
	config, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	config.RuntimeParams["application_name"] = "fencing keepalive " + holder
	k := &keeper{config: config, holder: holder, ttl: ttl, batch: batch, logger: logger,
		leases: map[string]*Lease{}, quit: make(chan struct{}), done: make(chan struct{}),
		lastAck: time.Now()}
	k.notices = collectNotices(config)
	if config.ConnectTimeout == 0 || config.ConnectTimeout > ttl {
		config.ConnectTimeout = ttl
	}
	return k, nil
}

// connect returns the keepalive connection, reconnecting if it broke.
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
func (k *keeper) acquire(ctx context.Context, resource string, wait time.Duration, s *Session) (*Lease, error) {
	if wait < 0 {
		return nil, fmt.Errorf("fencing: wait must not be negative, not %v", wait)
	}
	var token int64
	var deadline time.Time
	if s != nil && wait > 0 {
		// A waiting call would hold up the session's renewals: wait on a
		// connection of its own.
		config := k.config.Copy()
		config.RuntimeParams["application_name"] = "fencing wait " + k.holder
		notices := collectNotices(config)
		conn, err := pgx.ConnectConfig(ctx, config)
		if err != nil {
			return nil, err
		}
		defer conn.Close(context.Background())
		token, deadline, err = k.grant(ctx, conn, notices, resource, wait)
		if err != nil {
			return nil, err
		}
	} else {
		k.mu.Lock()
		conn, err := k.connect(ctx)
		if err == nil {
			token, deadline, err = k.grant(ctx, conn, k.notices, resource, wait)
			if err != nil && conn.IsClosed() {
				k.dropConn()
			}
		}
		k.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	l := newLease(k, s, resource, token, deadline)
	k.leasesMu.Lock()
	k.leases[resource] = l
	k.leasesMu.Unlock()
	return l, nil
}

// grant calls fencing.acquire() and returns the token and the deadline.
func (k *keeper) grant(ctx context.Context, conn *pgx.Conn, notices *noticeSink, resource string, wait time.Duration) (int64, time.Time, error) {
	notices.take()
	start := time.Now()
	var token *int64
	var err error
	if wait > 0 {
		err = conn.QueryRow(ctx, "SELECT fencing.acquire($1, $2, make_interval(secs => $3), make_interval(secs => $4))",
			resource, k.holder, seconds(k.ttl), seconds(wait)).Scan(&token)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == undefinedFunction {
			return k.pollGrant(ctx, conn, notices, resource, wait)
		}
	} else {
		err = conn.QueryRow(ctx, "SELECT fencing.acquire($1, $2, make_interval(secs => $3))",
			resource, k.holder, seconds(k.ttl)).Scan(&token)
	}
	if err != nil {
		return 0, time.Time{}, err
	}
	if token == nil {
		return 0, time.Time{}, k.refusal(ctx, conn, notices.take(), resource, wait)
	}
	if wait > 0 && time.Since(start) > k.ttl/3 {
		// A long wait: the deadline counts from the start of the call, so
		// renew at once to hold the lease for a full ttl.
		start = time.Now()
		var renewed bool
		if err := conn.QueryRow(ctx, "SELECT fencing.renew($1, $2, $3, make_interval(secs => $4))",
			resource, k.holder, *token, seconds(k.ttl)).Scan(&renewed); err != nil {
			return 0, time.Time{}, err
		}
		if !renewed {
			return 0, time.Time{}, lostError(resource, *token, "lost right after its grant")
		}
	}
	deadline := start.Add(k.ttl)
	return *token, deadline, nil
}

// pollGrant waits for a lease on a server without acquire(..., wait)
// (before fencing 0.4.0): it tries every 50 ms. Not first come, first served.
func (k *keeper) pollGrant(ctx context.Context, conn *pgx.Conn, notices *noticeSink, resource string, wait time.Duration) (int64, time.Time, error) {
	until := time.Now().Add(wait)
	for {
		token, deadline, err := k.grant(ctx, conn, notices, resource, 0)
		if err == nil || !errors.Is(err, ErrLeaseTimeout) || !time.Now().Add(50*time.Millisecond).Before(until) {
			return token, deadline, err
		}
		select {
		case <-ctx.Done():
			return 0, time.Time{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ownLeaseNotice is the SQLSTATE of acquire()'s NOTICE to a holder that
// asks again for its own live lease: "holder "h" already holds the lease on
// resource "r" with token N".
const ownLeaseNotice = "01T01"

var heldToken = regexp.MustCompile(`with token (\d+)$`)

// refusal says why acquire() returned NULL: the holder's own lease, or
// another holder's.
func (k *keeper) refusal(ctx context.Context, conn *pgx.Conn, notices []*pgconn.Notice, resource string, wait time.Duration) error {
	for _, n := range notices {
		if n.Code == ownLeaseNotice {
			held := &LeaseAlreadyHeldError{Resource: resource, Holder: k.holder}
			if m := heldToken.FindStringSubmatch(n.Message); m != nil {
				held.Token, _ = strconv.ParseInt(m[1], 10, 64)
			}
			return held
		}
	}
	// A server without the NOTICE: ask.
	var own int64
	if err := conn.QueryRow(ctx, "SELECT token FROM fencing.leases WHERE resource = $1 AND holder = $2 AND live",
		resource, k.holder).Scan(&own); err == nil {
		return &LeaseAlreadyHeldError{Resource: resource, Holder: k.holder, Token: own}
	}
	if wait > 0 {
		return fmt.Errorf("%w: %s: still held by another holder after %v", ErrLeaseTimeout, resource, wait)
	}
	return fmt.Errorf("%w: %s is held by another holder", ErrLeaseTimeout, resource)
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

// retryInterval is the pause after a failed renewal: a tenth of the ttl,
// within 20 ms to 1 s.
func (k *keeper) retryInterval() time.Duration {
	return min(max(k.ttl/10, 20*time.Millisecond), time.Second)
}

func (k *keeper) run() {
	defer close(k.done)
	failing := false
	for {
		pause := k.ttl/3 - time.Since(k.lastAck)
		if failing {
			pause = k.retryInterval()
		}
		timer := time.NewTimer(pause)
		select {
		case <-k.quit:
			timer.Stop()
			return
		case <-timer.C:
		}
		if !k.batch && len(k.held()) == 0 {
			// A Lease's keeper ends with its lease, released or not.
			k.closeConn()
			return
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
			k.logger.Warn("fencing: lease lost: the renewal was refused", "resource", l.resource, "holder", k.holder, "token", l.token)
		}
	}
	k.lastAck = start
	return nil
}

// renewOn calls renew() for a lease of its own, renew_all() for a session.
func (k *keeper) renewOn(ctx context.Context, conn *pgx.Conn, leases []*Lease) (map[*Lease]bool, error) {
	renewed := map[*Lease]bool{}
	if k.batch && !k.single {
		resources := make([]string, len(leases))
		tokens := make([]int64, len(leases))
		for i, l := range leases {
			resources[i], tokens[i] = l.resource, l.token
		}
		rows, err := conn.Query(ctx, "SELECT resource, token, renewed FROM fencing.renew_all($1, make_interval(secs => $2), $3::text[], $4::bigint[])",
			k.holder, seconds(k.ttl), resources, tokens)
		if err == nil {
			type key struct {
				resource string
				token    int64
			}
			ok := map[key]bool{}
			var r string
			var t int64
			var b bool
			_, err = pgx.ForEachRow(rows, []any{&r, &t, &b}, func() error {
				ok[key{r, t}] = b
				return nil
			})
			if err == nil {
				for _, l := range leases {
					renewed[l] = ok[key{l.resource, l.token}]
				}
				return renewed, nil
			}
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != undefinedFunction {
			return nil, err
		}
		// Before fencing 0.4.0 there is no renew_all(): one renew() each.
		k.single = true
	}
	for _, l := range leases {
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT fencing.renew($1, $2, $3, make_interval(secs => $4))",
			l.resource, k.holder, l.token, seconds(k.ttl)).Scan(&ok); err != nil {
			return nil, err
		}
		renewed[l] = ok
	}
	return renewed, nil
}

// release calls fencing.release() for leases and ends them.
func (k *keeper) release(leases []*Lease) error {
	k.forget(leases)
	timeout := max(k.ttl, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	var first error
	for _, l := range leases {
		err := k.releaseOne(ctx, l)
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (k *keeper) releaseOne(ctx context.Context, l *Lease) error {
	l.mu.Lock()
	refused, ended := l.refused, l.ended
	l.mu.Unlock()
	if refused {
		return ended // the server refused a renewal: nothing to release
	}
	conn, err := k.connect(ctx)
	if err != nil {
		return l.abandon(err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT fencing.release($1, $2, $3)", l.resource, k.holder, l.token).Scan(&ok); err != nil {
		k.dropConn()
		return l.abandon(err)
	}
	return l.markReleased(ok)
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
