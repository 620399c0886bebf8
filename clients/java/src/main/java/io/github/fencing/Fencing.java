package io.github.fencing;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

import org.postgresql.core.BaseConnection;
import org.postgresql.core.TransactionState;
import org.postgresql.util.PSQLException;

/**
 * Fenced writes: the caller's statements in one transaction that carries a fencing token
 * ({@code SET LOCAL fencing.token}), from a {@link Lease} or a plain token of another lock
 * manager, with 23T01 and 23T02 raised as {@link StaleTokenException} and
 * {@link MissingTokenException}; and {@link #withLease}, a lease around a function.
 *
 * <pre>{@code
 * ConnectionSource db = ConnectionSource.fromEnvironment();
 * try (Connection conn = db.connect()) {
 *     Fencing.withLease(db, "order:101", LeaseOptions.of(Duration.ofSeconds(10)), lease ->
 *             Fencing.update(conn, lease, "UPDATE orders SET status = 'paid' WHERE id = ?", 101));
 * }
 * }</pre>
 *
 * <p>The work of {@link #fenced(Connection, Lease, SqlFunction)} is a {@link SqlFunction}
 * ({@code c -> ...}, the connection in its transaction):
 *
 * <pre>{@code
 * int rows = Fencing.fenced(conn, lease, c -> {
 *     try (PreparedStatement ps = c.prepareStatement("UPDATE orders SET status = 'paid' WHERE id = ?")) {
 *         ps.setInt(1, 101);
 *         return ps.executeUpdate();
 *     }
 * });
 * }</pre>
 */
public final class Fencing {
    private static final String SET_TOKEN = "SELECT set_config('fencing.token', ?, true)";
    private static final String SET_TOKEN_BOUND = "SELECT set_config('fencing.token', ?, true),"
            + " set_config('idle_in_transaction_session_timeout', ?, true)";
    private static final String SET_TOKEN_BOUND_17 = SET_TOKEN_BOUND + ", set_config('transaction_timeout', ?, true)";
    private static final AtomicLong STALE_REFUSALS = new AtomicLong();

    private Fencing() {
    }

    /** {@link #fenced(Connection, Lease, SqlFunction, Consumer)} without a stale-refusal callback. */
    public static <T> T fenced(Connection connection, Lease lease, SqlFunction<T> work) throws SQLException {
        return fenced(connection, lease, work, null);
    }

    /**
     * Runs {@code work} on {@code connection} in a transaction with the lease's token and commits.
     * The lease's deadline is checked on entry and again before COMMIT: once it has passed, the
     * helper throws {@link LeaseLostException} without sending anything more (and rolls back).
     * The transaction is bounded by the lease's remaining time: {@code SET LOCAL
     * idle_in_transaction_session_timeout} (and {@code transaction_timeout} on PostgreSQL 17 or
     * later) to the milliseconds left, at least 1, so that a holder frozen between its statements
     * and its COMMIT is ended by the server at its deadline (its row locks go with it) and the
     * next holder's write goes through.
     * On a refusal the transaction is rolled back, then {@code onStale} (a dead-letter hook, may
     * be null) runs for a stale token, and the exception is thrown. The connection's auto-commit
     * mode is restored afterwards; with auto-commit off, the transaction in progress is the one
     * committed.
     */
    public static <T> T fenced(Connection connection, Lease lease, SqlFunction<T> work,
            Consumer<? super StaleTokenException> onStale) throws SQLException {
        Objects.requireNonNull(lease, "lease");
        return run(connection, lease, lease.token(), work, onStale);
    }

    /** {@link #fenced(Connection, long, SqlFunction, Consumer)} without a stale-refusal callback. */
    public static <T> T fenced(Connection connection, long token, SqlFunction<T> work) throws SQLException {
        return fenced(connection, token, work, null);
    }

    /**
     * As {@link #fenced(Connection, Lease, SqlFunction, Consumer)} with a plain token, e.g. from
     * another lock manager (Redis, etcd, ZooKeeper): no deadline to check.
     */
    public static <T> T fenced(Connection connection, long token, SqlFunction<T> work,
            Consumer<? super StaleTokenException> onStale) throws SQLException {
        return run(connection, null, token, work, onStale);
    }

