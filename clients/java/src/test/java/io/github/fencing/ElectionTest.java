package io.github.fencing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/** Elections against a real server: one leader, resign hands over, observe, recampaign, fenced writes. */
class ElectionTest {
    static ConnectionSource source;
    static Connection admin;
    String election;

    @BeforeAll
    static void setUp() throws SQLException {
        source = Db.source();
        admin = Db.protectedTable(source, "java_elections");
    }

    @AfterAll
    static void tearDown() throws SQLException {
        if (admin != null) {
            Db.exec(admin, "DROP TABLE IF EXISTS java_elections");
            admin.close();
        }
    }

    @BeforeEach
    void name(TestInfo info) {
        election = "java38-election:" + info.getTestMethod().get().getName() + ":" + System.nanoTime();
    }

    /** The callbacks of an election, as text. */
    static final class Recorder implements Election.Listener {
        final List<String> events = new ArrayList<>();

        @Override
        public synchronized void onStartedLeading(long token) {
            events.add("started " + token);
        }

        @Override
        public synchronized void onStoppedLeading() {
            events.add("stopped");
        }

        @Override
        public synchronized void onNewLeader(String holder, Long token) {
            events.add("leader " + holder + " " + token);
        }

        synchronized List<String> get() {
            return new ArrayList<>(events);
        }
    }

    static void until(String what, WaitTest.Check check, long millis) throws Exception {
        WaitTest.until(what, check, millis);
    }

    @Test
    void oneLeaderResignHandsOverAndObserversSeeIt() throws Exception {
        Recorder ra = new Recorder(), rb = new Recorder(), ro = new Recorder();
        try (Election a = new Election(source, election, "java38-ea", Duration.ofSeconds(2), false).listener(ra);
                Election b = new Election(source, election, "java38-eb", Duration.ofSeconds(2), false).listener(rb);
                Election o = new Election(source, election, Duration.ofSeconds(2)).listener(ro)) {
            o.observe();
            until("the observer saw no leader", () -> ro.get().equals(List.of("leader null null")), 3000);
            Lease la = a.campaign(Lease.FOREVER);
            assertTrue(a.isLeader());
            assertEquals(la.token(), a.token());
            assertEquals(List.of("started " + la.token()), ra.get());
            assertThrows(LeaseBusyException.class, () -> b.campaign(Duration.ZERO));
            CompletableFuture<Lease> fb = b.campaignAsync(Lease.FOREVER);
            assertThrows(IllegalStateException.class, () -> b.campaign(Duration.ZERO), "one campaign at a time");
            assertThrows(IllegalStateException.class, () -> a.campaign(Lease.FOREVER), "leads already");
            Thread.sleep(300);
            assertFalse(fb.isDone());
            assertFalse(b.isLeader());
            assertEquals("java38-ea", b.leader().orElseThrow().holder());
            assertEquals(la.token(), b.leader().orElseThrow().token());
            until("the observer saw A", () -> ro.get().contains("leader java38-ea " + la.token()), 1000);
            // the leader's token fences its writes; the other candidate's are refused before sending
            assertEquals(1, (int) Fencing.fenced(admin, a, c -> {
                Db.exec(c, "UPDATE java_elections SET status = 'a' WHERE id = 1");
                return 1;
            }));
            assertThrows(LeaseLostException.class, () -> Fencing.fenced(admin, b, c -> 1));
            long resigned = System.nanoTime();
            assertTrue(a.resign());
            Lease lb = fb.get(2, TimeUnit.SECONDS);
            assertTrue(System.nanoTime() - resigned < TimeUnit.SECONDS.toNanos(1), "B leads within 1 s of the resign");
            assertTrue(lb.token() > la.token());
            assertFalse(a.isLeader());
            assertFalse(a.resign(), "resigned already");
            assertEquals(List.of("started " + la.token(), "stopped"), ra.get());
            until("the observer saw B", () -> ro.get().contains("leader java38-eb " + lb.token()), 1000);
            List<String> seen = ro.get();
            assertTrue(seen.indexOf("leader java38-ea " + la.token()) < seen.indexOf("leader java38-eb " + lb.token()), seen.toString());
            assertEquals(1, Fencing.update(admin, lb, "UPDATE java_elections SET status = 'b' WHERE id = 1"));
            assertThrows(StaleTokenException.class, () -> Fencing.update(admin, la.token(),
                    "UPDATE java_elections SET status = 'late' WHERE id = 1"));
        }
        assertTrue(new Election(source, election, Duration.ofSeconds(1)).leader().isEmpty(), "closed: resigned");
    }

