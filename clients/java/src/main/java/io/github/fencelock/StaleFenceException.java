package io.github.fencelock;

/** FL001: a newer holder exists. Roll back and stop; never retry with the same fence. */
public class StaleFenceException extends FencelockException {
    private static final long serialVersionUID = 1L;
    public static final String SQLSTATE = "FL001";

    public StaleFenceException(String message, Throwable cause) {
        super(message, SQLSTATE, cause);
    }
}
