package io.github.fencing;

import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One holder's leases on many resources, kept alive together on one keepalive connection
 * ({@code application_name} {@code fencing keepalive <holder>}) by one daemon thread: the leases
 * of one TTL are renewed by one {@code fencing.renew_all()} call when the first of them reaches a
 * third of its TTL. {@link #close()} releases every lease of the session.
 *
 * <pre>{@code
 * try (Session session = Session.open(source, "worker-a")) {
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
    private static final String RELEASE = "SELECT fencing.release(?, ?, ?)";
    private static final Pattern TOKEN_IN_NOTICE = Pattern.compile("with token (\\d+)$");
    private static final Executor DIRECT = Runnable::run;
    private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(10);

    private final ConnectionSource source;
    private final String holder;
    private final String applicationName;

    private final ReentrantLock io = new ReentrantLock();
    private Connection connection; // guarded by io
    private boolean renewAllMissing; // guarded by io

    private final List<Lease> leases = new ArrayList<>(); // guarded by this
    private boolean closed; // guarded by this
    private long retryAt; // guarded by this; nanoTime, valid while retrying
    private boolean retrying; // guarded by this
    private final Thread keeper;

    private final boolean single;

    private Session(ConnectionSource source, String holder, boolean single) {
        this.single = single;
        this.source = Objects.requireNonNull(source, "source");
        this.holder = Objects.requireNonNull(holder, "holder");
        if (holder.isEmpty()) {
            throw new IllegalArgumentException("holder is empty");
        }
        this.applicationName = "fencing keepalive " + holder;
        this.keeper = new Thread(this::keep, applicationName);
        this.keeper.setDaemon(true);
    }

    /** Opens a session for {@code holder} and its keepalive connection. */
    public static Session open(ConnectionSource source, String holder) throws SQLException {
        return open(source, holder, false);
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

    public String holder() {
        return holder;
    }

    /** Acquires a lease on {@code resource} if none is live, else {@link LeaseTimeoutException}. */
    public Lease lease(String resource, Duration ttl) throws SQLException {
        return lease(resource, ttl, null);
    }

    /**
     * Acquires a lease on {@code resource}, waiting up to {@code wait} (null or zero: do not
     * wait). The lease belongs to the session: closing it releases it, closing the session
     * releases all. A wait runs on a short-lived connection of its own, so that it holds up
     * neither the renewals of the session's leases nor other acquires.
     */
    public Lease lease(String resource, Duration ttl, Duration wait) throws SQLException {
        Objects.requireNonNull(resource, "resource");
        Objects.requireNonNull(ttl, "ttl");
        if (ttl.isNegative() || ttl.isZero()) {
            throw new IllegalArgumentException("ttl must be positive: " + ttl);
        }
        if (wait != null && wait.isNegative()) {
            throw new IllegalArgumentException("wait must not be negative: " + wait);
        }
        boolean waits = wait != null && !wait.isZero();
        synchronized (this) {
            if (closed) {
                throw new IllegalStateException("session of \"" + holder + "\" is closed");
            }
        }
        long start;
        Long token;
        SQLWarning warnings;
        long timeoutMillis = Math.max(5000, ttl.toMillis()) + (waits ? wait.toMillis() : 0);
        if (waits && (!single || hasLiveLeases())) {
            // Do not hold up the renewals of the session's other leases for the wait.
            try (Connection c = source.connect("fencing acquire " + holder, CONNECT_TIMEOUT)) {
                c.setNetworkTimeout(DIRECT, (int) Math.min(Integer.MAX_VALUE, timeoutMillis));
                start = System.nanoTime();
                Object[] r = acquireOn(c, resource, ttl, wait);
                token = (Long) r[0];
                warnings = (SQLWarning) r[1];
            }
        } else {
            io.lock();
            try {
                Connection c = connection(CONNECT_TIMEOUT, true);
                c.setNetworkTimeout(DIRECT, (int) Math.min(Integer.MAX_VALUE, timeoutMillis));
                start = System.nanoTime();
                Object[] r = acquireOn(c, resource, ttl, waits ? wait : null);
                token = (Long) r[0];
                warnings = (SQLWarning) r[1];
            } catch (SQLException e) {
                dropConnection();
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
            throw new LeaseTimeoutException(resource, wait);
        }
        Lease lease = new Lease(this, resource, token, ttl, start);
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

    private Object[] acquireOn(Connection c, String resource, Duration ttl, Duration wait) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(wait == null ? ACQUIRE : ACQUIRE_WAIT)) {
            ps.setString(1, resource);
            ps.setString(2, holder);
            ps.setLong(3, micros(ttl));
            if (wait != null) {
                ps.setLong(4, micros(wait));
            }
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                long t = rs.getLong(1);
                Long token = rs.wasNull() ? null : t;
                return new Object[] {token, ps.getWarnings()};
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
            try (PreparedStatement ps = c.prepareStatement(RELEASE)) {
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
                    Map<Long, List<Lease>> byTtl = new LinkedHashMap<>();
                    Map<Long, Boolean> due = new HashMap<>();
                    long untilWake = Long.MAX_VALUE;
                    for (Lease l : leases) {
                        if (!l.live(now)) {
                            continue;
                        }
                        byTtl.computeIfAbsent(l.ttlNanos, k -> new ArrayList<>()).add(l);
                        long renewAt = l.lastStart() + l.ttlNanos / 3;
                        if (retrying && retryAt - renewAt > 0) {
                            renewAt = retryAt;
                        }
                        if (now - renewAt >= 0) {
                            due.put(l.ttlNanos, true);
                        } else {
                            untilWake = Math.min(untilWake, renewAt - now);
                        }
                        untilWake = Math.min(untilWake, l.deadline() - now);
                    }
                    for (Map.Entry<Long, List<Lease>> e : byTtl.entrySet()) {
                        if (due.containsKey(e.getKey())) {
                            groups.add(e.getValue());
                            minTtl = Math.min(minTtl, e.getKey());
                        }
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
                    // Retry soon, until the deadline: a tenth of the TTL, between 50 ms and 1 s.
                    long delay = Math.max(TimeUnit.MILLISECONDS.toNanos(50), Math.min(TimeUnit.SECONDS.toNanos(1), minTtl / 10));
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
        if (live.size() > 1 && !renewAllMissing) {
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
            } catch (SQLException e) {
                if (!"42883".equals(e.getSQLState())) {
                    throw e;
                }
                // An extension without renew_all(): one renew() each, on the same connection.
                LOG.log(System.Logger.Level.INFO, "fencing: no fencing.renew_all() in this database; renewing one by one");
                renewAllMissing = true;
                renewEach(c, live);
                return;
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

    /** Whether this database lacked fencing.renew_all() (renewals then go one by one). */
    boolean renewAllMissing() {
        io.lock();
        try {
            return renewAllMissing;
        } finally {
            io.unlock();
        }
    }

    @Override
    public String toString() {
        return "Session[" + holder + "]";
    }
}
