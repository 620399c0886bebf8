package io.github.fencing;

/**
 * The lease is lost: its deadline passed (renewals failed, or the process was frozen past it) or
 * a renewal was refused (someone else holds it now). Stop writing with its token.
 */
public class LeaseLostException extends LeaseException {
    private static final long serialVersionUID = 1L;

    private final long token;

    LeaseLostException(String resource, long token, String reason) {
        super("lease on \"" + resource + "\" with token " + token + " lost: " + reason, resource, null, null);
        this.token = token;
    }

    /** The token of the lost lease. */
    public long token() {
        return token;
    }
}
