package io.github.fencing.shedlock;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.github.fencing.ConnectionSource;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

/** The test server: libpq's environment over TCP (test/dev sets it); the tests skip without PGPORT. */
public final class Db {
    private Db() {
    }

    private static boolean created;

    /** The server's connections, with the extension created in its database. */
    public static synchronized ConnectionSource source() {
        assumeTrue(System.getenv("PGPORT") != null, "no PostgreSQL: run under test/dev with PGHOST=127.0.0.1");
        ConnectionSource source = ConnectionSource.fromEnvironment();
        if (!created) {
            try (Connection c = source.connect(); Statement s = c.createStatement()) {
                s.execute("CREATE EXTENSION IF NOT EXISTS fencing");
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
            created = true;
        }
        return source;
    }

    static void exec(String sql) throws SQLException {
        try (Connection c = source().connect(); Statement s = c.createStatement()) {
            s.execute(sql);
        }
    }

    /** The first column of the first row of {@code sql} with string parameters, or null. */
    static Object one(String sql, Object... params) throws SQLException {
        try (Connection c = source().connect(); PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < params.length; i++) {
                ps.setObject(i + 1, params[i]);
            }
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getObject(1) : null;
            }
        }
    }

    /** The first column of the first row of {@code sql} on {@code c}, or null. */
    static Object one(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery(sql)) {
            return rs.next() ? rs.getObject(1) : null;
        }
    }

    /** The live lease's holder of {@code resource} by the server's clock, or null. */
    static String liveHolder(String resource) throws SQLException {
        return (String) one("SELECT holder FROM fencing.leases WHERE resource = ? AND live", resource);
    }

    /** The token of the live lease on {@code resource}, or null. */
    public static Long liveToken(String resource) throws SQLException {
        return (Long) one("SELECT token FROM fencing.leases WHERE resource = ? AND live", resource);
    }
}
