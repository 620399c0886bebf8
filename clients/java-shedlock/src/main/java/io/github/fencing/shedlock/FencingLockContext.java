package io.github.fencing.shedlock;

import io.github.fencing.Fencing;
import io.github.fencing.SqlFunction;
import io.github.fencing.StaleTokenException;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Optional;
import java.util.function.Consumer;

import net.javacrumbs.shedlock.core.ClockProvider;

/**
 * The fencing lock of the task running on this thread: {@link FencingLockProvider#lock} sets it
 * on the thread that takes the lock (ShedLock's {@code LockingTaskExecutor} and Spring's
 * {@code @SchedulerLock} run the task on that thread) and {@code unlock()} clears it. Locks
 * nested on one thread stack up: the innermost is current.
 *
 * <pre>{@code
 * @Scheduled(cron = "0 * * * * *")
 * @SchedulerLock(name = "report", lockAtMostFor = "PT5M")
 * void report() throws SQLException {
 *     try (Connection c = dataSource.getConnection()) {
 *         FencingLockContext.fenced(c, conn -> conn.createStatement().executeUpdate("UPDATE ..."));
 *     }
 * }
 * }</pre>
 */
public final class FencingLockContext {
    private static final ThreadLocal<Deque<FencingLock>> HELD = ThreadLocal.withInitial(ArrayDeque::new);

    private FencingLockContext() {
    }

    /** The innermost lock this thread holds, if any. */
    public static Optional<FencingLock> current() {
        Deque<FencingLock> held = HELD.get();
        held.removeIf(FencingLock::isEnded); // a lock ended on another thread (an extension found it lost)
        return Optional.ofNullable(held.peek());
    }

    /**
     * The token of the innermost lock this thread holds.
     *
     * @throws IllegalStateException if this thread holds no fencing lock
     */
    public static long token() {
        return current().orElseThrow(() -> new IllegalStateException(
                "no fencing lock is held by this thread: call token() inside the @SchedulerLock task")).token();
    }

    /**
     * {@link Fencing#fenced(Connection, long, SqlFunction)} with {@link #token()}: {@code work}
     * in one transaction of {@code connection} with {@code SET LOCAL fencing.token}, committed;
     * a stale token is {@link StaleTokenException} (23T01), the transaction rolled back. Before
     * {@code lockAtMostUntil} the transaction also gets {@code SET LOCAL
     * idle_in_transaction_session_timeout} = the lock's time left, so that a task frozen inside
     * it (SIGSTOP, a long pause) is ended by the server when the lock ends instead of holding
     * its row locks against the next holder. Past that moment nothing is bounded and the write
     * goes to the storage, which refuses it if a newer holder has written.
     */
    public static <T> T fenced(Connection connection, SqlFunction<T> work) throws SQLException {
        return fenced(connection, work, null);
    }

    /** As {@link #fenced(Connection, SqlFunction)}, calling {@code onStale} (dead letter, may be null) on 23T01. */
    public static <T> T fenced(Connection connection, SqlFunction<T> work,
            Consumer<? super StaleTokenException> onStale) throws SQLException {
        FencingLock lock = current().orElseThrow(() -> new IllegalStateException(
                "no fencing lock is held by this thread: call fenced() inside the @SchedulerLock task"));
        return Fencing.fenced(connection, lock.token(), c -> {
            long left = Duration.between(ClockProvider.now(), lock.lockAtMostUntil()).toMillis();
            if (left > 0) {
                try (PreparedStatement ps = c.prepareStatement(
                        "SELECT set_config('idle_in_transaction_session_timeout', ?, true)")) {
                    ps.setString(1, Long.toString(Math.min(left, Integer.MAX_VALUE)));
                    ps.execute();
                }
            }
            return work.apply(c);
        }, onStale);
    }

    static void enter(FencingLock lock) {
        HELD.get().push(lock);
    }

    /** Forgets every lock of this thread, ended or not (tests that leave locks unlocked). */
    static void clear() {
        HELD.remove();
    }

    /** Drops the ended locks of this thread (the one just unlocked among them). */
    static void exit() {
        Deque<FencingLock> held = HELD.get();
        held.removeIf(FencingLock::isEnded);
        if (held.isEmpty()) {
            HELD.remove();
        }
    }
}
