package io.github.fencing.shedlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.fencing.shedlock.demo.ReportApp;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Two JVMs of the Spring Boot application {@link ReportApp} ({@code @Scheduled} every second,
 * {@code @SchedulerLock(lockAtMostFor = "PT5S")}, 1.5 s of work then a fenced write) against one
 * server: the runs never overlap and each write carries its lock's token; the instance frozen
 * (SIGSTOP) in its work past lockAtMostFor is replaced by the other, and once thawed its write
 * is refused with 23T01.
 */
class TwoInstancesTest {
    private static final Pattern EVENT = Pattern.compile("EVENT (\\w+) instance=(\\w+) token=(\\d+)(.*)");

    /** An EVENT line of an instance. */
    record Event(String kind, String instance, long token, String more) {
    }

    private final List<Process> processes = new ArrayList<>();
    private final List<Event> events = new CopyOnWriteArrayList<>();
    private final List<String> output = new CopyOnWriteArrayList<>();

    @AfterEach
    void stop() throws InterruptedException {
        for (Process p : processes) {
            signal(p, "CONT");
            p.destroy();
        }
        for (Process p : processes) {
            if (!p.waitFor(20, java.util.concurrent.TimeUnit.SECONDS)) {
                p.destroyForcibly();
            }
        }
    }

    @Test
    void oneInstanceAtATimeAndTheFrozenOneIsFencedOut() throws Exception {
        Db.exec("DROP TABLE IF EXISTS reports, report_runs;"
                + "CREATE TABLE reports (id text PRIMARY KEY, runs int NOT NULL, last_by text);"
                + "SELECT fencing.protect('reports');"
                + "INSERT INTO reports VALUES ('daily', 0, NULL, 1);"
                + "CREATE TABLE report_runs (token bigint, instance text, started timestamptz,"
                + " finished timestamptz, outcome text)");
        Process a = start("A");
        Process b = start("B");

        // both running: several runs written, one at a time
        await("3 runs written", 90, () -> count(e -> e.kind.equals("written")) >= 3);

        // freeze the instance that starts the next run, inside its work
        int seen = events.size();
        Event started = await("a run started", 15, () -> after(seen, e -> e.kind.equals("started")));
        Process frozen = started.instance.equals("A") ? a : b;
        signal(frozen, "STOP");
        long frozenAt = System.nanoTime();
        long frozenToken = started.token;

        // the other one takes over after lockAtMostFor, with a higher token, and writes
        Event takeover = await("the other instance writes", 25, () -> after(seen,
                e -> e.kind.equals("written") && !e.instance.equals(started.instance) && e.token > frozenToken));
        long takeoverMs = (System.nanoTime() - frozenAt) / 1_000_000;
        signal(frozen, "CONT");

        // the thawed instance's write with its old token is refused by the storage
        Event refused = await("the thawed write refused", 15, () -> after(seen,
                e -> e.kind.equals("refused") && e.token == frozenToken));
        assertEquals(started.instance, refused.instance);
        assertTrue(refused.more.contains("sqlstate=23T01"), refused.more);
        Matcher stored = Pattern.compile("stored=(\\d+)").matcher(refused.more);
        assertTrue(stored.find(), refused.more);
        assertTrue(Long.parseLong(stored.group(1)) >= takeover.token);
        await("the thawed unlock logs the lost lease", 10, () -> output.stream()
                .filter(l -> l.contains("fencing: lease on shedlock:report lost") && l.contains("token " + frozenToken))
                .findFirst().orElse(null));
        assertFalse(events.stream().anyMatch(e -> e.kind.equals("written") && e.token == frozenToken),
                "the frozen run never wrote");

        // the lock refused the loser of each slot (ShedLock's DEBUG line)
        assertTrue(output.stream().anyMatch(l -> l.contains("Not executing 'report'")), "no slot was contended");

        for (Process p : processes) {
            p.destroy();
        }
        for (Process p : processes) {
            p.waitFor(20, java.util.concurrent.TimeUnit.SECONDS);
        }
        System.out.printf("TwoInstancesTest: %d runs written (A %d, B %d); %s frozen with token %d, %s wrote with"
                + " token %d %d ms after the freeze; the thawed write refused (%s)%n",
                count(e -> e.kind.equals("written")), count(e -> e.kind.equals("written") && e.instance.equals("A")),
                count(e -> e.kind.equals("written") && e.instance.equals("B")), started.instance, frozenToken,
                takeover.instance, takeover.token, takeoverMs, refused.more.trim());
        try (Connection c = Db.source().connect(); Statement s = c.createStatement()) {
            // the written runs never overlap, and their tokens increase with time
            try (ResultSet rs = s.executeQuery("SELECT count(*) FROM report_runs r1 JOIN report_runs r2"
                    + " ON r1.token < r2.token AND r1.outcome = 'written' AND r2.outcome = 'written'"
                    + " AND tstzrange(r1.started, r1.finished) && tstzrange(r2.started, r2.finished)")) {
                rs.next();
                assertEquals(0, rs.getLong(1), "overlapping runs");
            }
            try (ResultSet rs = s.executeQuery("SELECT count(*) FROM report_runs r1 JOIN report_runs r2"
                    + " ON r1.token < r2.token AND r1.started > r2.started")) {
                rs.next();
                assertEquals(0, rs.getLong(1), "tokens out of order");
            }
            // the row carries the last written run's token, and counts every written run
            try (ResultSet rs = s.executeQuery("SELECT r.runs, r.last_fencing_token,"
                    + " (SELECT count(*) FROM report_runs WHERE outcome = 'written'),"
                    + " (SELECT max(token) FROM report_runs WHERE outcome = 'written'),"
                    + " (SELECT outcome FROM report_runs WHERE token = " + frozenToken + ")"
                    + " FROM reports r WHERE id = 'daily'")) {
                rs.next();
                assertEquals(rs.getLong(3), rs.getLong(1), "runs counted");
                assertEquals(rs.getLong(4), rs.getLong(2), "the row's token is the last run's");
                assertEquals("refused", rs.getString(5));
            }
        }
    }

