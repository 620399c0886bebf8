/**
 * A ShedLock lock provider on the fencing extension's leases ({@link
 * io.github.fencing.shedlock.FencingLockProvider}), and the token of the running task's lock
 * ({@link io.github.fencing.shedlock.FencingLockContext}) to fence its writes with.
 */
package io.github.fencing.shedlock;
