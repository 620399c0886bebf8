package net.javacrumbs.shedlock.support;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.fencing.ConnectionSource;
import io.github.fencing.shedlock.Db;
import io.github.fencing.shedlock.FencingLockContext;
import io.github.fencing.shedlock.FencingLockProvider;

import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;

import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.junit.jupiter.api.Test;

/**
 * ShedLock's KeepAliveLockProvider around the fencing provider: the lease is extended
 * ({@code fencing.renew()}, same token) while the task runs past its first lockAtMostFor. In
 * ShedLock's package for its package-private constructor (a minimum lockAtMostFor below 30 s).
 */
class FencingKeepAliveTest {
    @Test
    void keepAliveExtendsTheLeaseWithTheSameToken() throws Exception {
        ConnectionSource db = Db.source();
        FencingLockProvider fencing = new FencingLockProvider(db);
        FencingLockProvider other = new FencingLockProvider(db);
        ScheduledExecutorService executor = Executors.newSingleThreadScheduledExecutor();
        try {
            KeepAliveLockProvider keepAlive = new KeepAliveLockProvider(fencing, executor, Duration.ofMillis(100));
            String name = "keepalive-" + UUID.randomUUID();
            LockConfiguration config = new LockConfiguration(ClockProvider.now(), name, Duration.ofSeconds(1),
                    Duration.ZERO);
            SimpleLock lock = keepAlive.lock(config).orElseThrow();
            long token = FencingLockContext.token();
            Thread.sleep(2500); // the task, well past the first lockAtMostFor
            assertEquals(token, Db.liveToken(fencing.resource(name)), "extended, same token");
            assertTrue(other.lock(config).isEmpty(), "still held");
            lock.unlock();
            assertNull(Db.liveToken(fencing.resource(name)));
            assertTrue(FencingLockContext.current().isEmpty());
        } finally {
            executor.shutdownNow();
        }
    }
}
