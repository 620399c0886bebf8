package io.github.fencing;

import org.postgresql.util.PSQLException;

/**
 * SQLSTATE 23T02: a write to a protected table carried no token (no {@code SET LOCAL
 * fencing.token} in its transaction, no value for the token column).
 */
public class MissingTokenException extends FencingTokenException {
    private static final long serialVersionUID = 1L;

    /** The SQLSTATE of a missing token. */
    public static final String SQLSTATE = "23T02";

    public MissingTokenException(PSQLException cause) {
        super(cause);
    }
}
