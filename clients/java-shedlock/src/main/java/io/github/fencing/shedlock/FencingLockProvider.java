package io.github.fencing.shedlock;

import io.github.fencing.ConnectionSource;
import io.github.fencing.Fencing;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;

import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import net.javacrumbs.shedlock.support.LockException;

/**
 * A ShedLock {@link net.javacrumbs.shedlock.core.LockProvider} on the fencing extension's leases:
 * a lock named {@code N} is the lease on the resource {@code prefix + N} ({@code shedlock:N} by
 * default), granted by {@code fencing.acquire(resource, holder, lockAtMostFor)} with a new fencing
 * token. The lease is not kept alive: it ends at {@code lockAtMostFor}, as ShedLock's contract
 * says (wrap the provider in ShedLock's {@code KeepAliveLockProvider} to extend it while the task
 * runs; {@link SimpleLock#extend} is {@code fencing.renew()}). {@code unlock()} releases the lease
 * ({@code fencing.release()}), or, before {@code lockAtLeastFor} has passed, shortens it to end
 * then ({@code fencing.renew()} with the time left), as ShedLock's JDBC provider sets
 * {@code lock_until} to the unlock time.
 *
 * <p>While the task runs, {@link FencingLockContext#token()} is the lock's token on the thread
 * that took the lock: the task's writes carry it ({@link FencingLockContext#fenced}) and the
 * storage refuses them (23T01, {@code StaleTokenException}) once a newer holder has written.
 *
 * <p>Each call opens a connection of the source and closes it (a {@code DataSource} pool's
 * connection goes back to the pool), in auto-commit mode.
 */
public final class FencingLockProvider implements ExtensibleLockProvider {
    /** The default prefix of the resources: lock {@code report} is the lease on {@code shedlock:report}. */
    public static final String DEFAULT_PREFIX = "shedlock:";

    private static final String ACQUIRE = "SELECT fencing.acquire(?, ?, ? * interval '1 microsecond')";
    private static final String RENEW = "SELECT fencing.renew(?, ?, ?, ? * interval '1 microsecond')";
    private static final String RELEASE = "SELECT fencing.release(?, ?, ?)";

    private final ConnectionSource source;
    private final String prefix;
    private final String holder;

    /** Locks of {@code source} on resources {@code shedlock:<name>}, held as {@code <host>:<pid>:<random>}. */
    public FencingLockProvider(ConnectionSource source) {
        this(source, DEFAULT_PREFIX, Fencing.defaultHolder());
    }

    /**
     * Locks of {@code source} on resources {@code prefix + name}, held as {@code holder} (the
     * {@code holder} of {@code fencing.leases}: name this process; two providers with one holder
     * are one holder to the server).
     */
    public FencingLockProvider(ConnectionSource source, String prefix, String holder) {
        this.source = Objects.requireNonNull(source, "source");
        this.prefix = Objects.requireNonNull(prefix, "prefix");
        this.holder = Objects.requireNonNull(holder, "holder");
        if (holder.isEmpty()) {
            throw new IllegalArgumentException("holder must not be empty");
        }
    }

    /** The holder this provider's leases are granted to. */
    public String holder() {
        return holder;
    }

    /** The resource of the lock named {@code name}: {@code prefix + name}. */
    public String resource(String name) {
        return prefix + name;
    }

    @Override
    public Optional<SimpleLock> lock(LockConfiguration config) {
        Objects.requireNonNull(config, "config");
        Duration ttl = positive(config.getLockAtMostFor(), config.getName());
        String resource = resource(config.getName());
        Long token;
        try (Connection c = connect(); PreparedStatement ps = c.prepareStatement(ACQUIRE)) {
            ps.setString(1, resource);
            ps.setString(2, holder);
            ps.setLong(3, micros(ttl));
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                long t = rs.getLong(1);
                token = rs.wasNull() ? null : t;
            }
        } catch (SQLException e) {
            throw new LockException("fencing: acquiring lock " + config.getName() + " (resource " + resource
                    + ") failed: " + e.getMessage(), e);
        }
        if (token == null) {
            return Optional.empty();
        }
        FencingLock lock = new FencingLock(this, config, resource, token);
        FencingLockContext.enter(lock);
        return Optional.of(lock);
    }

    /** {@code fencing.renew(resource, holder, token, ttl)}: false if the lease was lost. */
    boolean renew(String resource, long token, Duration ttl) {
        return call(RENEW, resource, token, micros(ttl));
    }

    /** {@code fencing.release(resource, holder, token)}: false if the lease was lost. */
    boolean release(String resource, long token) {
        return call(RELEASE, resource, token, null);
    }

    private boolean call(String sql, String resource, long token, Long micros) {
        try (Connection c = connect(); PreparedStatement ps = c.prepareStatement(sql)) {
            ps.setString(1, resource);
            ps.setString(2, holder);
            ps.setLong(3, token);
            if (micros != null) {
                ps.setLong(4, micros);
            }
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getBoolean(1);
            }
        } catch (SQLException e) {
            throw new LockException("fencing: " + (micros == null ? "releasing" : "renewing") + " the lease on "
                    + resource + " (token " + token + ") failed: " + e.getMessage(), e);
        }
    }

    /** A connection in auto-commit mode: each call is its own short transaction. */
    private Connection connect() throws SQLException {
        Connection c = source.connect();
        try {
            if (!c.getAutoCommit()) {
                c.setAutoCommit(true);
            }
        } catch (SQLException e) {
            c.close();
            throw e;
        }
        return c;
    }

    static Duration positive(Duration d, String name) {
        if (d.isZero() || d.isNegative()) {
            throw new IllegalArgumentException("lockAtMostFor of lock " + name + " must be positive, not " + d);
        }
        return d;
    }

    /** Whole microseconds (the server's precision), at least one. */
    static long micros(Duration d) {
        long us;
        try {
            us = Math.addExact(Math.multiplyExact(d.getSeconds(), 1_000_000L), d.getNano() / 1_000);
        } catch (ArithmeticException e) {
            throw new IllegalArgumentException("duration too long: " + d, e);
        }
        return Math.max(1, us);
    }

    @Override
    public String toString() {
        return "FencingLockProvider(" + source + ", prefix " + prefix + ", holder " + holder + ")";
    }
}
