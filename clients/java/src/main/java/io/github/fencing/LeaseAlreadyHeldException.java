package io.github.fencing;

import java.sql.SQLWarning;

/**
 * The holder asked again for a lease it holds (the server answered NULL with a NOTICE of its own
 * SQLSTATE naming the live token). Use the lease you have, or release it first.
 */
public class LeaseAlreadyHeldException extends LeaseException {
    private static final long serialVersionUID = 1L;

    private final Long token;

    LeaseAlreadyHeldException(String resource, String holder, Long token, SQLWarning notice) {
        super("holder \"" + holder + "\" already holds the lease on \"" + resource + "\""
                + (token == null ? "" : " with token " + token), resource,
                notice == null ? null : notice.getSQLState(), notice);
        this.token = token;
    }

    /** The token of the live lease the holder already has, if the server named it, else null. */
    public Long token() {
        return token;
    }
}
