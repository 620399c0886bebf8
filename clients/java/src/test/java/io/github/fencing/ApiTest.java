package io.github.fencing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;

/** The client's behaviour that needs no server: identities, options, arguments, versions. */
class ApiTest {
    static final Pattern HOLDER = Pattern.compile("(?<host>[^:]*):(?<pid>[0-9]+):(?<random>[0-9a-f]{8})");
    /** A source that must not be used: bad arguments are refused before anything connects. */
    static final ConnectionSource NEVER = () -> {
        throw new AssertionError("connected");
    };

    @Test
    void defaultHolderIsHostPidRandom() {
        String a = Fencing.defaultHolder(), b = Fencing.defaultHolder();
        Matcher m = HOLDER.matcher(a);
        assertTrue(m.matches(), a);
        assertEquals(Long.toString(ProcessHandle.current().pid()), m.group("pid"));
        assertFalse(m.group("host").isEmpty(), a);
        assertTrue(a.getBytes(StandardCharsets.UTF_8).length <= 45, a);
        assertNotEquals(a, b, "each holder gets its own random part");
    }

    @Test
    void defaultHolderCutsALongHostToFortyFiveBytes() {
        String host = "é".repeat(40); // two bytes each: cut at a whole character
        String h = Server.holderOf(host, "1234567", "0123abcd");
        assertTrue(h.getBytes(StandardCharsets.UTF_8).length <= 45, h);
        assertTrue(h.endsWith(":1234567:0123abcd"), h);
        assertEquals("é".repeat(14), h.substring(0, h.indexOf(':'))); // 28 bytes left for the host
        assertEquals("db1:42:0123abcd", Server.holderOf("db1", "42", "0123abcd"));
    }

    @Test
    void versions() {
        assertTrue(Server.atLeast("0.4.0", "0.4.0"));
        assertTrue(Server.atLeast("0.10.0", "0.4.0"));
        assertTrue(Server.atLeast("1.0", "0.4.0"));
        assertFalse(Server.atLeast("0.3.0", "0.4.0"));
        assertFalse(Server.atLeast("0.3.9", "0.4.0"));
        assertFalse(Server.atLeast("", "0.4.0"));
        UnsupportedServerException e = new UnsupportedServerException("0.3.0");
        assertTrue(e.getMessage().contains("ALTER EXTENSION fencing UPDATE"), e.getMessage());
        assertEquals("0.3.0", e.version());
        assertNull(new UnsupportedServerException(null).version());
    }

    @Test
    void lossLine() {
        assertEquals("fencing: lease on order:101 lost (holder h:1:0123abcd, token 7): it expired",
                Lease.lossLine("order:101", "h:1:0123abcd", 7, "it expired"));
    }

    @Test
    void forever() {
        assertTrue(Session.forever(Lease.FOREVER));
        assertTrue(Session.forever(Duration.ofDays(365 * 200)));
        assertFalse(Session.forever(Duration.ofHours(2)));
        assertFalse(Session.forever(Duration.ZERO));
    }

    @Test
    void badArgumentsAreRefusedBeforeConnecting() {
        Duration ttl = Duration.ofSeconds(5);
        Duration none = null;
        assertThrows(NullPointerException.class, () -> Lease.acquire(NEVER, null, ttl, none));
        assertThrows(NullPointerException.class, () -> Lease.acquire(NEVER, "r", none, none));
        assertThrows(IllegalArgumentException.class, () -> Lease.acquire(NEVER, "r", Duration.ZERO, none));
        assertThrows(IllegalArgumentException.class, () -> Lease.acquire(NEVER, "r", Duration.ofSeconds(-1), none));
        assertThrows(IllegalArgumentException.class, () -> Lease.acquire(NEVER, "r", ttl, Duration.ofMillis(-1)));
        assertThrows(IllegalArgumentException.class,
                () -> Lease.acquireAsync(NEVER, "r", null, ttl, Duration.ofMillis(-1)));
        assertThrows(NullPointerException.class, () -> Fencing.withLease(NEVER, "r", null, l -> null));
        assertThrows(NullPointerException.class, () -> Fencing.withLease(NEVER, "r", LeaseOptions.defaults(), null));
    }

