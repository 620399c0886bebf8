/**
 * The Java client of the fencing PostgreSQL extension.
 *
 * <ul>
 * <li>{@link io.github.fencing.Lease}: a lease from {@code fencing.acquire()} with its fencing
 * token, kept alive on its own connection at a third of its TTL, with a deadline on
 * {@link System#nanoTime()} counted from the start of the last acknowledged call, a loss signal
 * ({@link io.github.fencing.Lease#lost()}), released on {@code close()}.</li>
 * <li>{@link io.github.fencing.Session}: one holder's leases on one keepalive connection,
 * renewed together with {@code fencing.renew_all()}.</li>
 * <li>{@link io.github.fencing.Fencing#fenced}: the caller's statements in one transaction with
 * {@code SET LOCAL fencing.token}, refused as {@link io.github.fencing.StaleTokenException}
 * (23T01) or {@link io.github.fencing.MissingTokenException} (23T02).</li>
 * <li>{@link io.github.fencing.Fencing#withLease}: a lease around a function, released when it
 * returns or throws.</li>
 * <li>{@link io.github.fencing.Election}: leader election on leases ({@code fencing.campaign},
 * {@code fencing.resign}, {@code fencing.leader}, LISTEN {@code fencing_election}).</li>
 * </ul>
 */
package io.github.fencing;
