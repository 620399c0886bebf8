package io.github.fencing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/** Leases, sessions and fenced writes against a real server (skipped without PGPORT). */
class LeaseTest {
    static ConnectionSource source;
    static Connection admin;
    static boolean waitSupported;
    String resource;

    /** Connections that can be made to fail, as a server that cannot be reached. */
    static final class FlakySource implements ConnectionSource {
        final AtomicBoolean down = new AtomicBoolean();
        final AtomicInteger connects = new AtomicInteger();

        @Override
        public Connection connect() throws SQLException {
            connects.incrementAndGet();
            if (down.get()) {
                throw new SQLException("test: server unreachable", "08001");
            }
            return source.connect();
        }
    }

    @BeforeAll
    static void setUp() throws SQLException {
        source = Db.source();
        admin = source.connect();
        Db.exec(admin, "CREATE EXTENSION IF NOT EXISTS fencing");
        Db.exec(admin, "DROP TABLE IF EXISTS java_orders");
        Db.exec(admin, "CREATE TABLE java_orders (id int PRIMARY KEY, status text)");
        Db.exec(admin, "INSERT INTO java_orders VALUES (1, 'new'), (2, 'new')");
        Db.exec(admin, "SELECT fencing.protect('java_orders')");
        waitSupported = ((Number) Db.one(admin,
                "SELECT count(*) FROM pg_proc WHERE proname = 'acquire' AND pronamespace = 'fencing'::regnamespace AND pronargs = 4"))
                .intValue() > 0;
    }

    @AfterAll
    static void tearDown() throws SQLException {
        if (admin != null) {
            admin.close();
        }
    }

    @BeforeEach
    void name(TestInfo info) {
        resource = "java:" + info.getTestMethod().get().getName() + ":" + System.nanoTime();
    }

