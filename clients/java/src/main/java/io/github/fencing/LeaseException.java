package io.github.fencing;

import java.sql.SQLException;

/**
 * A lease was not granted, or is no longer held. A {@link SQLException} (with no SQLSTATE of its
 * own unless the server sent one), so that one {@code catch (SQLException e)} covers the calls of
 * this client as it covers JDBC's.
 */
public class LeaseException extends SQLException {
    private static final long serialVersionUID = 1L;

    private final String resource;

    LeaseException(String message, String resource, String sqlState, Throwable cause) {
        super(message, sqlState, cause);
        this.resource = resource;
    }

    /** The resource of the lease. */
    public String resource() {
        return resource;
    }
}
