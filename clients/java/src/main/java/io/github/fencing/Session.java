package io.github.fencing;

import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.ReentrantLock;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One holder's leases on many resources, kept alive together on one keepalive connection
 * ({@code application_name} {@code fencing keepalive <holder>}) by one daemon thread. Each lease
 * has its own TTL; the session renews every lease it holds at a third of the shortest TTL among
 * them (one {@code fencing.renew_all()} call per distinct TTL). {@link #close()} releases every
 * lease of the session.
 *
 * <pre>{@code
 * try (Session session = Session.open(source)) {   // holder: host:pid:random
 *     Lease a = session.lease("order:101", Duration.ofSeconds(10));
 *     Lease b = session.lease("order:102", Duration.ofSeconds(10), Duration.ofSeconds(5));
 *     ...
 * }
 * }</pre>
 */
public final class Session implements AutoCloseable {
    static final System.Logger LOG = System.getLogger("io.github.fencing");

    /**
     * The SQLSTATE of the NOTICE with which {@code fencing.acquire()} answers a holder that asks
     * again for the live lease it holds.
     */
    public static final String ALREADY_HELD_SQLSTATE = "01T01";

    private static final String ACQUIRE = "SELECT fencing.acquire(?, ?, ? * interval '1 microsecond')";
    private static final String ACQUIRE_WAIT =
            "SELECT fencing.acquire(?, ?, ? * interval '1 microsecond', ? * interval '1 microsecond')";
    private static final String RENEW = "SELECT fencing.renew(?, ?, ?, ? * interval '1 microsecond')";
    private static final String RENEW_ALL = "SELECT resource, token, renewed"
            + " FROM fencing.renew_all(?, ? * interval '1 microsecond', ?::text[], ?::bigint[])";
    private static final String CAMPAIGN_WAIT =
            "SELECT fencing.campaign(?, ?, ? * interval '1 microsecond', ? * interval '1 microsecond')";
    private static final String CAMPAIGN = "SELECT fencing.campaign(?, ?, ? * interval '1 microsecond')";
    private static final String RELEASE = "SELECT fencing.release(?, ?, ?)";
    private static final String RESIGN = "SELECT fencing.resign(?, ?, ?)";
    /** The longest single server-side wait: a longer one is a repetition of these. */
    static final Duration CHUNK = Duration.ofHours(1);
    private static final ExecutorService WAITS = Executors.newCachedThreadPool(Lease.daemon("fencing-wait"));
    private static final Pattern TOKEN_IN_NOTICE = Pattern.compile("with token (\\d+)$");
    private static final Executor DIRECT = Runnable::run;
    private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(10);

    private final ConnectionSource source;
    private final String holder;
    private final String applicationName;

    private final ReentrantLock io = new ReentrantLock();
    private Connection connection; // guarded by io
    private boolean checked; // guarded by io: the server's version was checked

    private final List<Lease> leases = new ArrayList<>(); // guarded by this
    private boolean closed; // guarded by this
    private long retryAt; // guarded by this; nanoTime, valid while retrying
    private boolean retrying; // guarded by this
    private final Thread keeper;

    private final boolean single;

    private Session(ConnectionSource source, String holder, boolean single) {
        this.single = single;
        this.source = Objects.requireNonNull(source, "source");
        this.holder = holder == null ? Server.defaultHolder() : holder;
        if (this.holder.isEmpty()) {
            throw new IllegalArgumentException("holder is empty");
        }
        this.applicationName = "fencing keepalive " + this.holder;
        this.keeper = new Thread(this::keep, applicationName);
        this.keeper.setDaemon(true);
    }

    /**
     * Opens a session for {@code holder} (null: a new {@code <host>:<pid>:<random>}, see
     * {@link Fencing#defaultHolder()}) and its keepalive connection. Throws
     * {@link UnsupportedServerException} if the database's extension is older than 0.4.0.
     */
    public static Session open(ConnectionSource source, String holder) throws SQLException {
        return open(source, holder, false);
    }

    /** Opens a session with a holder name of its own ({@link Fencing#defaultHolder()}). */
    public static Session open(ConnectionSource source) throws SQLException {
        return open(source, null, false);
    }

    /** {@code single}: the private session of one {@link Lease}, whose waits may use the keepalive connection. */
    static Session open(ConnectionSource source, String holder, boolean single) throws SQLException {
        Session s = new Session(source, holder, single);
        s.io.lock();
        try {
            s.connection(CONNECT_TIMEOUT);
        } finally {
            s.io.unlock();
        }
        s.keeper.start();
        return s;
    }

    /** The holder name of the session's leases (given, or generated). */
    public String holder() {
        return holder;
    }

    /** Acquires a lease on {@code resource} if none is live, else {@link LeaseBusyException}. */
    public Lease lease(String resource, Duration ttl) throws SQLException {
        return lease(resource, ttl, null);
    }

    /**
     * Acquires a lease on {@code resource} with its own {@code ttl}, waiting up to {@code wait}
     * behind the holders before it (first come, first served): null or zero is a try
     * ({@link LeaseBusyException} if another holder has it), {@link Lease#FOREVER} waits until
     * granted, any other positive duration throws {@link LeaseTimeoutException} once it passed.
     * A long wait is a repetition of server-side waits of at most an hour, never polling.
     * {@link Thread#interrupt()} of the waiting thread cancels the server's call (a cancel
     * request), waits for it to end, and throws {@link LeaseCancelledException}: nothing stays
     * queued. The lease belongs to the session: closing it releases it, closing the session
     * releases all. A wait runs on a short-lived connection of its own while the session has
     * leases to renew, so that it holds up neither their renewals nor other acquires.
     */
    public Lease lease(String resource, Duration ttl, Duration wait) throws SQLException {
        return lease(resource, ttl, wait, false);
    }

    /**
     * As {@link #lease(String, Duration, Duration)} in the background: the future completes with
     * the lease or the error. {@code cancel()} of the future cancels the server's call and returns
     * once that call has ended (nothing stays queued); it returns false if the lease had been
     * granted already. A grant that comes as the future is cancelled is released.
     */
    public CompletableFuture<Lease> leaseAsync(String resource, Duration ttl, Duration wait) {
        check(resource, ttl, wait);
        return start(resource, ttl, wait, false, false, null);
    }

    /** {@link #leaseAsync} for the session of one {@link Lease}, which the lease closes. */
    Pending leaseAsyncOwned(String resource, Duration ttl, Duration wait) {
        check(resource, ttl, wait);
        return start(resource, ttl, wait, false, true, null);
    }

    /** {@code campaign}: {@code fencing.campaign()} for an {@link Election}, else {@code fencing.acquire()}. */
    Lease lease(String resource, Duration ttl, Duration wait, boolean campaign) throws SQLException {
        check(resource, ttl, wait);
        if (wait == null || wait.isZero()) {
            Lease l = attempt(resource, ttl, null, campaign, null);
            if (l == null) {
                throw new LeaseBusyException(resource);
            }
            return l;
        }
        Pending p = start(resource, ttl, wait, campaign, false, null);
        return await(p, resource);
    }

    /** The outcome of a waiting acquire; an interrupt cancels it (the call ended) first. */
    static Lease await(Pending p, String resource) throws SQLException {
        try {
            return p.get();
        } catch (InterruptedException e) {
            boolean cancelled = p.cancel(true);
            Thread.currentThread().interrupt();
            if (!cancelled) {
                return p.join(); // granted before the cancel
            }
            throw new LeaseCancelledException(resource, e);
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof SQLException s) {
                throw s;
            }
            if (c instanceof RuntimeException r) {
                throw r;
            }
            if (c instanceof Error r) {
                throw r;
            }
            throw new SQLException(c);
        }
    }

    private void check(String resource, Duration ttl, Duration wait) {
        checkArguments(resource, ttl, wait);
        synchronized (this) {
            if (closed) {
                throw new IllegalStateException("session of \"" + holder + "\" is closed");
            }
        }
    }

    /** NullPointerException, IllegalArgumentException for bad arguments, before anything is sent. */
    static void checkArguments(String resource, Duration ttl, Duration wait) {
        Objects.requireNonNull(resource, "resource");
        Objects.requireNonNull(ttl, "ttl");
        if (ttl.isNegative() || ttl.isZero()) {
            throw new IllegalArgumentException("ttl must be positive: " + ttl);
        }
        if (wait != null && wait.isNegative()) {
            throw new IllegalArgumentException("wait must not be negative: " + wait);
        }
    }

    /** Whether {@code wait} means "until granted": {@link Lease#FOREVER} or more than 100 years. */
    static boolean forever(Duration wait) {
        return wait.compareTo(Duration.ofDays(36525)) > 0;
    }

    /**
     * Starts a waiting acquire on a thread of the client; {@code owns}: the lease owns this
     * session; {@code onGrant} (may be null) runs with the lease before the future completes.
     */
    Pending start(String resource, Duration ttl, Duration wait, boolean campaign, boolean owns,
            java.util.function.Consumer<Lease> onGrant) {
        Pending p = new Pending();
        WAITS.execute(() -> {
            try {
                Lease l = waitFor(p, resource, ttl, wait == null ? Duration.ZERO : wait, campaign);
                if (owns) {
                    l.ownsSession();
                }
                if (onGrant != null && !p.isDone()) {
                    onGrant.accept(l);
                }
                if (!p.complete(l)) {
                    release(l, p); // cancelled as it was granted
                }
            } catch (Throwable e) {
                p.completeExceptionally(p.stop ? new CancellationException("cancelled") : e);
            } finally {
                p.ended.countDown();
            }
        });
        return p;
    }

    private static void release(Lease l, Pending p) {
        try {
            l.release();
        } catch (SQLException e) {
            LOG.log(System.Logger.Level.DEBUG, "fencing: release of " + l + " granted as its wait was cancelled failed", e);
        }
    }

    /** Repeated server-side waits of at most {@link #CHUNK} until granted, the wait passed, or cancelled. */
    private Lease waitFor(Pending p, String resource, Duration ttl, Duration wait, boolean campaign) throws SQLException {
        boolean always = forever(wait);
        long end = always ? 0 : System.nanoTime() + wait.toNanos();
        while (true) {
            if (p.stop) {
                throw new CancellationException("cancelled");
            }
            Duration chunk = CHUNK;
            if (!always) {
                long left = end - System.nanoTime();
                if (left <= 0 && !wait.isZero()) {
                    throw new LeaseTimeoutException(resource, wait);
                }
                chunk = Duration.ofNanos(Math.min(left, CHUNK.toNanos()));
            }
            Lease l = attempt(resource, ttl, chunk.isZero() || chunk.isNegative() ? null : chunk, campaign, p);
            if (l != null) {
                return l;
            }
            if (wait.isZero()) {
                throw new LeaseBusyException(resource);
            }
        }
    }

    /**
     * One acquire (or campaign) call, waiting up to {@code wait} (null: a try): the lease, or null
     * if it was not granted. {@code p}, if given, can cancel the call while it runs.
     */
    private Lease attempt(String resource, Duration ttl, Duration wait, boolean campaign, Pending p) throws SQLException {
        boolean waits = wait != null;
        long start;
        Long token;
        SQLWarning warnings;
        long timeoutMillis = Math.max(5000, ttl.toMillis()) + (waits ? wait.toMillis() : 0);
        if (waits && (!single || hasLiveLeases())) {
            // Do not hold up the renewals of the session's other leases for the wait.
            try (Connection c = source.connect("fencing acquire " + holder, CONNECT_TIMEOUT)) {
                c.setNetworkTimeout(DIRECT, (int) Math.min(Integer.MAX_VALUE, timeoutMillis));
                start = System.nanoTime();
                Object[] r = acquireOn(c, resource, ttl, wait, campaign, p);
                token = (Long) r[0];
                warnings = (SQLWarning) r[1];
            }
        } else {
            io.lock();
            try {
                Connection c = connection(CONNECT_TIMEOUT, true);
                c.setNetworkTimeout(DIRECT, (int) Math.min(Integer.MAX_VALUE, timeoutMillis));
                start = System.nanoTime();
                Object[] r = acquireOn(c, resource, ttl, wait, campaign, p);
                token = (Long) r[0];
                warnings = (SQLWarning) r[1];
            } catch (SQLException e) {
                if (p == null || !p.stop) {
                    dropConnection();
                }
                throw e;
            } finally {
                io.unlock();
            }
        }
        if (token == null) {
            for (SQLWarning w = warnings; w != null; w = w.getNextWarning()) {
                if (ALREADY_HELD_SQLSTATE.equals(w.getSQLState())) {
                    Matcher m = TOKEN_IN_NOTICE.matcher(String.valueOf(w.getMessage()));
                    throw new LeaseAlreadyHeldException(resource, holder, m.find() ? Long.valueOf(m.group(1)) : null, w);
                }
            }
            return null;
        }
        Lease lease = new Lease(this, resource, token, ttl, start, campaign);
        if (System.nanoTime() - start > lease.ttlNanos / 3) {
            // A long wait: the grant came late in the call, and the deadline counts from its start.
            renewNow(lease);
        }
        boolean added = false;
        synchronized (this) {
            if (!closed) {
                leases.add(lease);
                added = true;
                notifyAll();
            }
        }
        if (!added) {
            lease.release();
            throw new IllegalStateException("session of \"" + holder + "\" was closed meanwhile");
        }
        lease.armDeadline();
        return lease;
    }

    /**
     * A waiting acquire running on a thread of the client. {@link #cancel(boolean)} stops it: it
     * sends cancel requests for the server's call until the call has ended, then returns.
     */
    /** The clients' retry interval after a failed call: a tenth of the TTL, between 50 ms and 1 s (nanoseconds). */
    static long retryInterval(long ttlNanos) {
        return Math.max(TimeUnit.MILLISECONDS.toNanos(50), Math.min(TimeUnit.SECONDS.toNanos(1), ttlNanos / 10));
    }

    static final class Pending extends CompletableFuture<Lease> {
        final AtomicReference<Statement> running = new AtomicReference<>();
        final CountDownLatch ended = new CountDownLatch(1);
        volatile boolean stop;

        @Override
        public boolean cancel(boolean mayInterruptIfRunning) {
            if (isDone()) {
                return isCancelled();
            }
            // Stop the call first: the future completes once it has ended (a grant that came
            // meanwhile completes it with the lease, and the cancel returns false).
            stop = true;
            boolean interrupted = false;
            while (ended.getCount() > 0) {
                Statement s = running.get();
                if (s != null) {
                    try {
                        s.cancel(); // PgJDBC: a cancel request, sent only while the call runs
                    } catch (SQLException ignored) {
                        // the call ended meanwhile, or the connection broke: it ends either way
                    }
                }
                try {
                    ended.await(100, TimeUnit.MILLISECONDS);
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            boolean cancelled = super.cancel(mayInterruptIfRunning) || isCancelled();
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
            return cancelled;
        }
    }

    /** Releases every lease of the session, stops its keepalive, closes its connection. */
    @Override
    public void close() throws SQLException {
        List<Lease> held;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            held = new ArrayList<>(leases);
            notifyAll();
        }
        SQLException failure = null;
        for (Lease l : held) {
            try {
                l.release();
            } catch (SQLException e) {
                if (failure == null) {
                    failure = e;
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        io.lock();
        try {
            dropConnection();
        } finally {
            io.unlock();
        }
        if (failure != null) {
            throw failure;
        }
    }

    /** The session's leases, not yet released. */
    public synchronized List<Lease> leases() {
        List<Lease> r = new ArrayList<>();
        for (Lease l : leases) {
            if (!l.isClosed()) {
                r.add(l);
            }
        }
        return r;
    }

    private synchronized boolean hasLiveLeases() {
        long now = System.nanoTime();
        for (Lease l : leases) {
            if (l.live(now)) {
                return true;
            }
        }
        return false;
    }

    private Object[] acquireOn(Connection c, String resource, Duration ttl, Duration wait, boolean campaign,
            Pending p) throws SQLException {
        String sql = campaign ? (wait == null ? CAMPAIGN : CAMPAIGN_WAIT) : wait == null ? ACQUIRE : ACQUIRE_WAIT;
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            ps.setString(1, resource);
            ps.setString(2, holder);
            ps.setLong(3, micros(ttl));
            if (wait != null) {
                ps.setLong(4, micros(wait));
            }
            if (p != null) {
                p.running.set(ps);
                if (p.stop) {
                    throw new CancellationException("cancelled");
                }
            }
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                long t = rs.getLong(1);
                Long token = rs.wasNull() ? null : t;
                return new Object[] {token, ps.getWarnings()};
            } finally {
                if (p != null) {
                    p.running.set(null);
                }
            }
        }
    }

    /**
     * Renews a lease at once after a long wait for its grant: the grant came at an unknown moment
     * of the call, so the deadline counts from the start of this renewal. Not judged by the
     * grant's deadline first: with a wait longer than the TTL, that may have passed already.
     */
    private void renewNow(Lease lease) throws SQLException {
        Boolean ok = null;
        SQLException failure = null;
        long start = 0;
        io.lock();
        try {
            Connection c = connection(CONNECT_TIMEOUT);
            c.setNetworkTimeout(DIRECT, (int) Math.min(Integer.MAX_VALUE, Math.max(1000, lease.ttl().toMillis())));
            try (PreparedStatement ps = c.prepareStatement(RENEW)) {
                start = System.nanoTime();
                ok = renewCall(ps, lease);
            }
        } catch (SQLException e) {
            dropConnection();
            failure = e;
        } finally {
            io.unlock();
        }
        if (Boolean.TRUE.equals(ok)) {
            lease.rebase(start);
            return;
        }
        if (ok == null && System.nanoTime() - lease.deadline() < 0) {
            return; // not confirmed, but within the grant's deadline: the keepalive retries
        }
        LeaseLostException e = new LeaseLostException(lease.resource(), lease.token(),
                ok == null ? Lease.DEADLINE_PASSED : Lease.RENEWAL_REFUSED);
        if (failure != null) {
            e.initCause(failure);
        }
        try {
            lease.release();
        } catch (SQLException suppressed) {
            e.addSuppressed(suppressed);
        }
        throw e;
    }

    boolean release(Lease lease) throws SQLException {
        synchronized (this) {
            leases.remove(lease);
        }
        io.lock();
        try {
            Connection c = connection(CONNECT_TIMEOUT, true);
            c.setNetworkTimeout(DIRECT, (int) Math.min(10_000, Math.max(1_000, lease.ttl().toMillis())));
            try (PreparedStatement ps = c.prepareStatement(lease.isElection() ? RESIGN : RELEASE)) {
                ps.setString(1, lease.resource());
                ps.setString(2, holder);
                ps.setLong(3, lease.token());
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    return rs.getBoolean(1);
                }
            }
        } catch (SQLException e) {
            dropConnection();
            throw e;
        } finally {
            io.unlock();
        }
    }

    /** The keepalive connection, opened again if it broke. Call with {@code io} held. */
    private Connection connection(Duration timeout) throws SQLException {
        return connection(timeout, false);
    }

    /**
     * The keepalive connection; with {@code validate}, one that answers now (an idle connection
     * may have been cut by a server restart or a terminated backend since its last use).
     */
    private Connection connection(Duration timeout, boolean validate) throws SQLException {
        if (connection != null && !connection.isClosed()) {
            if (!validate || connection.isValid(Math.max(1, (int) Math.min(10, timeout.toSeconds())))) {
                return connection;
            }
            dropConnection();
        }
        connection = null;
        Connection c = source.connect(applicationName, timeout);
        try {
            c.setAutoCommit(true);
            if (!checked) {
                Server.check(c);
                checked = true;
            }
        } catch (SQLException e) {
            c.close();
            throw e;
        }
        connection = c;
        return c;
    }

    private void dropConnection() {
        Connection c = connection;
        connection = null;
        if (c != null) {
            try {
                c.close();
            } catch (SQLException ignored) {
                // broken anyway
            }
        }
    }

    /** The keepalive thread. */
    private void keep() {
        while (true) {
            List<List<Lease>> groups = new ArrayList<>();
            long minTtl = Long.MAX_VALUE;
            synchronized (this) {
                while (true) {
                    if (closed) {
                        return;
                    }
                    long now = System.nanoTime();
                    // Every lease is renewed at a third of the shortest TTL the session holds.
                    Map<Long, List<Lease>> byTtl = new LinkedHashMap<>();
                    long shortest = Long.MAX_VALUE;
                    for (Lease l : leases) {
                        if (l.live(now)) {
                            byTtl.computeIfAbsent(l.ttlNanos, k -> new ArrayList<>()).add(l);
                            shortest = Math.min(shortest, l.ttlNanos);
                        }
                    }
                    boolean due = false;
                    long untilWake = Long.MAX_VALUE;
                    for (List<Lease> group : byTtl.values()) {
                        for (Lease l : group) {
                            long renewAt = l.lastStart() + shortest / 3;
                            if (retrying && retryAt - renewAt > 0) {
                                renewAt = retryAt;
                            }
                            if (now - renewAt >= 0) {
                                due = true;
                            } else {
                                untilWake = Math.min(untilWake, renewAt - now);
                            }
                            untilWake = Math.min(untilWake, l.deadline() - now);
                        }
                    }
                    if (due) {
                        groups.addAll(byTtl.values());
                        minTtl = shortest;
                    }
                    if (!groups.isEmpty()) {
                        break;
                    }
                    if (byTtl.isEmpty()) {
                        retrying = false;
                    }
                    try {
                        if (untilWake == Long.MAX_VALUE) {
                            wait();
                        } else {
                            TimeUnit.NANOSECONDS.timedWait(this, untilWake);
                        }
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }
            io.lock();
            try {
                for (List<Lease> group : groups) {
                    renewGroup(group);
                }
                synchronized (this) {
                    retrying = false;
                }
            } catch (SQLException | RuntimeException e) {
                LOG.log(System.Logger.Level.DEBUG, "fencing keepalive of \"" + holder + "\": renewal failed, retrying", e);
                dropConnection();
                synchronized (this) {
                    retrying = true;
                    // Retry soon, until the deadline.
                    long delay = retryInterval(minTtl);
                    retryAt = System.nanoTime() + delay;
                }
            } finally {
                io.unlock();
            }
        }
    }

    /** Renews leases of one TTL: renew() for one, renew_all() for several. Call with {@code io} held. */
    private void renewGroup(List<Lease> group) throws SQLException {
        long now = System.nanoTime();
        long earliest = Long.MAX_VALUE;
        List<Lease> live = new ArrayList<>();
        for (Lease l : group) {
            if (l.live(now)) {
                live.add(l);
                earliest = Math.min(earliest, l.deadline() - now);
            }
        }
        if (live.isEmpty()) {
            return;
        }
        Connection c = connection(Duration.ofNanos(earliest));
        // A call that cannot answer before the deadline is of no use: bound it by the time left,
        // and by a third of the TTL, so that a connection dropped without a word (a partition)
        // is given up in time for a retry on a new one before the deadline.
        long left = TimeUnit.NANOSECONDS.toMillis(earliest - (System.nanoTime() - now));
        long third = Math.max(250, TimeUnit.NANOSECONDS.toMillis(live.get(0).ttlNanos / 3));
        int timeout = (int) Math.max(100, Math.min(Integer.MAX_VALUE, Math.min(left, third)));
        c.setNetworkTimeout(DIRECT, timeout);
        if (live.size() > 1) {
            long start = System.nanoTime();
            Map<String, Boolean> renewed = new HashMap<>();
            try (PreparedStatement ps = c.prepareStatement(RENEW_ALL)) {
                String[] resources = new String[live.size()];
                Long[] tokens = new Long[live.size()];
                for (int i = 0; i < live.size(); i++) {
                    resources[i] = live.get(i).resource();
                    tokens[i] = live.get(i).token();
                }
                Array r = c.createArrayOf("text", resources);
                Array t = c.createArrayOf("bigint", tokens);
                ps.setString(1, holder);
                ps.setLong(2, live.get(0).ttlNanos / 1000);
                ps.setArray(3, r);
                ps.setArray(4, t);
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        renewed.put(rs.getString(1) + "\u0000" + rs.getLong(2), rs.getBoolean(3));
                    }
                }
            }
            for (Lease l : live) {
                if (Boolean.TRUE.equals(renewed.get(l.resource() + "\u0000" + l.token()))) {
                    l.acknowledge(start);
                } else {
                    l.signalLost(Lease.RENEWAL_REFUSED);
                }
            }
        } else {
            renewEach(c, live);
        }
    }

    private void renewEach(Connection c, List<Lease> live) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(RENEW)) {
            for (Lease l : live) {
                if (!l.live(System.nanoTime())) {
                    continue;
                }
                long start = System.nanoTime();
                if (renewCall(ps, l)) {
                    l.acknowledge(start);
                } else {
                    l.signalLost(Lease.RENEWAL_REFUSED);
                }
            }
        }
    }

    private boolean renewCall(PreparedStatement ps, Lease l) throws SQLException {
        ps.setString(1, l.resource());
        ps.setString(2, holder);
        ps.setLong(3, l.token());
        ps.setLong(4, l.ttlNanos / 1000);
        try (ResultSet rs = ps.executeQuery()) {
            rs.next();
            return rs.getBoolean(1);
        }
    }

    private static long micros(Duration d) {
        return TimeUnit.NANOSECONDS.toMicros(d.toNanos());
    }

    @Override
    public String toString() {
        return "Session[" + holder + "]";
    }
}