    /**
     * A new holder name, {@code <host>:<pid>:<random>}: this machine's host name (cut so that the
     * whole is at most 45 bytes), this process's id, and 8 lowercase hex characters from a
     * {@link java.security.SecureRandom}. A lease, session or election without a holder gets one.
     * Choose a holder yourself when a restarted process must resume its own lease (the same name
     * asks for the lease it held: {@link LeaseAlreadyHeldException} names its live token).
     */
    public static String defaultHolder() {
        return Server.defaultHolder();
    }

    /** A connection described by libpq's environment ({@link ConnectionSource#fromEnvironment()}). */
    public static Connection connect() throws SQLException {
        return ConnectionSource.fromEnvironment().connect();
    }

    /**
     * Runs {@code body} under a lease on {@code resource}, taken with {@code options} (by default
     * waiting until granted), and releases the lease when {@code body} returns or throws. The body
     * sees a loss through the lease ({@link Lease#lost()}, {@link Lease#isLost()},
     * {@link Lease#check()}; {@link #fenced} refuses to send once it is lost). If the lease was
     * lost while the body ran, the call throws {@link LeaseLostException} (with what the body
     * threw, if anything, suppressed), also when the body returned normally.
     */
    public static <T> T withLease(ConnectionSource source, String resource, LeaseOptions options,
            LeaseFunction<T> body) throws SQLException {
        Objects.requireNonNull(source, "source");
        Objects.requireNonNull(resource, "resource");
        Objects.requireNonNull(options, "options");
        Objects.requireNonNull(body, "body");
        Lease lease = Lease.acquire(source, resource, options.holder(), options.ttl(), options.maxWait());
        Throwable failure = null;
        try {
            T result = body.apply(lease);
            if (lease.isLost()) {
                throw lease.lostException();
            }
            return result;
        } catch (SQLException | RuntimeException | Error e) {
            failure = e;
            if (!(e instanceof LeaseLostException) && lease.isLost()) {
                LeaseLostException lost = lease.lostException();
                lost.addSuppressed(e);
                failure = lost;
                throw lost;
            }
            throw e;
        } finally {
            try {
                lease.release();
            } catch (SQLException e) {
                if (failure != null) {
                    failure.addSuppressed(e);
                } else {
                    throw e;
                }
            }
        }
    }

    /** {@link #withLease(ConnectionSource, String, LeaseOptions, LeaseFunction)} with {@link LeaseOptions#defaults()}. */
    public static <T> T withLease(ConnectionSource source, String resource, LeaseFunction<T> body) throws SQLException {
        return withLease(source, resource, LeaseOptions.defaults(), body);
    }

    /**
     * One fenced statement: {@code sql} with {@code params} ({@code setObject} in order) in a
     * transaction with the lease's token (see {@link #fenced(Connection, Lease, SqlFunction)});
     * returns the rows it changed.
     */
    public static int update(Connection connection, Lease lease, String sql, Object... params) throws SQLException {
        return fenced(connection, lease, statement(sql, params));
    }

    /** As {@link #update(Connection, Lease, String, Object...)} with a plain token. */
    public static int update(Connection connection, long token, String sql, Object... params) throws SQLException {
        return fenced(connection, token, statement(sql, params));
    }

    /**
     * As {@link #fenced(Connection, Lease, SqlFunction, Consumer)} with the leadership of an
     * {@link Election}: {@link LeaseLostException} without sending anything if it does not lead.
     */
    public static <T> T fenced(Connection connection, Election election, SqlFunction<T> work) throws SQLException {
        Objects.requireNonNull(election, "election");
        return fenced(connection, election.lease(), work, null);
    }

    private static SqlFunction<Integer> statement(String sql, Object[] params) {
        Objects.requireNonNull(sql, "sql");
        Object[] values = params == null ? new Object[0] : params.clone();
        return c -> {
            try (PreparedStatement ps = c.prepareStatement(sql)) {
                for (int i = 0; i < values.length; i++) {
                    ps.setObject(i + 1, values[i]);
                }
                return ps.executeUpdate();
            }
        };
    }

