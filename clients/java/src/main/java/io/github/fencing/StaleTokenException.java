package io.github.fencing;

import org.postgresql.util.PSQLException;

/**
 * SQLSTATE 23T01: the write presented a token older than the stored one (or equal, in strict
 * mode). A newer lock holder has taken over: stop, roll back, and acquire the lock again.
 */
public class StaleTokenException extends FencingTokenException {
    private static final long serialVersionUID = 1L;

    /** The SQLSTATE of a stale token. */
    public static final String SQLSTATE = "23T01";

    public StaleTokenException(PSQLException cause) {
        super(cause);
    }
}
