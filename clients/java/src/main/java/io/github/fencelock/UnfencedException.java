package io.github.fencelock;

/** FL002: the write did not carry a fence (a bug in the caller). */
public class UnfencedException extends FencelockException {
    private static final long serialVersionUID = 1L;
    public static final String SQLSTATE = "FL002";

    public UnfencedException(String message, Throwable cause) {
        super(message, SQLSTATE, cause);
    }
}
