package io.github.fencing;

import java.security.SecureRandom;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

/** What the client checks of a server, and the default identity of a holder. */
final class Server {
    private static final SecureRandom RANDOM = new SecureRandom();
    private static volatile String host;

    private Server() {
    }

    /**
     * Throws {@link UnsupportedServerException} unless the database's {@code fencing} extension is
     * 0.4.0 or later ({@code extversion} in {@code pg_extension}).
     */
    static void check(Connection c) throws SQLException {
        String version = null;
        try (Statement st = c.createStatement();
                ResultSet rs = st.executeQuery("SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'fencing'")) {
            if (rs.next()) {
                version = rs.getString(1);
            }
        }
        if (version == null || !atLeast(version, UnsupportedServerException.MINIMUM)) {
            throw new UnsupportedServerException(version);
        }
    }

    /** Whether dotted version {@code v} is at least {@code min} (a non-numeric part counts as 0). */
    static boolean atLeast(String v, String min) {
        String[] a = v.split("[.]"), b = min.split("[.]");
        for (int i = 0; i < Math.max(a.length, b.length); i++) {
            long x = i < a.length ? number(a[i]) : 0, y = i < b.length ? number(b[i]) : 0;
            if (x != y) {
                return x > y;
            }
        }
        return true;
    }

    private static long number(String part) {
        int end = 0;
        while (end < part.length() && end < 18 && Character.isDigit(part.charAt(end))) {
            end++;
        }
        return end == 0 ? 0 : Long.parseLong(part.substring(0, end));
    }

    /**
     * A new holder name, {@code <host>:<pid>:<random>}: this machine's host name (cut so that the
     * whole is at most 45 bytes), this process's id, 8 lowercase hex characters from a CSPRNG.
     */
    static String defaultHolder() {
        String pid = Long.toString(ProcessHandle.current().pid());
        byte[] r = new byte[4];
        RANDOM.nextBytes(r);
        StringBuilder random = new StringBuilder(8);
        for (byte x : r) {
            random.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
        }
        return holderOf(hostName(), pid, random.toString());
    }

    /** {@code host:pid:random}, the host cut (whole characters) to fit in 45 bytes. */
    static String holderOf(String host, String pid, String random) {
        int room = 45 - 2 - pid.length() - random.length();
        StringBuilder h = new StringBuilder();
        int bytes = 0;
        for (int i = 0; i < host.length(); ) {
            int cp = host.codePointAt(i);
            int n = new String(Character.toChars(cp)).getBytes(StandardCharsets.UTF_8).length;
            if (bytes + n > room) {
                break;
            }
            h.appendCodePoint(cp);
            bytes += n;
            i += Character.charCount(cp);
        }
        return h + ":" + pid + ":" + random;
    }

    private static String hostName() {
        String h = host;
        if (h == null) {
            try {
                // the kernel's host name (gethostname()), as libc and other clients see it
                h = java.nio.file.Files.readString(java.nio.file.Path.of("/proc/sys/kernel/hostname")).trim();
            } catch (Exception e) {
                try {
                    h = InetAddress.getLocalHost().getHostName();
                } catch (Exception x) {
                    h = System.getenv().getOrDefault("HOSTNAME", "localhost");
                }
            }
            if (h == null || h.isEmpty()) {
                h = "localhost";
            }
            host = h;
        }
        return h;
    }
}
