package io.github.fencing;

import java.sql.SQLException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A lease on one resource from the extension's lease manager ({@code fencing.acquire}), with its
 * fencing token. It keeps itself alive on its own connection (never the caller's), renewing at a
 * third of its TTL, and releases on {@link #close()}, so try-with-resources scopes it:
 *
 * <pre>{@code
 * try (Lease lease = Lease.acquire(source, "order:101", Duration.ofSeconds(10), Lease.FOREVER)) {
 *     Fencing.update(conn, lease, "UPDATE orders SET status = 'paid' WHERE id = ?", 101);
 * }
 * }</pre>
 *
 * <p>Its {@link #deadline()} is on the {@link System#nanoTime()} clock: the start of the last
 * acknowledged call (the grant or a renewal) plus the TTL, never the moment an answer came back.
 * When it passes without a renewal acknowledged, or a renewal is refused, the lease is lost:
 * {@link #lost()} completes, {@link #check()} throws {@link LeaseLostException}, and the fenced-write
 * helper refuses to send. A process frozen (SIGSTOP, a long pause) past the deadline sees the loss
 * the moment it runs again. Failed renewals are retried, reconnecting, until the deadline.
 */
public final class Lease implements AutoCloseable {
    /**
     * A wait that lasts until the lease is granted (or the waiting thread is interrupted, or the
     * future cancelled): repeated server-side waits of at most an hour each, never polling.
     */
    public static final Duration FOREVER = Duration.ofSeconds(Long.MAX_VALUE, 999_999_999);

    static final String DEADLINE_PASSED = "its deadline passed without an acknowledged renewal";
    static final String RENEWAL_REFUSED = "the renewal was refused (expired, released or granted to another holder)";

    private static final ScheduledThreadPoolExecutor TIMER = timer();
    private static final ExecutorService NOTIFIER = Executors.newCachedThreadPool(daemon("fencing-lost"));

    private final Session session;
    private final String resource;
    private final long token;
    private final Duration ttl;
    private final boolean election;
    final long ttlNanos;
    private volatile boolean ownsSession;
    private volatile long lastStart;
    private volatile long deadline;
    private volatile String lostReason;
    private volatile boolean closed;
    private final CompletableFuture<Void> lost = new CompletableFuture<>();
    private ScheduledFuture<?> deadlineCheck; // guarded by this

    Lease(Session session, String resource, long token, Duration ttl, long start, boolean election) {
        this.session = session;
        this.election = election;
        this.resource = resource;
        this.token = token;
        this.ttl = ttl;
        this.ttlNanos = ttl.toNanos();
        this.lastStart = start;
        this.deadline = start + ttlNanos;
    }

    /**
     * Acquires the lease if no live lease holds {@code resource}, else {@link LeaseBusyException}
     * (and {@link LeaseAlreadyHeldException} if {@code holder} holds it already).
     */
    public static Lease acquire(ConnectionSource source, String resource, String holder, Duration ttl)
            throws SQLException {
        return acquire(source, resource, holder, ttl, null);
    }

    /**
     * Acquires the lease for a holder name of its own ({@code <host>:<pid>:<random>},
     * {@link #holder()}), waiting up to {@code wait}: see
     * {@link #acquire(ConnectionSource, String, String, Duration, Duration)}.
     */
    public static Lease acquire(ConnectionSource source, String resource, Duration ttl, Duration wait)
            throws SQLException {
        return acquire(source, resource, null, ttl, wait);
    }

    /**
     * Acquires the lease, waiting up to {@code wait} behind the holders before it (first come,
     * first served): null or zero is a try ({@link LeaseBusyException} if another holder has it),
     * {@link #FOREVER} waits until granted, another duration throws {@link LeaseTimeoutException}
     * once it passed. {@link LeaseAlreadyHeldException} if {@code holder} holds it already.
     * {@code holder} null: a name of its own ({@link Fencing#defaultHolder()}). An interrupt of
     * the waiting thread cancels the server's call and throws {@link LeaseCancelledException}.
     */
    public static Lease acquire(ConnectionSource source, String resource, String holder, Duration ttl,
            Duration wait) throws SQLException {
        Session.checkArguments(resource, ttl, wait);
        Session session = Session.open(source, holder, true);
        try {
            Lease lease = session.lease(resource, ttl, wait);
            lease.ownsSession = true;
            return lease;
        } catch (SQLException | RuntimeException | Error e) {
            closeQuietly(session, e);
            throw e;
        }
    }

    /**
     * As {@link #acquire(ConnectionSource, String, String, Duration, Duration)} in the background
     * (the connection is opened before it returns). {@code cancel()} of the future cancels the
     * server's call and returns once it has ended, so that nothing stays queued; it returns false
     * if the lease had been granted already.
     */
    public static CompletableFuture<Lease> acquireAsync(ConnectionSource source, String resource, String holder,
            Duration ttl, Duration wait) throws SQLException {
        Session.checkArguments(resource, ttl, wait);
        Session session = Session.open(source, holder, true);
        Session.Pending p;
        try {
            p = session.leaseAsyncOwned(resource, ttl, wait);
        } catch (RuntimeException | Error e) {
            closeQuietly(session, e);
            throw e;
        }
        p.whenComplete((l, e) -> {
            if (e != null) {
                closeQuietly(session, e);
            }
        });
        return p;
    }

    private static void closeQuietly(Session session, Throwable e) {
        try {
            session.close();
        } catch (SQLException suppressed) {
            e.addSuppressed(suppressed);
        }
    }

    /** The fencing token: present it with every write ({@link Fencing#fenced}). */
    public long token() {
        return token;
    }

    /** The resource of the lease (an election's name for a leadership). */
    public String resource() {
        return resource;
    }

    /** The holder the lease was granted to: the one given, or the generated default. */
    public String holder() {
        return session.holder();
    }

    /** The lease's TTL, the one each renewal asks for. */
    public Duration ttl() {
        return ttl;
    }

    /**
     * The deadline on the {@link System#nanoTime()} scale: the start of the last acknowledged
     * grant or renewal plus the TTL. Compare with {@code System.nanoTime()} by subtraction.
     */
    public long deadline() {
        return deadline;
    }

    /** The time left until {@link #deadline()}; negative once it passed. */
    public Duration remaining() {
        return Duration.ofNanos(deadline - System.nanoTime());
    }

    /**
     * Completes (normally) when the lease is lost. Cancelled when the lease is released first, so
     * that {@code lost().thenRun(listener)} runs the listener on a loss only. Dependent actions
     * run on a daemon thread of this client: keep them short. Do not complete it yourself.
     */
    public CompletableFuture<Void> lost() {
        return lost;
    }

    /**
     * Runs {@code listener} when the lease is lost (not when it is released first), on a daemon
     * thread of this client; returns this lease.
     */
    public Lease onLost(Runnable listener) {
        lost.thenRun(listener);
        return this;
    }

    /** Whether the lease is lost (also true the moment the deadline has passed). */
    public boolean isLost() {
        if (lostReason == null && !closed && System.nanoTime() - deadline >= 0) {
            signalLost(DEADLINE_PASSED);
        }
        return lostReason != null;
    }

    /** The exception of this lease's loss (call when lost). */
    LeaseLostException lostException() {
        return new LeaseLostException(resource, token, lostReason == null ? "it was released" : lostReason);
    }

    /** Throws {@link LeaseLostException} if the lease is lost or released; else returns. */
    public void check() throws LeaseLostException {
        if (isLost()) {
            throw new LeaseLostException(resource, token, lostReason);
        }
        if (closed) {
            throw new LeaseLostException(resource, token, "it was released");
        }
    }

    /**
     * Releases the lease ({@code fencing.release}; {@code fencing.resign} for a leadership) and
     * stops its keepalive. Returns what the server answered: true if it had the lease and released
     * it, false if the lease was already lost (or was released before). It never throws for a lost
     * lease, and still sends the release after a loss seen on the client's clock only; an error of
     * the connection is thrown (a {@link SQLException}).
     */
    public boolean release() throws SQLException {
        boolean wasLost;
        synchronized (this) {
            if (closed) {
                return false;
            }
            closed = true;
            wasLost = lostReason != null;
            if (deadlineCheck != null) {
                deadlineCheck.cancel(false);
            }
        }
        if (!wasLost) {
            lost.cancel(false); // a loss signalled before completes it (on the notifier thread)
        }
        try {
            return session.release(this);
        } finally {
            if (ownsSession) {
                session.close();
            }
        }
    }

    /** Releases the lease (see {@link #release()}); also when leaving try-with-resources by an exception. */
    @Override
    public void close() throws SQLException {
        release();
    }

    @Override
    public String toString() {
        return "Lease[" + resource + ", token " + token + (lostReason != null ? ", lost" : closed ? ", released" : "")
                + "]";
    }

    boolean isClosed() {
        return closed;
    }

    boolean isElection() {
        return election;
    }

    void ownsSession() {
        ownsSession = true;
    }

    long lastStart() {
        return lastStart;
    }

    /** Live at {@code now}: not closed, not lost, deadline not passed (else signals the loss). */
    boolean live(long now) {
        if (closed || lostReason != null) {
            return false;
        }
        if (now - deadline >= 0) {
            signalLost(DEADLINE_PASSED);
            return false;
        }
        return true;
    }

    /** A grant or renewal that started at {@code start} (nanoTime) was acknowledged. */
    void acknowledge(long start) {
        synchronized (this) {
            if (closed || lostReason != null) {
                return;
            }
            if (System.nanoTime() - deadline >= 0) {
                // The answer came after the deadline: the loss may have been seen; it stays lost.
                signalLost(DEADLINE_PASSED);
                return;
            }
            if (start + ttlNanos - deadline > 0) {
                lastStart = start;
                deadline = start + ttlNanos;
                armDeadline();
            }
        }
    }

    /** The first renewal after a long wait for the grant acknowledged: the deadline counts from it. */
    synchronized void rebase(long start) {
        if (start - lastStart > 0) {
            lastStart = start;
            deadline = start + ttlNanos;
        }
    }

    /** Schedules the check that signals the loss at the deadline, even while the keepalive is blocked. */
    synchronized void armDeadline() {
        if (closed || lostReason != null) {
            return;
        }
        if (deadlineCheck != null) {
            deadlineCheck.cancel(false);
        }
        long delay = Math.max(0, deadline - System.nanoTime());
        deadlineCheck = TIMER.schedule(this::checkDeadline, delay, TimeUnit.NANOSECONDS);
    }

    private void checkDeadline() {
        if (closed || lostReason != null) {
            return;
        }
        if (System.nanoTime() - deadline >= 0) {
            signalLost(DEADLINE_PASSED);
        } else {
            armDeadline();
        }
    }

    void signalLost(String reason) {
        synchronized (this) {
            if (closed || lostReason != null) {
                return;
            }
            lostReason = reason;
            if (deadlineCheck != null) {
                deadlineCheck.cancel(false);
            }
        }
        Session.LOG.log(System.Logger.Level.WARNING, lossLine(resource, holder(), token, reason));
        NOTIFIER.execute(() -> lost.complete(null));
    }

    /** The loss log line, the same words in every client. */
    static String lossLine(String resource, String holder, long token, String reason) {
        return "fencing: lease on " + resource + " lost (holder " + holder + ", token " + token + "): " + reason;
    }

    private static ScheduledThreadPoolExecutor timer() {
        ScheduledThreadPoolExecutor t = new ScheduledThreadPoolExecutor(1, daemon("fencing-deadline"));
        t.setRemoveOnCancelPolicy(true);
        return t;
    }

    static ThreadFactory daemon(String name) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, name + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }
}
