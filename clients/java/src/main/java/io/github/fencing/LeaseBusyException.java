package io.github.fencing;

/**
 * A try (no wait, or a zero wait) found the lease held by another holder. Not a
 * {@link LeaseTimeoutException}: nothing waited. Wait for it ({@link Lease#FOREVER}, or a
 * {@code Duration}) or try again later.
 */
public class LeaseBusyException extends LeaseException {
    private static final long serialVersionUID = 1L;

    LeaseBusyException(String resource) {
        super("lease on \"" + resource + "\" is held by another holder", resource, null, null);
    }
}
