package io.github.fencelock;

/** The watchdog could not renew the lease (or the work was cancelled because of it): stop. */
public class LeaseLostException extends FencelockException {
    private static final long serialVersionUID = 1L;

    public LeaseLostException(String message, Throwable cause) {
        super(message, null, cause);
    }
}
