package io.github.fencelock;

import java.sql.SQLException;

/** An SQLException (typed or not) thrown through an interface that declares none (Lock). */
public class UncheckedSQLException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public UncheckedSQLException(SQLException cause) {
        super(cause.getMessage(), cause);
    }

    @Override
    public synchronized SQLException getCause() {
        return (SQLException) super.getCause();
    }
}
