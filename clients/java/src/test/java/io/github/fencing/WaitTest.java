package io.github.fencing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/** Issue 38 against a real server: identity, busy, waits that last and their cancellation, withLease, bounds. */
class WaitTest {
    static ConnectionSource source;
    static Connection admin;
    String resource;

    @BeforeAll
    static void setUp() throws SQLException {
        source = Db.source();
        admin = Db.protectedTable(source, "java_waits");
    }

    @AfterAll
    static void tearDown() throws SQLException {
        if (admin != null) {
            Db.exec(admin, "DROP TABLE IF EXISTS java_waits");
            admin.close();
        }
    }

    @BeforeEach
    void name(TestInfo info) {
        resource = "java38:" + info.getTestMethod().get().getName() + ":" + System.nanoTime();
    }

    /** The backends waiting in fencing.acquire() for a holder's call (by application_name). */
    static int waiting(String holder) throws SQLException {
        try (PreparedStatement ps = admin.prepareStatement("SELECT count(*) FROM pg_stat_activity"
                + " WHERE application_name LIKE '%' || ? AND state = 'active' AND query LIKE '%fencing.acquire%'")) {
            ps.setString(1, holder);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getInt(1);
            }
        }
    }

    static void until(String what, Check check, long millis) throws Exception {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        while (!check.ok()) {
            assertTrue(System.nanoTime() - end < 0, what + " within " + millis + " ms");
            Thread.sleep(20);
        }
    }

    interface Check {
        boolean ok() throws Exception;
    }

    static String[] row(String resource) throws SQLException {
        try (PreparedStatement ps = admin.prepareStatement("SELECT holder, token, live FROM fencing.leases WHERE resource = ?")) {
            ps.setString(1, resource);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? new String[] {rs.getString(1), rs.getString(2), Boolean.toString(rs.getBoolean(3))} : null;
            }
        }
    }

    @Test
    void defaultIdentity() throws Exception {
        try (Lease a = Lease.acquire(source, resource, Duration.ofSeconds(5), (Duration) null)) {
            assertTrue(ApiTest.HOLDER.matcher(a.holder()).matches(), a.holder());
            assertEquals(a.holder(), row(resource)[0]);
            // another lease of this process: another identity, so the lease is busy, not its own
            assertThrows(LeaseBusyException.class, () -> Lease.acquire(source, resource, Duration.ofSeconds(5), (Duration) null));
        }
        try (Session s = Session.open(source)) {
            assertTrue(ApiTest.HOLDER.matcher(s.holder()).matches(), s.holder());
            assertEquals(s.holder(), s.lease(resource, Duration.ofSeconds(5)).holder());
        }
    }

    @Test
    void waitForeverIsGrantedAtTheRelease() throws Exception {
        Lease a = Lease.acquire(source, resource, "java38-a", Duration.ofSeconds(1));
        CompletableFuture<Lease> b = CompletableFuture.supplyAsync(() -> {
            try {
                return Lease.acquire(source, resource, "java38-b", Duration.ofSeconds(5), Lease.FOREVER);
            } catch (SQLException e) {
                throw new RuntimeException(e);
            }
        });
        until("B waits in fencing.acquire", () -> waiting("java38-b") == 1, 5000);
        Thread.sleep(2000); // two TTLs of A: B's one call still waits
        assertFalse(b.isDone());
        assertEquals(1, waiting("java38-b"));
        assertTrue(a.release());
        try (Lease l = b.get(5, TimeUnit.SECONDS)) {
            assertTrue(l.token() > a.token());
            assertEquals("java38-b", l.holder());
        }
    }

    @Test
    void interruptCancelsTheWaitAndNothingStaysQueued() throws Exception {
        Lease a = Lease.acquire(source, resource, "java38-i1", Duration.ofSeconds(5));
        AtomicReference<Throwable> outcome = new AtomicReference<>();
        AtomicReference<Boolean> flag = new AtomicReference<>();
        Thread waiter = new Thread(() -> {
            try {
                Lease.acquire(source, resource, "java38-i2", Duration.ofSeconds(5), Lease.FOREVER).release();
            } catch (Throwable e) {
                outcome.set(e);
            }
            flag.set(Thread.currentThread().isInterrupted());
        });
        waiter.start();
        until("the waiter waits", () -> waiting("java38-i2") == 1, 5000);
        CompletableFuture<Lease> c = Lease.acquireAsync(source, resource, "java38-i3", Duration.ofSeconds(5),
                Duration.ofSeconds(20));
        until("C waits behind it", () -> waiting("java38-i3") == 1, 5000);
        waiter.interrupt();
        waiter.join(5000);
        assertFalse(waiter.isAlive());
        assertInstanceOf(LeaseCancelledException.class, outcome.get());
        assertTrue(flag.get(), "the interrupt status is set again");
        assertEquals(0, waiting("java38-i2"), "the cancelled call ended on the server");
        assertTrue(a.release());
        try (Lease l = c.get(5, TimeUnit.SECONDS)) {
            assertEquals("java38-i3", l.holder(), "the next in line after the cancelled one");
        }
    }

    @Test
    void futureCancelEndsTheServerCall() throws Exception {
        try (Lease a = Lease.acquire(source, resource, "java38-f1", Duration.ofSeconds(5))) {
            CompletableFuture<Lease> f = Lease.acquireAsync(source, resource, "java38-f2", Duration.ofSeconds(5),
                    Lease.FOREVER);
            until("the future's call waits", () -> waiting("java38-f2") == 1, 5000);
            assertTrue(f.cancel(true));
            assertEquals(0, waiting("java38-f2"), "ended when cancel() returned");
            assertTrue(f.isCancelled());
            assertThrows(CancellationException.class, f::join);
            assertTrue(f.cancel(true), "cancelled already");
            assertEquals("java38-f1", row(resource)[0]);
        }
        CompletableFuture<Lease> g = Lease.acquireAsync(source, resource, "java38-f3", Duration.ofSeconds(5),
                Duration.ofSeconds(5));
        Lease l = g.get(5, TimeUnit.SECONDS);
        assertFalse(g.cancel(true), "granted already");
        assertTrue(l.release());
    }

    @Test
    void waitThatPassesIsATimeout() throws Exception {
        try (Lease a = Lease.acquire(source, resource, "java38-t1", Duration.ofSeconds(5))) {
            long t0 = System.nanoTime();
            assertThrows(LeaseTimeoutException.class,
                    () -> Lease.acquire(source, resource, "java38-t2", Duration.ofSeconds(5), Duration.ofMillis(400)));
            assertTrue(System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(350));
        }
    }

    @Test
    void withLeaseReleasesAtReturnAndOnAnException() throws Exception {
        long token = Fencing.withLease(source, resource, LeaseOptions.of(Duration.ofSeconds(5)), lease -> {
            assertEquals("true", row(resource)[2]);
            return Fencing.update(admin, lease, "UPDATE java_waits SET status = 'paid' WHERE id = ?", 1) == 1
                    ? lease.token() : -1;
        });
        assertTrue(token > 0);
        assertEquals("false", row(resource)[2], "released at return");
        assertEquals(token, ((Number) Db.one(admin, "SELECT last_fencing_token FROM java_waits WHERE id = 1")).longValue());
        SQLException e = assertThrows(SQLException.class, () -> Fencing.withLease(source, resource, lease -> {
            throw new SQLException("the body's", "XX123");
        }));
        assertEquals("XX123", e.getSQLState());
        assertEquals("false", row(resource)[2], "released on an exception");
        // an older token is refused
        assertThrows(StaleTokenException.class,
                () -> Fencing.update(admin, token - 1, "UPDATE java_waits SET status = 'late' WHERE id = ?", 1));
    }

    @Test
    void withLeaseLostWhileTheBodyRuns() throws Exception {
        LeaseLostException e = assertThrows(LeaseLostException.class, () -> Fencing.withLease(source, resource,
                LeaseOptions.of(Duration.ofSeconds(1)).holder("java38-w"), lease -> {
                    Db.exec(admin, "SELECT fencing.release('" + resource + "', 'java38-w', " + lease.token() + ")");
                    try {
                        lease.lost().get(5, TimeUnit.SECONDS); // the body sees the loss signal
                    } catch (Exception x) {
                        throw new AssertionError("no loss signal", x);
                    }
                    return "returned normally";
                }));
        assertTrue(e.getMessage().contains("refused"), e.getMessage());
    }

    @Test
    void fencedBoundsItsTransactionByTheLease() throws Exception {
        try (Lease l = Lease.acquire(source, resource, "java38-b", Duration.ofSeconds(10))) {
            String[] seen = Fencing.fenced(admin, l, c -> new String[] {
                    String.valueOf(Db.one(c, "SELECT current_setting('idle_in_transaction_session_timeout')")),
                    c.getMetaData().getDatabaseMajorVersion() >= 17
                            ? String.valueOf(Db.one(c, "SELECT current_setting('transaction_timeout')")) : null});
            long ms = Long.parseLong(seen[0].replace("ms", ""));
            assertTrue(ms > 8000 && ms <= 10000, seen[0]);
            if (seen[1] != null) {
                assertEquals(seen[0], seen[1]);
            }
        }
        // a plain token has no deadline: nothing is set
        assertEquals("0", Fencing.fenced(admin, 5L, c -> Db.one(c, "SELECT current_setting('idle_in_transaction_session_timeout')")));
        assertEquals("0", Db.one(admin, "SELECT current_setting('idle_in_transaction_session_timeout')"), "SET LOCAL only");
    }

    @Test
    void aFrozenTransactionIsEndedAtTheDeadline() throws Exception {
        Lease a = Lease.acquire(source, resource, "java38-z", Duration.ofSeconds(1));
        try (Connection c = source.connect()) {
            long t0 = System.nanoTime();
            SQLException e = assertThrows(SQLException.class, () -> Fencing.fenced(c, a, x -> {
                Db.exec(x, "UPDATE java_waits SET status = 'frozen' WHERE id = 1");
                try {
                    Thread.sleep(3000); // frozen between the UPDATE and the COMMIT
                } catch (InterruptedException ie) {
                    throw new AssertionError(ie);
                }
                return null;
            }));
            assertFalse(e instanceof FencingTokenException, e.toString());
            assertTrue(c.isClosed() || !c.isValid(2), "the server ended the frozen session");
            assertTrue(System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(2900));
        }
        assertTrue(!"frozen".equals(Db.one(admin, "SELECT status FROM java_waits WHERE id = 1")));
        a.release();
    }

    @Test
    void releaseOfALostLeaseAnswersFalseAndLogsTheLoss() throws Exception {
        List<LogRecord> records = new CopyOnWriteArrayList<>();
        Handler h = new Handler() {
            @Override
            public void publish(LogRecord r) {
                records.add(r);
            }

            @Override
            public void flush() {
            }

            @Override
            public void close() {
            }
        };
        Logger log = Logger.getLogger("io.github.fencing");
        Level saved = log.getLevel();
        log.setLevel(Level.WARNING); // src/test/resources/logging.properties: SEVERE
        log.setUseParentHandlers(false);
        log.addHandler(h);
        try {
            Lease l = Lease.acquire(source, resource, "java38-r", Duration.ofSeconds(1));
            Db.exec(admin, "SELECT fencing.release('" + resource + "', 'java38-r', " + l.token() + ")");
            l.lost().get(3, TimeUnit.SECONDS);
            assertFalse(l.release(), "lost: false, and no exception");
            assertFalse(l.release());
            String expected = "fencing: lease on " + resource + " lost (holder java38-r, token " + l.token() + "): ";
            assertTrue(records.stream().anyMatch(r -> r.getLevel() == Level.WARNING && r.getMessage().startsWith(expected)),
                    records.toString());
        } finally {
            log.removeHandler(h);
            log.setUseParentHandlers(true);
            log.setLevel(saved);
        }
    }

    @Test
    void aLossOnTheClientsClockStillSendsTheRelease() throws Exception {
        LeaseTest.FlakySource flaky = new LeaseTest.FlakySource();
        LeaseTest.source = source;
        Lease l = Lease.acquire(flaky, resource, "java38-c", Duration.ofSeconds(1));
        flaky.down.set(true); // renewals cannot reconnect: the deadline passes on the client's clock
        Db.exec(admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                + " WHERE application_name = 'fencing keepalive java38-c'");
        l.lost().get(3, TimeUnit.SECONDS);
        flaky.down.set(false);
        int before = flaky.connects.get();
        l.release(); // true or false (the server's lease may have expired already): sent, never thrown
        assertTrue(flaky.connects.get() > before, "the release was sent on a new connection");
        assertEquals("false", row(resource)[2]);
    }

    @Test
    void sessionRenewsEveryLeaseAtAThirdOfTheShortestTtl() throws Exception {
        try (Session s = Session.open(source, "java38-s")) {
            Lease shortLease = s.lease(resource + ":short", Duration.ofSeconds(1));
            Lease longLease = s.lease(resource + ":long", Duration.ofSeconds(30));
            long before = longLease.lastStart();
            Thread.sleep(1500);
            assertTrue(longLease.lastStart() - before > 0, "the 30 s lease was renewed with the 1 s one");
            assertFalse(shortLease.isLost());
            assertTrue(longLease.remaining().toMillis() > 28_000, longLease.remaining().toString());
        }
    }

    @Test
    void unsupportedServer() throws Exception {
        String db = "java38_noext_" + ProcessHandle.current().pid();
        Db.exec(admin, "DROP DATABASE IF EXISTS " + db);
        Db.exec(admin, "CREATE DATABASE " + db);
        try {
            Map<String, String> env = new java.util.HashMap<>(System.getenv());
            env.put("PGDATABASE", db);
            ConnectionSource other = ConnectionSource.fromEnvironment(env);
            UnsupportedServerException e = assertThrows(UnsupportedServerException.class,
                    () -> Lease.acquire(other, resource, Duration.ofSeconds(5), (Duration) null));
            assertNull(e.version());
            assertTrue(e.getMessage().contains("CREATE EXTENSION fencing"), e.getMessage());
            boolean old;
            try (Connection c = other.connect()) {
                try {
                    Db.exec(c, "CREATE EXTENSION fencing VERSION '0.3.0'");
                    old = true;
                } catch (SQLException x) {
                    old = false;
                }
            }
            if (old) {
                e = assertThrows(UnsupportedServerException.class, () -> Session.open(other));
                assertEquals("0.3.0", e.version());
                assertTrue(e.getMessage().contains("ALTER EXTENSION fencing UPDATE"), e.getMessage());
            }
        } finally {
            Db.exec(admin, "DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
        }
    }

    @Test
    void unixSocketThroughJunixsocket() throws Exception {
        String dirs = String.valueOf(Db.one(admin, "SHOW unix_socket_directories"));
        assumeTrue(!dirs.isBlank(), "the server has no Unix socket");
        Map<String, String> env = new java.util.HashMap<>(System.getenv());
        env.put("PGHOST", dirs.split(",")[0].trim());
        try (Connection c = ConnectionSource.fromEnvironment(env).connect()) {
            assertEquals("", Db.one(c, "SELECT coalesce(inet_client_addr()::text, '')"), "a Unix socket, not TCP");
        }
    }
}
