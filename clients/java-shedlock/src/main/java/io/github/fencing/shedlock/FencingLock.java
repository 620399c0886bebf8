package io.github.fencing.shedlock;

import java.lang.System.Logger.Level;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import net.javacrumbs.shedlock.core.AbstractSimpleLock;
import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;

/**
 * A lock {@link FencingLockProvider} granted: the lease on {@link #resource()} held by
 * {@link #holder()} with {@link #token()}. ShedLock's rules apply: {@code unlock()} once, and an
 * extended lock is replaced by the one {@code extend()} returns (same lease, same token).
 */
public final class FencingLock extends AbstractSimpleLock {
    private static final System.Logger LOG = System.getLogger("io.github.fencing.shedlock");

    private final FencingLockProvider provider;
    private final String resource;
    private final long token;
    /** Shared by a lock and its extensions: set once the lease is released or found lost. */
    private final AtomicBoolean ended;
    /** Shared too: lockAtMostUntil of the latest extension, on this JVM's clock. */
    private final AtomicReference<Instant> until;

    FencingLock(FencingLockProvider provider, LockConfiguration config, String resource, long token) {
        this(provider, config, resource, token, new AtomicBoolean(), new AtomicReference<>());
    }

    private FencingLock(FencingLockProvider provider, LockConfiguration config, String resource, long token,
            AtomicBoolean ended, AtomicReference<Instant> until) {
        super(config);
        this.provider = provider;
        this.resource = resource;
        this.token = token;
        this.ended = ended;
        this.until = until;
        until.set(config.getLockAtMostUntil());
    }

    /** ShedLock's name of the lock. */
    public String name() {
        return lockConfiguration.getName();
    }

    /** The lease's resource ({@code shedlock:<name>} by default). */
    public String resource() {
        return resource;
    }

    /** The holder the lease was granted to. */
    public String holder() {
        return provider.holder();
    }

    /** The lease's fencing token: the task's writes carry it. */
    public long token() {
        return token;
    }

    /**
     * When the lease ends at the latest ({@code lockAtMostFor} from the lock, or from its last
     * extension), on this JVM's clock ({@link ClockProvider}); the server's clock decides.
     */
    public Instant lockAtMostUntil() {
        return until.get();
    }

    /** Whether this lock (or its extension) has been unlocked, or found lost by an extension. */
    public boolean isEnded() {
        return ended.get();
    }

    /**
     * Releases the lease, or, before {@code lockAtLeastFor} has passed, renews it for the time
     * left so that it ends then. A lease already lost (expired past {@code lockAtMostFor}, maybe
     * taken by another) is logged at WARNING and left alone.
     */
    @Override
    protected void doUnlock() {
        try {
            Duration left = Duration.between(ClockProvider.now(), lockConfiguration.getLockAtLeastUntil());
            boolean held = left.isNegative() || left.isZero()
                    ? provider.release(resource, token)
                    : provider.renew(resource, token, left);
            if (!held) {
                LOG.log(Level.WARNING, "fencing: lease on {0} lost (holder {1}, token {2}): "
                        + "expired before unlock (lockAtMostFor {3})", resource, holder(), Long.toString(token),
                        lockConfiguration.getLockAtMostFor());
            }
        } finally {
            end();
        }
    }

    /** {@code fencing.renew()} for the new {@code lockAtMostFor}; empty if the lease was lost. */
    @Override
    protected Optional<SimpleLock> doExtend(LockConfiguration config) {
        FencingLockProvider.positive(config.getLockAtMostFor(), config.getName());
        if (ended.get() || !provider.renew(resource, token, config.getLockAtMostFor())) {
            end();
            return Optional.empty();
        }
        return Optional.of(new FencingLock(provider, config, resource, token, ended, until));
    }

    private void end() {
        ended.set(true);
        FencingLockContext.exit();
    }

    @Override
    public String toString() {
        return "FencingLock(" + name() + ", resource " + resource + ", holder " + holder() + ", token " + token + ")";
    }
}
