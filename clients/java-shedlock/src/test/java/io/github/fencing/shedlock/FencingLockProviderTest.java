package io.github.fencing.shedlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.fencing.ConnectionSource;
import io.github.fencing.StaleTokenException;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import net.javacrumbs.shedlock.support.LockException;
import org.junit.jupiter.api.Test;
import org.postgresql.util.PSQLException;

class FencingLockProviderTest {
    private final ConnectionSource db = Db.source();
    private final FencingLockProvider a = new FencingLockProvider(db);
    private final FencingLockProvider b = new FencingLockProvider(db);
    private final String name = "t-" + UUID.randomUUID();

    private static LockConfiguration config(String name, Duration atMost, Duration atLeast) {
        return new LockConfiguration(ClockProvider.now(), name, atMost, atLeast);
    }

    private LockConfiguration config(Duration atMost) {
        return config(name, atMost, Duration.ZERO);
    }

    @Test
    void grantsTheLeaseWithATokenAndReleasesItAtUnlock() throws SQLException {
        FencingLock lock = (FencingLock) a.lock(config(Duration.ofSeconds(30))).orElseThrow();
        String resource = "shedlock:" + name;
        assertEquals(resource, lock.resource());
        assertEquals(resource, a.resource(name));
        assertEquals(a.holder(), Db.liveHolder(resource));
        assertEquals(lock.token(), Db.liveToken(resource));
        assertTrue(lock.token() > 0);
        assertEquals(lock.token(), FencingLockContext.token());
        lock.unlock();
        assertNull(Db.liveHolder(resource));
        assertEquals("released", Db.one("SELECT state FROM fencing.leases WHERE resource = ?", resource));
        assertTrue(FencingLockContext.current().isEmpty());
        assertThrows(IllegalStateException.class, FencingLockContext::token);
        assertThrows(IllegalStateException.class, lock::unlock, "ShedLock: a lock is unlocked once");
    }

    @Test
    void aSecondLockIsRefusedWhileHeldBySameOrOtherHolder() throws SQLException {
        SimpleLock lock = a.lock(config(Duration.ofSeconds(30))).orElseThrow();
        assertTrue(b.lock(config(Duration.ofSeconds(30))).isEmpty());
        assertTrue(a.lock(config(Duration.ofSeconds(30))).isEmpty(), "the holder itself is refused too");
        assertEquals(a.holder(), Db.liveHolder(a.resource(name)));
        lock.unlock();
        SimpleLock next = b.lock(config(Duration.ofSeconds(30))).orElseThrow();
        assertEquals(b.holder(), Db.liveHolder(b.resource(name)));
        next.unlock();
    }

    @Test
    void lockAtMostForEndsTheLeaseAndTheNextHolderHasAHigherToken() throws Exception {
        FencingLock first = (FencingLock) a.lock(config(Duration.ofMillis(300))).orElseThrow();
        assertTrue(b.lock(config(Duration.ofMillis(300))).isEmpty());
        Thread.sleep(400);
        FencingLock second = (FencingLock) b.lock(config(Duration.ofSeconds(30))).orElseThrow();
        assertTrue(second.token() > first.token(), second.token() + " > " + first.token());
        first.unlock(); // lost: logged, and the new holder's lease is left alone
        assertEquals(b.holder(), Db.liveHolder(a.resource(name)));
        assertEquals(second.token(), FencingLockContext.token());
        second.unlock();
        assertNull(Db.liveHolder(a.resource(name)));
    }

    @Test
    void unlockKeepsTheLeaseUntilLockAtLeastFor() throws Exception {
        LockConfiguration c = config(name, Duration.ofSeconds(30), Duration.ofMillis(1500));
        FencingLock lock = (FencingLock) a.lock(c).orElseThrow();
        lock.unlock();
        String resource = a.resource(name);
        assertEquals(lock.token(), Db.liveToken(resource), "still held after unlock");
        Instant expires = ((java.sql.Timestamp) Db.one("SELECT expires_at FROM fencing.leases WHERE resource = ?",
                resource)).toInstant();
        long off = Math.abs(Duration.between(c.getLockAtLeastUntil(), expires).toMillis());
        assertTrue(off < 500, "the lease ends at lockAtLeastFor, not lockAtMostFor: " + off + " ms off");
        assertTrue(b.lock(config(Duration.ofSeconds(30))).isEmpty());
        Thread.sleep(Math.max(0, Duration.between(Instant.now(), expires).toMillis()) + 200);
        SimpleLock next = b.lock(config(Duration.ofSeconds(30))).orElseThrow();
        next.unlock();
    }

