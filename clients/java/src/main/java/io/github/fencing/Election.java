package io.github.fencing;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;

import org.postgresql.PGConnection;

/**
 * Leader election on the extension's leases: the leadership of {@code election} is a lease on the
 * resource named by the election, taken with {@code fencing.campaign()} (candidates wait in
 * order, first come first served), kept alive like any lease, given up with
 * {@code fencing.resign()}. Its token fences the leader's writes ({@link Fencing#fenced(Connection,
 * Election, SqlFunction)}, or {@link #lease()} with any fenced helper). Everyone can read the
 * current leader ({@link #leader()}, {@code fencing.leader()}) and {@link #observe()} changes: the
 * server notifies channel {@code fencing_election} at the commit of each grant and resign, and an
 * observer re-reads the leader then and at the leader's {@code expires_at} (no polling).
 *
 * <pre>{@code
 * try (Election e = new Election(source, "billing-scheduler", Duration.ofSeconds(10))) {
 *     e.listener(new Election.Listener() {
 *         public void onStartedLeading(long token) { ... }
 *         public void onStoppedLeading() { ... }
 *     });
 *     Lease leadership = e.campaign(Lease.FOREVER);   // waits in order until it leads
 *     Fencing.fenced(conn, e, c -> ...);               // writes fenced by the leadership's token
 * }
 * }</pre>
 *
 * <p>Callbacks run on daemon threads of the client, one at a time per election: keep them short.
 */
public final class Election implements AutoCloseable {
    private static final String LEADER = "SELECT holder, token, granted_at, expires_at,"
            + " greatest(0, ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000))::bigint"
            + " FROM fencing.leader(?)";

    /** The callbacks of an election; each has an empty default. */
    public interface Listener {
        /** This candidate leads now, with {@code token}. */
        default void onStartedLeading(long token) {
        }

        /** This candidate stopped leading: it resigned, or its leadership was lost. */
        default void onStoppedLeading() {
        }

        /**
         * The leader changed (seen by {@link #observe()}): {@code holder} and {@code token} of the
         * new leader, both null when no one leads.
         */
        default void onNewLeader(String holder, Long token) {
        }
    }

    /** A live leadership as {@code fencing.leader()} shows it. */
    public record Leader(String holder, long token, Instant grantedAt, Instant expiresAt) {
    }

    private final ConnectionSource source;
    private final String name;
    private final String candidate;
    private final Duration ttl;
    private final boolean recampaign;
    private final List<Listener> listeners = new CopyOnWriteArrayList<>();
    private final Object callbackLock = new Object();

    private Session session; // guarded by this
    private Connection reader; // guarded by this
    private Thread observer; // guarded by this
    private volatile Connection observing;
    private volatile Lease leadership;
    private volatile CompletableFuture<Lease> campaigning;
    private volatile boolean closed;

    /**
     * An election for {@code candidate} (null: a generated {@code <host>:<pid>:<random>}) whose
     * leadership lasts {@code ttl} between renewals; with {@code recampaign}, a leader that lost
     * its leadership (not one that resigned) campaigns again, waiting until it leads.
     */
    public Election(ConnectionSource source, String election, String candidate, Duration ttl, boolean recampaign) {
        this.source = Objects.requireNonNull(source, "source");
        this.name = Objects.requireNonNull(election, "election");
        if (election.isEmpty()) {
            throw new IllegalArgumentException("election is empty");
        }
        Objects.requireNonNull(ttl, "ttl");
        if (ttl.isNegative() || ttl.isZero()) {
            throw new IllegalArgumentException("ttl must be positive: " + ttl);
        }
        if (candidate != null && candidate.isEmpty()) {
            throw new IllegalArgumentException("candidate is empty");
        }
        this.candidate = candidate == null ? Server.defaultHolder() : candidate;
        this.ttl = ttl;
        this.recampaign = recampaign;
    }

    /** An election with a generated candidate name, without re-campaigning. */
    public Election(ConnectionSource source, String election, Duration ttl) {
        this(source, election, null, ttl, false);
    }

    /** Adds a listener of this election's callbacks; returns this election. */
    public Election listener(Listener listener) {
        listeners.add(Objects.requireNonNull(listener, "listener"));
        return this;
    }

    /** The election's name (the resource of its leases). */
    public String name() {
        return name;
    }

    /** This candidate's holder name. */
    public String candidate() {
        return candidate;
    }

    /**
     * Campaigns: waits in order (first come, first served) up to {@code wait} until this candidate
     * leads ({@link Lease#FOREVER}: until it leads; null or zero: a try, {@link LeaseBusyException}
     * if another leads), and returns the leadership, a {@link Lease}. An interrupt cancels the
     * server's call ({@link LeaseCancelledException}). {@link IllegalStateException} if this
     * candidate leads already or a campaign of it is waiting.
     */
    public Lease campaign(Duration wait) throws SQLException {
        return Session.await(start(wait), name);
    }