    @Test
    void leaseOptions() {
        LeaseOptions d = LeaseOptions.defaults();
        assertEquals(LeaseOptions.DEFAULT_TTL, d.ttl());
        assertEquals(Lease.FOREVER, d.maxWait());
        assertNull(d.holder());
        LeaseOptions o = LeaseOptions.of(Duration.ofSeconds(10)).maxWait(Duration.ofSeconds(2)).holder("billing-1");
        assertEquals(Duration.ofSeconds(10), o.ttl());
        assertEquals(Duration.ofSeconds(2), o.maxWait());
        assertEquals("billing-1", o.holder());
        assertEquals(LeaseOptions.DEFAULT_TTL, d.ttl(), "immutable");
        assertNull(o.maxWait(null).maxWait(), "null: a try");
        assertThrows(NullPointerException.class, () -> LeaseOptions.of(null));
        assertThrows(IllegalArgumentException.class, () -> LeaseOptions.of(Duration.ZERO));
        assertThrows(IllegalArgumentException.class, () -> LeaseOptions.of(Duration.ofSeconds(-3)));
        assertThrows(IllegalArgumentException.class, () -> d.maxWait(Duration.ofSeconds(-1)));
        assertThrows(IllegalArgumentException.class, () -> d.holder(""));
    }

    @Test
    void electionArguments() {
        Duration ttl = Duration.ofSeconds(5);
        assertThrows(NullPointerException.class, () -> new Election(null, "e", ttl));
        assertThrows(NullPointerException.class, () -> new Election(NEVER, null, ttl));
        assertThrows(IllegalArgumentException.class, () -> new Election(NEVER, "", ttl));
        assertThrows(NullPointerException.class, () -> new Election(NEVER, "e", null));
        assertThrows(IllegalArgumentException.class, () -> new Election(NEVER, "e", Duration.ZERO));
        assertThrows(IllegalArgumentException.class, () -> new Election(NEVER, "e", "", ttl, false));
        Election e = new Election(NEVER, "e", ttl);
        assertTrue(HOLDER.matcher(e.candidate()).matches(), e.candidate());
        assertEquals("given", new Election(NEVER, "e", "given", ttl, false).candidate());
        assertThrows(IllegalArgumentException.class, () -> e.campaign(Duration.ofSeconds(-1)));
        assertFalse(e.isLeader());
        assertNull(e.token());
        assertThrows(LeaseLostException.class, e::lease);
    }

    @Test
    void busyIsNotATimeout() {
        SQLException busy = new LeaseBusyException("r");
        assertFalse(busy instanceof LeaseTimeoutException);
        assertTrue(busy instanceof LeaseException);
        assertTrue(FencingTokenException.class.isAssignableFrom(StaleTokenException.class));
        assertTrue(FencingTokenException.class.isAssignableFrom(MissingTokenException.class));
    }

    @Test
    void environmentWithASocketDirectory() {
        ConnectionSource s = ConnectionSource.fromEnvironment(Map.of("PGHOST", "/run/postgresql", "PGPORT", "5433",
                "PGUSER", "u", "PGDATABASE", "d"));
        assertEquals("jdbc:postgresql://localhost:5433/d", s.toString());
        assertThrows(IllegalArgumentException.class,
                () -> ConnectionSource.fromEnvironment(Map.of("PGHOST", "@abstract", "PGUSER", "u")));
        assertEquals("jdbc:postgresql://[::1]:5432/u",
                ConnectionSource.fromEnvironment(Map.of("PGHOST", "::1", "PGUSER", "u")).toString());
    }
}