    @Test
    void extendRenewsTheSameLeaseAndALostOneIsNotExtended() throws Exception {
        FencingLock lock = (FencingLock) a.lock(config(Duration.ofMillis(400))).orElseThrow();
        FencingLock longer = (FencingLock) lock.extend(Duration.ofSeconds(30), Duration.ZERO).orElseThrow();
        assertEquals(lock.token(), longer.token());
        Thread.sleep(500);
        assertEquals(lock.token(), Db.liveToken(a.resource(name)), "extended past the first lockAtMostFor");
        assertThrows(IllegalStateException.class, lock::unlock, "the extended lock replaces the first");
        FencingLock shorter = (FencingLock) longer.extend(Duration.ofMillis(200), Duration.ZERO).orElseThrow();
        Thread.sleep(300);
        FencingLock other = (FencingLock) b.lock(config(Duration.ofSeconds(30))).orElseThrow();
        assertTrue(shorter.extend(Duration.ofSeconds(30), Duration.ZERO).isEmpty(), "lost: not extended");
        assertTrue(shorter.isEnded());
        assertEquals(other.token(), Db.liveToken(a.resource(name)));
        other.unlock();
    }

    @Test
    void theTaskSeesItsTokenAndItsWritesAreFenced() throws Exception {
        Db.exec("DROP TABLE IF EXISTS shedlock_unit; CREATE TABLE shedlock_unit (id text PRIMARY KEY, v int);"
                + "SELECT fencing.protect('shedlock_unit')");
        // a lock taken before the task's: its token is older
        FencingLock older = (FencingLock) a.lock(config(name + "-old", Duration.ofSeconds(30), Duration.ZERO))
                .orElseThrow();
        DefaultLockingTaskExecutor executor = new DefaultLockingTaskExecutor(a);
        AtomicReference<Long> seen = new AtomicReference<>();
        executor.executeWithLock((Runnable) () -> {
            try (Connection c = db.connect()) {
                seen.set(FencingLockContext.token());
                FencingLockContext.fenced(c, conn -> {
                    try (PreparedStatement ps = conn.prepareStatement("INSERT INTO shedlock_unit VALUES ('x', 1)")) {
                        return ps.executeUpdate();
                    }
                });
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
        }, config(Duration.ofSeconds(30)));
        assertEquals(older, FencingLockContext.current().orElseThrow(), "the task's lock is gone after it");
        assertTrue(older.token() < seen.get());
        assertEquals(seen.get(), Db.one("SELECT last_fencing_token FROM shedlock_unit WHERE id = 'x'"));
        assertNull(Db.liveHolder(a.resource(name)), "unlocked after the task");

        // the older lock's write after the newer one's is refused, and nothing changes
        try (Connection c = db.connect()) {
            StaleTokenException e = assertThrows(StaleTokenException.class, () -> FencingLockContext.fenced(c,
                    conn -> conn.createStatement().executeUpdate("UPDATE shedlock_unit SET v = 2 WHERE id = 'x'")));
            assertEquals("23T01", e.getSQLState());
            assertEquals(seen.get(), e.stored());
        } finally {
            older.unlock();
        }
        assertTrue(FencingLockContext.current().isEmpty());
        assertEquals(1, Db.one("SELECT v FROM shedlock_unit WHERE id = 'x'"));
    }

    @Test
    void aTaskFrozenInItsTransactionIsEndedWhenItsLockEnds() throws Exception {
        Db.exec("DROP TABLE IF EXISTS shedlock_frozen; CREATE TABLE shedlock_frozen (id text PRIMARY KEY, v int);"
                + "SELECT fencing.protect('shedlock_frozen'); INSERT INTO shedlock_frozen VALUES ('x', 0, 1)");
        CompletableFuture<Object> frozen = CompletableFuture.supplyAsync(() -> {
            SimpleLock lock = a.lock(config(Duration.ofMillis(1000))).orElseThrow();
            try (Connection c = db.connect()) {
                return FencingLockContext.fenced(c, conn -> {
                    String timeout = (String) Db.one(conn, "SHOW idle_in_transaction_session_timeout");
                    assertFalse(timeout.equals("0"), timeout);
                    conn.createStatement().executeUpdate("UPDATE shedlock_frozen SET v = 1");
                    try {
                        Thread.sleep(4000); // frozen while idle in transaction, holding the row lock
                    } catch (InterruptedException e) {
                        throw new IllegalStateException(e);
                    }
                    return conn.createStatement().executeUpdate("UPDATE shedlock_frozen SET v = 2");
                });
            } catch (SQLException e) {
                return e;
            } finally {
                lock.unlock();
            }
        });
        Thread.sleep(1200);
        SimpleLock next = b.lock(config(Duration.ofSeconds(30))).orElseThrow();
        long start = System.nanoTime();
        try (Connection c = db.connect()) {
            assertEquals(1, (int) FencingLockContext.fenced(c,
                    conn -> conn.createStatement().executeUpdate("UPDATE shedlock_frozen SET v = 3")));
        } finally {
            next.unlock();
        }
        long waited = (System.nanoTime() - start) / 1_000_000;
        assertTrue(waited < 1500, "the next holder's write waited " + waited + " ms for the frozen one");
        assertInstanceOf(SQLException.class, frozen.get(10, TimeUnit.SECONDS), "the server ended the frozen one");
        assertEquals(3, Db.one("SELECT v FROM shedlock_frozen"));
    }

    @Test
    void nestedLocksStackOnTheThread() {
        FencingLock outer = (FencingLock) a.lock(config(Duration.ofSeconds(30))).orElseThrow();
        FencingLock inner = (FencingLock) a.lock(config(name + "-in", Duration.ofSeconds(30), Duration.ZERO))
                .orElseThrow();
        assertEquals(inner.token(), FencingLockContext.token());
        inner.unlock();
        assertEquals(outer.token(), FencingLockContext.token());
        outer.unlock();
        assertEquals(Optional.empty(), FencingLockContext.current());
    }

    @Test
    void badInputsAreRefusedAndNothingIsGranted() throws SQLException {
        assertThrows(NullPointerException.class, () -> new FencingLockProvider(null));
        assertThrows(NullPointerException.class, () -> new FencingLockProvider(db, null, "h"));
        assertThrows(NullPointerException.class, () -> new FencingLockProvider(db, "p:", null));
        assertThrows(IllegalArgumentException.class, () -> new FencingLockProvider(db, "p:", ""));
        assertThrows(NullPointerException.class, () -> a.lock(null));
        assertThrows(IllegalArgumentException.class, () -> a.lock(config(Duration.ZERO)));
        // over the server's 366 days: its 22023, as ShedLock's LockException
        LockException e = assertThrows(LockException.class, () -> a.lock(config(Duration.ofDays(367))));
        assertEquals("22023", assertInstanceOf(PSQLException.class, e.getCause()).getSQLState());
        assertEquals(0L, Db.one("SELECT count(*) FROM fencing.leases WHERE resource = ?", a.resource(name)));
        assertTrue(FencingLockContext.current().isEmpty());
        // a server that cannot be reached
        FencingLockProvider down = new FencingLockProvider(ConnectionSource.url("jdbc:postgresql://127.0.0.1:1/x"));
        e = assertThrows(LockException.class, () -> down.lock(config(Duration.ofSeconds(1))));
        assertInstanceOf(SQLException.class, e.getCause());
    }

    @Test
    void theDefaultHolderIsHostPidRandom() {
        String h = a.holder();
        assertTrue(h.matches(".+:" + ProcessHandle.current().pid() + ":[0-9a-f]{8}"), h);
        assertTrue(h.getBytes(java.nio.charset.StandardCharsets.UTF_8).length <= 45);
        assertFalse(h.equals(b.holder()), "each provider its own");
        assertEquals(1L, FencingLockProvider.micros(Duration.ofNanos(1)));
        assertThrows(IllegalArgumentException.class, () -> FencingLockProvider.micros(Duration.ofSeconds(Long.MAX_VALUE)));
    }
}