    static boolean live(String resource) throws SQLException {
        try (PreparedStatement ps = admin.prepareStatement("SELECT live FROM fencing.leases WHERE resource = ?")) {
            ps.setString(1, resource);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() && rs.getBoolean(1);
            }
        }
    }

    static int keepalives(String holder) throws SQLException {
        try (PreparedStatement ps = admin.prepareStatement(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = ?")) {
            ps.setString(1, "fencing keepalive " + holder);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getInt(1);
            }
        }
    }

    static void terminateKeepalive(String holder) throws SQLException {
        try (PreparedStatement ps = admin.prepareStatement(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ?")) {
            ps.setString(1, "fencing keepalive " + holder);
            ps.executeQuery().close();
        }
    }

    static int update(Connection c, int id, String status) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("UPDATE java_orders SET status = ? WHERE id = ?")) {
            ps.setString(1, status);
            ps.setInt(2, id);
            return ps.executeUpdate();
        }
    }

    @Test
    void grantKeepaliveRelease() throws Exception {
        Lease lease = Lease.acquire(source, resource, "java-a", Duration.ofSeconds(1));
        assertTrue(lease.token() > 0);
        assertTrue(live(resource));
        assertEquals(1, keepalives("java-a"));
        Thread.sleep(3000); // three TTLs: renewed at a third of each
        assertFalse(lease.isLost());
        assertTrue(lease.remaining().toMillis() > 300, lease.remaining().toString());
        assertTrue(live(resource));
        lease.check();
        assertTrue(lease.release());
        assertFalse(live(resource));
        assertTrue(lease.lost().isCancelled());
        assertFalse(lease.release());
        assertThrows(LeaseLostException.class, lease::check);
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (keepalives("java-a") != 0 && System.nanoTime() - until < 0) {
            Thread.sleep(50);
        }
        assertEquals(0, keepalives("java-a"), "the keepalive connection is closed");
    }

    @Test
    void tryBusyAndWait() throws Exception {
        try (Lease a = Lease.acquire(source, resource, "java-b1", Duration.ofSeconds(5))) {
            // a try that finds it held: busy, not a timeout (nothing waited)
            assertThrows(LeaseBusyException.class,
                    () -> Lease.acquire(source, resource, "java-b2", Duration.ofSeconds(5)));
            assertThrows(LeaseBusyException.class,
                    () -> Lease.acquire(source, resource, "java-b2", Duration.ofSeconds(5), Duration.ZERO));
            if (waitSupported) {
                long t0 = System.nanoTime();
                assertThrows(LeaseTimeoutException.class,
                        () -> Lease.acquire(source, resource, "java-b2", Duration.ofSeconds(5), Duration.ofMillis(300)));
                assertTrue(System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(250));
                Thread releaser = new Thread(() -> {
                    try {
                        Thread.sleep(500);
                        a.release();
                    } catch (Exception e) {
                        throw new RuntimeException(e);
                    }
                });
                releaser.start();
                try (Lease b = Lease.acquire(source, resource, "java-b2", Duration.ofSeconds(5), Duration.ofSeconds(10))) {
                    assertTrue(b.token() > a.token());
                }
                releaser.join();
            }
        }
        assertFalse(live(resource));
    }

    @Test
    void grantAfterAWaitLongerThanTheTtl() throws Exception {
        assumeTrue(waitSupported, "acquire(..., wait)");
        Lease a = Lease.acquire(source, resource, "java-k1", Duration.ofSeconds(5));
        Thread releaser = new Thread(() -> {
            try {
                Thread.sleep(1500);
                a.release();
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        releaser.start();
        // Granted 1.5 s into the call, with a TTL of 1 s: the deadline counts from a renewal made at once.
        try (Lease b = Lease.acquire(source, resource, "java-k2", Duration.ofSeconds(1), Duration.ofSeconds(10))) {
            assertFalse(b.isLost());
            assertTrue(b.remaining().toMillis() > 500, b.remaining().toString());
            Thread.sleep(1500);
            assertFalse(b.isLost());
            assertTrue(live(resource));
        }
        releaser.join();
    }

    @Test
    void alreadyHeld() throws Exception {
        try (Lease a = Lease.acquire(source, resource, "java-c", Duration.ofSeconds(5))) {
            SQLException e = assertThrows(LeaseException.class,
                    () -> Lease.acquire(source, resource, "java-c", Duration.ofSeconds(5)));
            if (waitSupported) {
                LeaseAlreadyHeldException held = (LeaseAlreadyHeldException) e;
                assertEquals(a.token(), held.token());
            }
        }
    }

    @Test
    void renewalRefused() throws Exception {
        AtomicBoolean heard = new AtomicBoolean();
        Lease lease = Lease.acquire(source, resource, "java-d", Duration.ofMillis(1500)).onLost(() -> heard.set(true));
        try (PreparedStatement ps = admin.prepareStatement("SELECT fencing.release(?, ?, ?)")) {
            ps.setString(1, resource);
            ps.setString(2, "java-d");
            ps.setLong(3, lease.token());
            ps.executeQuery().close();
        }
        lease.lost().get(3, TimeUnit.SECONDS);
        assertTrue(lease.isLost());
        LeaseLostException e = assertThrows(LeaseLostException.class, lease::check);
        assertTrue(e.getMessage().contains("refused"), e.getMessage());
        Thread.sleep(100);
        assertTrue(heard.get(), "the listener ran");
        assertFalse(lease.release());
    }

    @Test
    void keepaliveReconnects() throws Exception {
        try (Lease lease = Lease.acquire(source, resource, "java-e", Duration.ofMillis(1500))) {
            terminateKeepalive("java-e");
            Thread.sleep(2500);
            assertFalse(lease.isLost());
            assertTrue(live(resource));
            assertEquals(1, keepalives("java-e"), "one new keepalive connection");
        }
    }

    @Test
    void deadlineLossAndFencedRefusesToSend() throws Exception {
        FlakySource flaky = new FlakySource();
        Lease lease = Lease.acquire(flaky, resource, "java-f", Duration.ofSeconds(1));
        long granted = System.nanoTime();
        flaky.down.set(true);
        terminateKeepalive("java-f");
        lease.lost().get(3, TimeUnit.SECONDS);
        long seen = System.nanoTime();
        assertTrue(seen - granted <= TimeUnit.MILLISECONDS.toNanos(1600), "lost after " + (seen - granted) / 1e6 + " ms");
        assertTrue(lease.remaining().isNegative() || lease.remaining().isZero());
        assertTrue(flaky.connects.get() > 2, "retried: " + flaky.connects.get());
        AtomicBoolean ran = new AtomicBoolean();
        try (Connection c = source.connect()) {
            assertThrows(LeaseLostException.class, () -> Fencing.fenced(c, lease, x -> {
                ran.set(true);
                return 0;
            }));
            assertTrue(c.getAutoCommit());
        }
        assertFalse(ran.get());
        flaky.down.set(false);
        lease.close();
    }

    @Test
    void lossSignalledWhileARenewalHangs() throws Exception {
        // The renewal waits for the lease table's lock taken here (a renewal kept in memory locks no
        // row): the loss comes from the timer, at the deadline.
        Lease lease = Lease.acquire(source, resource, "java-l", Duration.ofMillis(1200));
        long granted = System.nanoTime();
        try (Connection blocker = source.connect()) {
            blocker.setAutoCommit(false);
            try (PreparedStatement ps = blocker.prepareStatement(
                    "LOCK TABLE fencing.resources IN ACCESS EXCLUSIVE MODE")) {
                ps.execute();
            }
            lease.lost().get(3, TimeUnit.SECONDS);
            long seen = System.nanoTime();
            assertTrue(seen - granted <= TimeUnit.MILLISECONDS.toNanos(1800), "lost after " + (seen - granted) / 1e6 + " ms");
            assertThrows(LeaseLostException.class, lease::check);
            blocker.rollback();
        } finally {
            lease.close();
        }
    }

    @Test
    void lostBeforeCommitIsNotCommitted() throws Exception {
        FlakySource flaky = new FlakySource();
        Lease lease = Lease.acquire(flaky, resource, "java-g", Duration.ofMillis(600));
        flaky.down.set(true);
        terminateKeepalive("java-g");
        try (Connection c = source.connect()) {
            assertThrows(LeaseLostException.class, () -> Fencing.fenced(c, lease, x -> {
                int n = update(x, 2, "written-after-the-deadline");
                Db.exec(x, "SELECT pg_sleep(0.9)");
                return n;
            }));
            assertEquals("new", Db.one(c, "SELECT status FROM java_orders WHERE id = 2"));
        } finally {
            flaky.down.set(false);
            lease.close();
        }
    }

    @Test
    void fencedRefusesAConnectionAlreadyInATransaction() throws Exception {
        try (Connection c = source.connect()) {
            Db.exec(c, "CREATE TEMP TABLE callers_work (v text)");
            Object before = Db.one(admin, "SELECT last_fencing_token FROM java_orders WHERE id = 2");
            c.setAutoCommit(false);
            Db.exec(c, "INSERT INTO callers_work VALUES ('not to be committed by fenced()')");
            SQLException e = assertThrows(SQLException.class,
                    () -> Fencing.fenced(c, 1_000_000L, x -> update(x, 2, "in-open-tx")));
            assertEquals("25001", e.getSQLState());
            c.rollback();
            assertEquals(0L, ((Number) Db.one(c, "SELECT count(*) FROM callers_work")).longValue(),
                    "fenced() did not commit the caller's work");
            assertEquals(before, Db.one(admin, "SELECT last_fencing_token FROM java_orders WHERE id = 2"));
        }
    }

    @Test
    void fencedWritesStaleAndMissing() throws Exception {
        List<StaleTokenException> deadLetters = new ArrayList<>();
        long before = Fencing.staleRefusals();
        try (Connection c = source.connect()) {
            long old;
            try (Lease a = Lease.acquire(source, resource, "java-h", Duration.ofSeconds(5))) {
                old = a.token();
                assertEquals(1, (int) Fencing.fenced(c, a, x -> update(x, 1, "a")));
            }
            try (Lease b = Lease.acquire(source, resource, "java-h", Duration.ofSeconds(5))) {
                assertTrue(b.token() > old);
                assertEquals(1, (int) Fencing.fenced(c, b, x -> update(x, 1, "b")));
                StaleTokenException e = assertThrows(StaleTokenException.class,
                        () -> Fencing.fenced(c, old, x -> update(x, 1, "late"), deadLetters::add));
                assertEquals("java_orders", e.table());
                assertEquals("public", e.schema());
                assertEquals("last_fencing_token", e.column());
                assertEquals("fencing_stale_token", e.constraint());
                assertEquals("(id)=(1)", e.key());
                assertEquals(old, e.presented());
                assertEquals(b.token(), e.stored());
                assertEquals("23T01", e.getSQLState());
                assertEquals(List.of(e), deadLetters);
                assertEquals(before + 1, Fencing.staleRefusals());
                assertTrue(c.getAutoCommit());
                assertEquals("b", Db.one(c, "SELECT status FROM java_orders WHERE id = 1"));
            }
            SQLException raw = assertThrows(SQLException.class, () -> update(c, 1, "unfenced"));
            MissingTokenException m = (MissingTokenException) Fencing.translate(raw);
            assertEquals("fencing_missing_token", m.constraint());
            assertEquals("(id)=(1)", m.key());
            assertEquals("java_orders", m.table());
        }
    }

    @Test
    void releasedOnException() throws Exception {
        long[] token = new long[1];
        assertThrows(IllegalStateException.class, () -> {
            try (Lease l = Lease.acquire(source, resource, "java-i", Duration.ofSeconds(30))) {
                token[0] = l.token();
                assertTrue(live(resource));
                throw new IllegalStateException("inside");
            }
        });
        assertTrue(token[0] > 0);
        assertFalse(live(resource));
    }

    @Test
    void sessionRenewsAllOnOneConnection() throws Exception {
        List<Lease> leases = new ArrayList<>();
        try (Session s = Session.open(source, "java-j")) {
            for (int i = 0; i < 3; i++) {
                leases.add(s.lease(resource + ":" + i, Duration.ofSeconds(1)));
            }
            assertEquals(1, keepalives("java-j"));
            Thread.sleep(3000);
            for (Lease l : leases) {
                assertFalse(l.isLost(), l.toString());
                assertTrue(live(l.resource()));
            }
            if (waitSupported) {
                // A wait in a session runs on a connection of its own: the renewals go on meanwhile.
                try (Lease other = Lease.acquire(source, resource + ":busy", "java-j2", Duration.ofSeconds(5))) {
                    long t0 = System.nanoTime();
                    // during the wait, one connection only is the session's keepalive
                    java.util.concurrent.atomic.AtomicInteger most = new java.util.concurrent.atomic.AtomicInteger();
                    Thread watch = new Thread(() -> {
                        try (Connection w = source.connect()) {
                            while (System.nanoTime() - t0 < TimeUnit.MILLISECONDS.toNanos(1200)) {
                                try (PreparedStatement ps = w.prepareStatement(
                                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'fencing keepalive java-j'");
                                        ResultSet rs = ps.executeQuery()) {
                                    rs.next();
                                    most.accumulateAndGet(rs.getInt(1), Math::max);
                                }
                                Thread.sleep(50);
                            }
                        } catch (Exception e) {
                            most.set(-1);
                        }
                    });
                    watch.start();
                    assertThrows(LeaseTimeoutException.class,
                            () -> s.lease(resource + ":busy", Duration.ofSeconds(1), Duration.ofMillis(1500)));
                    assertTrue(System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(1400));
                    watch.join();
                    assertEquals(1, most.get(), "connections named 'fencing keepalive java-j' during the wait");
                }
                for (Lease l : leases) {
                    assertFalse(l.isLost(), l.toString());
                }
            }
            assertTrue(leases.get(1).release());
            assertEquals(2, s.leases().size());
            assertThrows(CancellationException.class, () -> leases.get(1).lost().join());
        }
        for (Lease l : leases) {
            assertFalse(live(l.resource()));
        }
    }
}
