package io.github.fencing;

import java.sql.SQLException;

/**
 * The database's {@code fencing} extension is missing or older than this client needs (0.4.0):
 * run {@code ALTER EXTENSION fencing UPDATE} (or {@code CREATE EXTENSION fencing}) there.
 * Raised when a lease, session or election opens its first connection.
 */
public class UnsupportedServerException extends SQLException {
    private static final long serialVersionUID = 1L;

    /** The oldest extension version this client works with. */
    public static final String MINIMUM = "0.4.0";

    private final String version;

    UnsupportedServerException(String version) {
        super(version == null
                ? "the fencing extension is not installed in this database: CREATE EXTENSION fencing"
                        + " (this client needs " + MINIMUM + " or later)"
                : "the fencing extension in this database is " + version + "; this client needs "
                        + MINIMUM + " or later: ALTER EXTENSION fencing UPDATE", "0A000");
        this.version = version;
    }

    /** The extension's version in the database, or null when it is not installed. */
    public String version() {
        return version;
    }
}