    /**
     * {@link #campaign(Duration)} in the background: {@code cancel()} of the future cancels the
     * server's call and returns once it has ended.
     */
    public CompletableFuture<Lease> campaignAsync(Duration wait) throws SQLException {
        return start(wait);
    }

    private Session.Pending start(Duration wait) throws SQLException {
        if (wait != null && wait.isNegative()) {
            throw new IllegalArgumentException("wait must not be negative: " + wait);
        }
        if (closed) {
            throw new IllegalStateException("election " + name + " is closed");
        }
        if (isLeader()) {
            throw new IllegalStateException("already the leader of " + name);
        }
        CompletableFuture<Lease> c = campaigning;
        if (c != null && !c.isDone()) {
            throw new IllegalStateException("a campaign of " + candidate + " in " + name + " is waiting already");
        }
        Session.Pending p = session().start(name, ttl, wait, true, false, this::granted);
        campaigning = p;
        return p;
    }

    private synchronized Session session() throws SQLException {
        if (session == null) {
            session = Session.open(source, candidate);
        }
        return session;
    }

    private void granted(Lease l) {
        leadership = l;
        long token = l.token();
        callback(x -> x.onStartedLeading(token));
        l.lost().whenComplete((v, e) -> {
            // completed: lost; cancelled: released (resign), reported by resign()
            if (e == null) {
                stopped(l);
                try {
                    l.release(); // lost: drop it from the session (and resign, if the server still had it)
                } catch (SQLException x) {
                    Session.LOG.log(System.Logger.Level.DEBUG, "fencing: election " + name + ": resign after a loss failed", x);
                }
                campaignAgain();
            }
        });
    }

    /**
     * With {@code recampaign}: campaigns again after a loss, and again at the retry interval (a
     * tenth of the TTL, 50 ms to 1 s) for as long as a campaign fails (the server gone, often the
     * very reason the leadership was lost), until it leads, resigns or is closed.
     */
    private void campaignAgain() {
        CompletableFuture<Lease> waiting = campaigning;
        if (!recampaign || closed || isLeader() || (waiting != null && !waiting.isDone())) {
            return;
        }
        try {
            start(Lease.FOREVER).whenComplete((l, e) -> {
                if (e != null && !(e instanceof java.util.concurrent.CancellationException)) {
                    retryCampaign(e);
                }
            });
        } catch (SQLException | RuntimeException x) {
            retryCampaign(x);
        }
    }

    private void retryCampaign(Throwable why) {
        if (closed) {
            return;
        }
        Session.LOG.log(System.Logger.Level.WARNING, "fencing: election " + name + ": campaigning again failed, retrying", why);
        CompletableFuture.runAsync(this::campaignAgain, CompletableFuture.delayedExecutor(
                Session.retryInterval(ttl.toNanos()), java.util.concurrent.TimeUnit.NANOSECONDS));
    }

    private void stopped(Lease l) {
        synchronized (this) {
            if (leadership != l) {
                return;
            }
            leadership = null;
        }
        callback(Listener::onStoppedLeading);
    }

    private void callback(java.util.function.Consumer<Listener> call) {
        synchronized (callbackLock) {
            for (Listener x : listeners) {
                try {
                    call.accept(x);
                } catch (RuntimeException e) {
                    Session.LOG.log(System.Logger.Level.WARNING, "fencing: election " + name + ": a listener failed", e);
                }
            }
        }
    }

    /** Whether this candidate leads now (its leadership granted, not lost, not resigned). */
    public boolean isLeader() {
        Lease l = leadership;
        return l != null && !l.isLost() && !l.isClosed();
    }

    /** The token of this candidate's leadership, or null if it does not lead. */
    public Long token() {
        Lease l = leadership;
        return l != null && !l.isLost() && !l.isClosed() ? l.token() : null;
    }

    /**
     * The leadership, a {@link Lease} (its {@link Lease#lost()} is the loss signal); throws
     * {@link LeaseLostException} if this candidate does not lead.
     */
    public Lease lease() throws LeaseLostException {
        Lease l = leadership;
        if (l == null) {
            throw new LeaseLostException(name, 0, "this candidate does not lead election " + name);
        }
        l.check();
        return l;
    }

    /** The current leader of the election, read with {@code fencing.leader()}; empty when no one leads. */
    public synchronized Optional<Leader> leader() throws SQLException {
        if (reader == null || !reader.isValid(5)) {
            close(reader);
            reader = source.connect("fencing election " + candidate, Duration.ofSeconds(10));
            reader.setAutoCommit(true);
            Server.check(reader);
        }
        try {
            Object[] r = read(reader);
            return Optional.ofNullable((Leader) r[0]);
        } catch (SQLException e) {
            close(reader);
            reader = null;
            throw e;
        }
    }

