package io.github.fencing;

import java.time.Duration;
import java.util.Objects;

/**
 * How {@link Fencing#withLease} takes its lease: the TTL (30 s unless given), the wait
 * ({@link Lease#FOREVER} unless given: wait until granted) and the holder (a generated
 * {@code <host>:<pid>:<random>} unless given). Immutable: each method returns a new one.
 *
 * <pre>{@code
 * LeaseOptions.of(Duration.ofSeconds(10)).maxWait(Duration.ofSeconds(5)).holder("billing-1")
 * }</pre>
 */
public final class LeaseOptions {
    /** The TTL when none is given. */
    public static final Duration DEFAULT_TTL = Duration.ofSeconds(30);

    private final Duration ttl;
    private final Duration wait;
    private final String holder;

    private LeaseOptions(Duration ttl, Duration wait, String holder) {
        Objects.requireNonNull(ttl, "ttl");
        if (ttl.isNegative() || ttl.isZero()) {
            throw new IllegalArgumentException("ttl must be positive: " + ttl);
        }
        if (wait != null && wait.isNegative()) {
            throw new IllegalArgumentException("wait must not be negative: " + wait);
        }
        if (holder != null && holder.isEmpty()) {
            throw new IllegalArgumentException("holder is empty");
        }
        this.ttl = ttl;
        this.wait = wait;
        this.holder = holder;
    }

    /** A TTL of 30 s, waiting until granted, a generated holder. */
    public static LeaseOptions defaults() {
        return new LeaseOptions(DEFAULT_TTL, Lease.FOREVER, null);
    }

    /** The given TTL (positive), waiting until granted, a generated holder. */
    public static LeaseOptions of(Duration ttl) {
        return new LeaseOptions(ttl, Lease.FOREVER, null);
    }

    /** These options with another TTL (positive). */
    public LeaseOptions ttl(Duration ttl) {
        return new LeaseOptions(ttl, wait, holder);
    }

    /**
     * These options with another wait: null or zero tries once ({@link LeaseBusyException}),
     * {@link Lease#FOREVER} waits until granted, another duration at most that long
     * ({@link LeaseTimeoutException}).
     */
    public LeaseOptions maxWait(Duration wait) {
        return new LeaseOptions(ttl, wait, holder);
    }

    /** These options with a holder name of the caller's (null: a generated one). */
    public LeaseOptions holder(String holder) {
        return new LeaseOptions(ttl, wait, holder);
    }

    /** The TTL. */
    public Duration ttl() {
        return ttl;
    }

    /** The wait (null: a try). */
    public Duration maxWait() {
        return wait;
    }

    /** The holder, or null for a generated one. */
    public String holder() {
        return holder;
    }

    @Override
    public String toString() {
        return "LeaseOptions[ttl " + ttl + ", wait " + (wait == null ? "none" : wait.equals(Lease.FOREVER) ? "forever" : wait)
                + (holder == null ? "" : ", holder " + holder) + "]";
    }
}
