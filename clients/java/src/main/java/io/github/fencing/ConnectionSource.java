package io.github.fencing;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;

import javax.sql.DataSource;

/**
 * Where leases and sessions open their own connections (one keepalive connection each, never the
 * caller's). A lambda works: {@code () -> dataSource.getConnection()}; or use {@link #url},
 * {@link #of(DataSource)} or {@link #fromEnvironment()}.
 */
@FunctionalInterface
public interface ConnectionSource {

    /** A new connection. */
    Connection connect() throws SQLException;

    /**
     * A new connection named {@code applicationName} (PostgreSQL's {@code application_name}),
     * opened within {@code timeout} where the source can bound that. The default sets the name
     * on the connection {@link #connect()} returns.
     */
    default Connection connect(String applicationName, Duration timeout) throws SQLException {
        Connection c = connect();
        try {
            c.setClientInfo("ApplicationName", applicationName);
        } catch (SQLException e) {
            c.close();
            throw e;
        }
        return c;
    }

    /** Connections of a JDBC URL ({@code jdbc:postgresql://host:port/db}). */
    static ConnectionSource url(String url) {
        return url(url, new Properties());
    }

    /**
     * Connections of a JDBC URL with properties (user, password, ...). Connections opened for a
     * lease get {@code ApplicationName} and, unless given, a {@code connectTimeout} and
     * {@code loginTimeout} (whole seconds) bounded by the time the lease has left.
     */
    static ConnectionSource url(String url, Properties properties) {
        Properties base = new Properties();
        base.putAll(properties);
        return new ConnectionSource() {
            @Override
            public Connection connect() throws SQLException {
                return DriverManager.getConnection(url, base);
            }

            @Override
            public Connection connect(String applicationName, Duration timeout) throws SQLException {
                Properties p = new Properties();
                p.putAll(base);
                p.setProperty("ApplicationName", applicationName);
                if (timeout != null) {
                    String seconds = Long.toString(Math.max(1, Math.min(Integer.MAX_VALUE, (timeout.toMillis() + 999) / 1000)));
                    p.putIfAbsent("connectTimeout", seconds);
                    p.putIfAbsent("loginTimeout", seconds);
                }
                return DriverManager.getConnection(url, p);
            }

            @Override
            public String toString() {
                return url;
            }
        };
    }

    /** Connections of a {@link DataSource}. */
    static ConnectionSource of(DataSource dataSource) {
        return dataSource::getConnection;
    }

    /**
     * Connections described by libpq's environment: {@code PGHOST} (default localhost),
     * {@code PGPORT} (5432), {@code PGDATABASE}, {@code PGUSER} and {@code PGPASSWORD}. A
     * {@code PGHOST} that is a directory (a Unix socket, as libpq takes it) connects to
     * {@code <dir>/.s.PGSQL.<port>} through junixsocket
     * ({@code com.kohlschutter.junixsocket:junixsocket-core}, an optional dependency: add it to your
     * project) as PgJDBC's {@code socketFactory}; without it on the class path, such a
     * {@code PGHOST} is refused ({@link IllegalArgumentException}) saying so.
     */
    static ConnectionSource fromEnvironment() {
        return fromEnvironment(System.getenv());
    }

    /** The socket factory PgJDBC uses for a Unix socket: junixsocket's. */
    String UNIX_SOCKET_FACTORY = "org.newsclub.net.unix.AFUNIXSocketFactory$FactoryArg";

    /** As {@link #fromEnvironment()}, from the given variables. */
    static ConnectionSource fromEnvironment(Map<String, String> env) {
        String host = env.getOrDefault("PGHOST", "localhost");
        if (host.isEmpty()) {
            host = "localhost";
        }
        if (host.contains(",")) {
            host = host.substring(0, host.indexOf(','));
        }
        String port = env.getOrDefault("PGPORT", "5432");
        if (port.isEmpty()) {
            port = "5432";
        }
        String user = env.getOrDefault("PGUSER", System.getProperty("user.name"));
        String database = env.getOrDefault("PGDATABASE", user);
        Properties p = new Properties();
        p.setProperty("user", user);
        if (env.containsKey("PGPASSWORD")) {
            p.setProperty("password", env.get("PGPASSWORD"));
        }
        if (host.startsWith("@")) {
            throw new IllegalArgumentException("PGHOST names an abstract socket (" + host
                    + "), which this client does not support: set PGHOST to a socket directory or a host");
        }
        if (host.startsWith("/")) {
            try {
                Class.forName(UNIX_SOCKET_FACTORY, false, ConnectionSource.class.getClassLoader());
            } catch (ClassNotFoundException e) {
                throw new IllegalArgumentException("PGHOST names a socket directory (" + host
                        + "): add com.kohlschutter.junixsocket:junixsocket-core to the class path"
                        + " (PgJDBC connects to a Unix socket through it), or set PGHOST to a host name");
            }
            p.setProperty("socketFactory", UNIX_SOCKET_FACTORY);
            p.setProperty("socketFactoryArg", host.replaceAll("/+$", "") + "/.s.PGSQL." + port);
            p.setProperty("sslmode", "disable");
            return url("jdbc:postgresql://localhost:" + port + "/" + database, p);
        }
        if (host.contains(":") && !host.startsWith("[")) {
            host = "[" + host + "]";
        }
        return url("jdbc:postgresql://" + host + ":" + port + "/" + database, p);
    }
}
