package io.github.fencelock;

/** acquire returned NULL: another owner holds a live lease. */
public class BusyException extends FencelockException {
    private static final long serialVersionUID = 1L;

    public BusyException(String message) {
        super(message, null, null);
    }
}
