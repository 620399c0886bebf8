package io.github.fencing;

/**
 * A wait for a lease (or a campaign) ended by {@link Thread#interrupt()} of the waiting thread.
 * The server-side call was cancelled (a cancel request) and had ended before this was thrown:
 * nothing of the caller stays queued. The thread's interrupt status is set again.
 * ({@code Future.cancel} of an {@code acquireAsync} future ends the same way, with a
 * {@link java.util.concurrent.CancellationException} from the future.)
 */
public class LeaseCancelledException extends LeaseException {
    private static final long serialVersionUID = 1L;

    LeaseCancelledException(String resource, Throwable cause) {
        super("the wait for the lease on \"" + resource + "\" was cancelled", resource, "57014", cause);
    }
}