    /** {leader or null, milliseconds until its expiry or null}. */
    private Object[] read(Connection c) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(LEADER)) {
            ps.setString(1, name);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    return new Object[] {null, null};
                }
                Leader l = new Leader(rs.getString(1), rs.getLong(2), rs.getTimestamp(3).toInstant(),
                        rs.getTimestamp(4).toInstant());
                return new Object[] {l, rs.getLong(5)};
            }
        }
    }

    /**
     * Starts observing the election (once; later calls do nothing): on a connection of its own,
     * {@code LISTEN fencing_election}, then {@link Listener#onNewLeader} with the leader read now
     * and at each change: at each notification of the election and at the leader's
     * {@code expires_at} (an expiry sends no notification). A broken connection is opened again
     * (after a second) and the leader read again.
     */
    public synchronized void observe() throws SQLException {
        if (closed) {
            throw new IllegalStateException("election " + name + " is closed");
        }
        if (observer != null) {
            return;
        }
        Connection c = listen();
        observing = c;
        observer = new Thread(() -> observeLoop(c), "fencing observe " + name);
        observer.setDaemon(true);
        observer.start();
    }

    private Connection listen() throws SQLException {
        Connection c = source.connect("fencing observe " + candidate, Duration.ofSeconds(10));
        try {
            c.setAutoCommit(true);
            Server.check(c);
            try (Statement st = c.createStatement()) {
                st.execute("LISTEN fencing_election");
            }
        } catch (SQLException e) {
            close(c);
            throw e;
        }
        return c;
    }

    private void observeLoop(Connection first) {
        Connection c = first;
        String lastHolder = null;
        Long lastToken = null;
        boolean seen = false;
        while (!closed) {
            try {
                if (c == null) {
                    c = listen();
                    observing = c;
                    if (closed) {
                        break;
                    }
                }
                PGConnection pg = c.unwrap(PGConnection.class);
                while (!closed) {
                    Object[] r = read(c);
                    Leader l = (Leader) r[0];
                    String holder = l == null ? null : l.holder();
                    Long token = l == null ? null : l.token();
                    if (!seen || !Objects.equals(holder, lastHolder) || !Objects.equals(token, lastToken)) {
                        seen = true;
                        lastHolder = holder;
                        lastToken = token;
                        callback(x -> x.onNewLeader(holder, token));
                    }
                    // Until a notification, or just past the leader's expiry (0: no deadline).
                    long timeout = l == null ? 0 : Math.max(1, Math.min(Integer.MAX_VALUE - 50, (Long) r[1]) + 50);
                    pg.getNotifications((int) timeout);
                }
            } catch (SQLException | RuntimeException e) {
                if (closed) {
                    break;
                }
                Session.LOG.log(System.Logger.Level.DEBUG, "fencing: observer of " + name + " failed, reconnecting", e);
                close(c);
                c = null;
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException x) {
                    break;
                }
            }
        }
        close(c);
    }

    /**
     * Resigns the leadership ({@code fencing.resign()}, which notifies observers at once): true if
     * the server had it and released it, false if it was lost already or this candidate did not
     * lead. A waiting campaign of this candidate is cancelled.
     */
    public boolean resign() throws SQLException {
        CompletableFuture<Lease> c = campaigning;
        if (c != null && !c.isDone()) {
            c.cancel(true);
        }
        Lease l = leadership;
        if (l == null) {
            return false;
        }
        boolean released = l.release();
        stopped(l);
        return released;
    }

    /** Resigns, stops observing, closes the election's connections. */
    @Override
    public void close() throws SQLException {
        closed = true;
        SQLException failure = null;
        try {
            resign();
        } catch (SQLException e) {
            failure = e;
        }
        Connection o = observing;
        if (o != null) {
            try {
                o.abort(Runnable::run); // ends a getNotifications() blocked on the socket
            } catch (SQLException ignored) {
                // closing anyway
            }
        }
        synchronized (this) {
            close(reader);
            reader = null;
            if (session != null) {
                try {
                    session.close();
                } catch (SQLException e) {
                    if (failure == null) {
                        failure = e;
                    } else {
                        failure.addSuppressed(e);
                    }
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    private static void close(Connection c) {
        if (c != null) {
            try {
                c.close();
            } catch (SQLException ignored) {
                // broken anyway
            }
        }
    }

    @Override
    public String toString() {
        return "Election[" + name + ", candidate " + candidate + (isLeader() ? ", leading" : "") + "]";
    }
}
