package io.github.fencing;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CopyOnWriteArrayList;

import org.junit.jupiter.api.Test;

/**
 * A keepalive connection dropped without a word (a partition: no RST, no FIN) is given up after a
 * third of the TTL and replaced, so the lease survives when new connections get through.
 */
class DroppedConnectionTest {

    /** A TCP proxy to the server whose existing connections can be turned into black holes. */
    static final class Proxy implements AutoCloseable {
        final ServerSocket listener;
        final List<boolean[]> pipes = new CopyOnWriteArrayList<>();
        final String host;
        final int port;

        Proxy(String host, int port) throws IOException {
            this.host = host;
            this.port = port;
            listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            Thread t = new Thread(this::accept, "test proxy");
            t.setDaemon(true);
            t.start();
        }

        int port() {
            return listener.getLocalPort();
        }

        /** Every connection open now drops what it carries, both ways, from now on. */
        void blackHoleExisting() {
            for (boolean[] frozen : pipes) {
                frozen[0] = true;
            }
        }

        private void accept() {
            while (!listener.isClosed()) {
                try {
                    Socket client = listener.accept();
                    Socket server = new Socket(host, port);
                    boolean[] frozen = new boolean[1];
                    pipes.add(frozen);
                    pump(client, server, frozen);
                    pump(server, client, frozen);
                } catch (IOException e) {
                    return;
                }
            }
        }

        private static void pump(Socket from, Socket to, boolean[] frozen) {
            Thread t = new Thread(() -> {
                byte[] buffer = new byte[8192];
                try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
                    int n;
                    while ((n = in.read(buffer)) > 0) {
                        if (!frozen[0]) {
                            out.write(buffer, 0, n);
                            out.flush();
                        }
                    }
                } catch (IOException ignored) {
                    // closed
                } finally {
                    if (!frozen[0]) {
                        try {
                            to.close();
                        } catch (IOException ignored) {
                            // closed
                        }
                    }
                }
            }, "test proxy pump");
            t.setDaemon(true);
            t.start();
        }

        @Override
        public void close() throws IOException {
            listener.close();
        }
    }

    @Test
    void leaseSurvivesADroppedKeepaliveConnection() throws Exception {
        Db.source();
        String host = System.getenv().getOrDefault("PGHOST", "127.0.0.1");
        assumeTrue(!host.startsWith("/"), "PGHOST is TCP");
        String port = System.getenv().getOrDefault("PGPORT", "5432");
        String user = System.getenv().getOrDefault("PGUSER", System.getProperty("user.name"));
        String database = System.getenv().getOrDefault("PGDATABASE", user);
        String resource = "java:dropped:" + System.nanoTime();
        try (Proxy proxy = new Proxy(host, Integer.parseInt(port)); Connection admin = Db.connect()) {
            Db.exec(admin, "CREATE EXTENSION IF NOT EXISTS fencing");
            Properties p = new Properties();
            p.setProperty("user", user);
            ConnectionSource viaProxy = ConnectionSource.url(
                    "jdbc:postgresql://127.0.0.1:" + proxy.port() + "/" + database, p);
            try (Lease lease = Lease.acquire(viaProxy, resource, "java-m", Duration.ofMillis(1500))) {
                proxy.blackHoleExisting();
                Thread.sleep(3000); // two TTLs
                assertFalse(lease.isLost(), "the lease survived a dropped keepalive connection");
                try (PreparedStatement ps = admin.prepareStatement(
                        "SELECT live, token FROM fencing.leases WHERE resource = ?")) {
                    ps.setString(1, resource);
                    try (ResultSet rs = ps.executeQuery()) {
                        assertTrue(rs.next() && rs.getBoolean(1) && rs.getLong(2) == lease.token());
                    }
                }
            }
        }
    }
}