    private Process start(String instance) throws Exception {
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        ProcessBuilder pb = new ProcessBuilder(new File(System.getProperty("java.home"), "bin/java").getPath(),
                "-cp", cp, ReportApp.class.getName(), "--spring.main.banner-mode=off",
                "--logging.level.net.javacrumbs.shedlock=DEBUG").redirectErrorStream(true);
        pb.environment().put("DEMO_INSTANCE", instance);
        pb.environment().put("DEMO_HOLD_MS", "1500");
        Process p = pb.start();
        processes.add(p);
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null;) {
                    output.add(instance + ": " + line);
                    Matcher m = EVENT.matcher(line);
                    if (m.matches()) {
                        events.add(new Event(m.group(1), m.group(2), Long.parseLong(m.group(3)), m.group(4)));
                    }
                }
            } catch (java.io.IOException e) {
                // the process ended
            }
        }, "instance " + instance);
        reader.setDaemon(true);
        reader.start();
        return p;
    }

    private static void signal(Process p, String signal) {
        if (!p.isAlive()) {
            return;
        }
        try {
            new ProcessBuilder("kill", "-" + signal, Long.toString(p.pid())).inheritIO().start().waitFor();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private long count(Predicate<Event> p) {
        return events.stream().filter(p).count();
    }

    private Event after(int from, Predicate<Event> p) {
        return events.subList(from, events.size()).stream().filter(p).findFirst().orElse(null);
    }

    private <T> T await(String what, int seconds, java.util.function.Supplier<T> check) throws InterruptedException {
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        while (System.nanoTime() < end) {
            T v = check.get();
            if (v != null && !Boolean.FALSE.equals(v)) {
                return v;
            }
            Thread.sleep(50);
        }
        System.err.println(String.join("\n", output));
        fail("timed out after " + seconds + " s waiting for " + what);
        return null;
    }
}
