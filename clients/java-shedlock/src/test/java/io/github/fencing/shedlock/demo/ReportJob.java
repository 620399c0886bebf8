package io.github.fencing.shedlock.demo;

import io.github.fencing.ConnectionSource;
import io.github.fencing.StaleTokenException;
import io.github.fencing.shedlock.FencingLockContext;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;

import net.javacrumbs.shedlock.spring.annotation.SchedulerLock;
import org.springframework.scheduling.annotation.Scheduled;
import org.springframework.stereotype.Component;

/**
 * Every second, on one instance at a time: record the run, work for DEMO_HOLD_MS, then count it
 * in {@code reports} (a protected table) with the lock's token. Prints {@code EVENT} lines for
 * the test: started, written, refused (23T01).
 */
@Component
public class ReportJob {
    private final ConnectionSource db;
    private final String instance = System.getenv().getOrDefault("DEMO_INSTANCE", "demo");
    private final long holdMs = Long.parseLong(System.getenv().getOrDefault("DEMO_HOLD_MS", "1500"));

    public ReportJob(ConnectionSource db) {
        this.db = db;
    }

    @Scheduled(cron = "* * * * * *")
    @SchedulerLock(name = "report", lockAtMostFor = "PT5S", lockAtLeastFor = "PT0.5S")
    public void report() throws SQLException, InterruptedException {
        long token = FencingLockContext.token();
        try (Connection c = db.connect()) {
            update(c, "INSERT INTO report_runs (token, instance, started) VALUES (?, ?, clock_timestamp())", token);
            event("started", token, "");
            Thread.sleep(holdMs); // the work; a SIGSTOP here outlives lockAtMostFor
            try {
                FencingLockContext.fenced(c, conn -> {
                    update(conn, "UPDATE reports SET runs = runs + 1, last_by = ? WHERE id = 'daily'", null);
                    return update(conn, "UPDATE report_runs SET finished = clock_timestamp(), outcome = 'written'"
                            + " WHERE token = ? AND instance = ?", token);
                });
                event("written", token, "");
            } catch (StaleTokenException e) {
                update(c, "UPDATE report_runs SET finished = clock_timestamp(), outcome = 'refused'"
                        + " WHERE token = ? AND instance = ?", token);
                event("refused", token, " sqlstate=" + e.getSQLState() + " stored=" + e.stored());
            }
        }
    }

    /** {@code sql} with (token, instance), or with (instance) alone when token is null. */
    private int update(Connection c, String sql, Long token) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            int i = 1;
            if (token != null) {
                ps.setLong(i++, token);
            }
            ps.setString(i, instance);
            return ps.executeUpdate();
        }
    }

    private void event(String kind, long token, String more) {
        System.out.println("EVENT " + kind + " instance=" + instance + " token=" + token + more);
        System.out.flush();
    }
}
