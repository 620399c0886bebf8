package io.github.fencing;

import java.time.Duration;

/**
 * The lease was not granted: another holder has it and the wait (if any) passed.
 */
public class LeaseTimeoutException extends LeaseException {
    private static final long serialVersionUID = 1L;

    LeaseTimeoutException(String resource, Duration wait) {
        super(wait == null || wait.isZero()
                ? "lease on \"" + resource + "\" is held by another holder"
                : "lease on \"" + resource + "\" not granted within " + wait, resource, null, null);
    }
}