    /** How many fenced writes of this process the storage refused as stale (23T01). */
    public static long staleRefusals() {
        return STALE_REFUSALS.get();
    }

    /**
     * The client's exception for a driver's: {@link StaleTokenException} for 23T01,
     * {@link MissingTokenException} for 23T02 (also found as the next exception of a batch),
     * else {@code e} itself. For writes of your own, outside {@link #fenced}.
     */
    public static SQLException translate(SQLException e) {
        if (e instanceof FencingTokenException) {
            return e;
        }
        Throwable x = e;
        for (int depth = 0; x != null && depth < 16; depth++) {
            if (x instanceof PSQLException p) {
                if (StaleTokenException.SQLSTATE.equals(p.getSQLState())) {
                    return new StaleTokenException(p);
                }
                if (MissingTokenException.SQLSTATE.equals(p.getSQLState())) {
                    return new MissingTokenException(p);
                }
            }
            Throwable next = x instanceof SQLException s ? s.getNextException() : null;
            x = next != null && next != x ? next : x.getCause() == x ? null : x.getCause();
        }
        return e;
    }

    /**
     * Refuses (SQLSTATE 25001, nothing sent) a connection inside a transaction of the caller's:
     * {@code fenced()} would commit it with the token, or roll it back on a refusal.
     */
    private static void refuseOpenTransaction(Connection connection) throws SQLException {
        if (connection.isWrapperFor(BaseConnection.class)
                && connection.unwrap(BaseConnection.class).getTransactionState() != TransactionState.IDLE) {
            throw new SQLException("fenced() runs its own transaction: commit or roll back the "
                    + "connection's open transaction first", "25001");
        }
    }

    private static <T> T run(Connection connection, Lease lease, long token, SqlFunction<T> work,
            Consumer<? super StaleTokenException> onStale) throws SQLException {
        Objects.requireNonNull(connection, "connection");
        Objects.requireNonNull(work, "work");
        if (token <= 0) {
            throw new IllegalArgumentException("a fencing token is positive: " + token);
        }
        if (lease != null) {
            lease.check();
        }
        refuseOpenTransaction(connection);
        boolean autoCommit = connection.getAutoCommit();
        boolean committed = false;
        Throwable failure = null;
        try {
            if (autoCommit) {
                connection.setAutoCommit(false);
            }
            if (lease == null) {
                try (PreparedStatement ps = connection.prepareStatement(SET_TOKEN)) {
                    ps.setString(1, Long.toString(token));
                    ps.execute();
                }
            } else {
                boolean has17 = connection.getMetaData().getDatabaseMajorVersion() >= 17;
                long left = Math.max(1, Math.min(Integer.MAX_VALUE, lease.remaining().toMillis()));
                try (PreparedStatement ps = connection.prepareStatement(has17 ? SET_TOKEN_BOUND_17 : SET_TOKEN_BOUND)) {
                    ps.setString(1, Long.toString(token));
                    ps.setString(2, Long.toString(left));
                    if (has17) {
                        ps.setString(3, Long.toString(left));
                    }
                    ps.execute();
                }
            }
            T result = work.apply(connection);
            if (lease != null) {
                lease.check();
            }
            connection.commit();
            committed = true;
            return result;
        } catch (SQLException e) {
            SQLException t = translate(e);
            failure = t;
            throw t;
        } catch (RuntimeException | Error e) {
            failure = e;
            throw e;
        } finally {
            if (!committed) {
                try {
                    connection.rollback();
                } catch (SQLException e) {
                    if (failure != null) {
                        failure.addSuppressed(e);
                    }
                }
            }
            if (autoCommit) {
                try {
                    connection.setAutoCommit(true);
                } catch (SQLException e) {
                    if (failure != null) {
                        failure.addSuppressed(e);
                    }
                }
            }
            if (failure instanceof StaleTokenException stale) {
                STALE_REFUSALS.incrementAndGet();
                if (onStale != null) {
                    try {
                        onStale.accept(stale);
                    } catch (RuntimeException e) {
                        stale.addSuppressed(e);
                    }
                }
            }
        }
    }
}
