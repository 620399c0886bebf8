package io.github.fencing;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

/** The test server: libpq's environment (test/dev sets it); tests that need it skip without PGPORT. */
final class Db {
    private Db() {
    }

    static ConnectionSource source() {
        assumeTrue(System.getenv("PGPORT") != null, "no PostgreSQL: run under test/dev with PGHOST=127.0.0.1");
        return ConnectionSource.fromEnvironment();
    }

    static Connection connect() throws SQLException {
        return source().connect();
    }

    /** A connection, after (re)creating {@code table} (id int, status text) with row 1, protected. */
    static Connection protectedTable(ConnectionSource source, String table) throws SQLException {
        Connection c = source.connect();
        exec(c, "CREATE EXTENSION IF NOT EXISTS fencing");
        exec(c, "DROP TABLE IF EXISTS " + table);
        exec(c, "CREATE TABLE " + table + " (id int PRIMARY KEY, status text)");
        exec(c, "INSERT INTO " + table + " VALUES (1, 'new')");
        exec(c, "SELECT fencing.protect('" + table + "')");
        return c;
    }

    static void exec(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.execute(sql);
        }
    }

    static Object one(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery(sql)) {
            return rs.next() ? rs.getObject(1) : null;
        }
    }
}
