package io.github.fencing;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
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
 * {@link MissingTokenException}.
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
            try (PreparedStatement ps = connection.prepareStatement(SET_TOKEN)) {
                ps.setString(1, Long.toString(token));
                ps.execute();
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
