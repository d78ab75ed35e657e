package io.github.fencelock;

import java.sql.SQLException;

/**
 * The errors of fencelock, as {@link SQLException}s so that they pass through code that already
 * declares {@code throws SQLException}; {@link #getSQLState()} is the server's when it raised one.
 * The original driver exception, if any, is the cause.
 */
public class FencelockException extends SQLException {
    private static final long serialVersionUID = 1L;

    public FencelockException(String message, String sqlState, Throwable cause) {
        super(message, sqlState, cause);
    }
}