    @Test
    void anObserverSeesAnExpiryWithoutANotification() throws Exception {
        Recorder ro = new Recorder();
        // a leader that never renews: its lease expires, and no one is notified of that
        long token = ((Number) Db.one(admin, "SELECT fencing.campaign('" + election + "', 'java38-frozen', interval '1 second')"))
                .longValue();
        try (Election o = new Election(source, election, Duration.ofSeconds(1)).listener(ro)) {
            o.observe();
            until("the observer saw the leader", () -> ro.get().equals(List.of("leader java38-frozen " + token)), 1000);
            long t0 = System.nanoTime();
            until("the observer saw the expiry", () -> ro.get().contains("leader null null"), 2000);
            assertTrue(System.nanoTime() - t0 < TimeUnit.MILLISECONDS.toNanos(1500), "at the leader's expires_at");
            assertTrue(o.leader().isEmpty());
        }
    }

    /** A leader (with or without recampaign) whose leadership the server releases behind it. */
    private void loseLeadership(boolean recampaign, Check after) throws Exception {
        Recorder r = new Recorder();
        try (Election a = new Election(source, election, "java38-el", Duration.ofSeconds(1), recampaign).listener(r)) {
            Lease first = a.campaign(Lease.FOREVER);
            Db.exec(admin, "SELECT fencing.release('" + election + "', 'java38-el', " + first.token() + ")");
            after.check(a, r, first);
        }
    }

    interface Check {
        void check(Election a, Recorder r, Lease first) throws Exception;
    }

    @Test
    void aLostLeaderCampaignsAgainWhenAsked() throws Exception {
        loseLeadership(true, (a, r, first) -> {
            until("leading again", () -> a.isLeader() && a.token() > first.token(), 3000);
            List<String> got = r.get();
            assertEquals(List.of("started " + first.token(), "stopped", "started " + a.token()), got);
        });
    }

    @Test
    void aFailedRecampaignIsRetried() throws Exception {
        Recorder r = new Recorder();
        String campaign = "fencing.campaign(text, text, interval, interval)";
        try (Election a = new Election(source, election, "java38-el", Duration.ofSeconds(1), true).listener(r)) {
            Lease first = a.campaign(Lease.FOREVER);
            // while fencing.campaign is gone, the campaigns after the loss fail: the candidate
            // must go on campaigning until one succeeds
            Db.exec(admin, "ALTER FUNCTION " + campaign + " RENAME TO campaign_gone");
            try {
                Db.exec(admin, "SELECT fencing.release('" + election + "', 'java38-el', " + first.token() + ")");
                until("stopped", () -> r.get().contains("stopped"), 3000);
                Thread.sleep(500);
                assertFalse(a.isLeader());
            } finally {
                Db.exec(admin, "ALTER FUNCTION fencing.campaign_gone(text, text, interval, interval) RENAME TO campaign");
            }
            until("leading again", () -> a.isLeader() && a.token() > first.token(), 5000);
        }
    }

    @Test
    void withoutRecampaignALostLeaderStaysOut() throws Exception {
        loseLeadership(false, (a, r, first) -> {
            until("stopped", () -> r.get().contains("stopped"), 3000);
            Thread.sleep(700);
            assertFalse(a.isLeader());
            assertTrue(a.leader().isEmpty());
            assertThrows(LeaseLostException.class, a::lease);
        });
    }
}
