package io.github.fencelock;

import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.Map;
import java.util.Properties;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

/** Typed fencing errors for any JDBC call, and connections from PostgreSQL's PG* variables. */
public final class Fencelock {
    private Fencelock() {}

    /** Opens a new connection; a lease opens two (the work's and the watchdog's). */
    @FunctionalInterface
    public interface ConnectionFactory {
        Connection connect() throws SQLException;
    }

    /** A JDBC call whose FL001/FL002 {@link #translated} turns into typed exceptions. */
    @FunctionalInterface
    public interface SqlCall<T> {
        T call() throws SQLException;
    }

    /**
     * FL001 as {@link StaleFenceException}, FL002 as {@link UnfencedException} (the driver's
     * exception as the cause); any other exception is returned as it is.
     */
    public static SQLException translate(SQLException e) {
        if (e instanceof FencelockException || e.getSQLState() == null) {
            return e;
        }
        switch (e.getSQLState()) {
            case StaleFenceException.SQLSTATE:
                return new StaleFenceException(primaryMessage(e), e);
            case UnfencedException.SQLSTATE:
                return new UnfencedException(primaryMessage(e), e);
            default:
                return e;
        }
    }

    /** Runs the call, rethrowing its SQLException {@link #translate translated}. */
    public static <T> T translated(SqlCall<T> call) throws SQLException {
        try {
            return call.call();
        } catch (SQLException e) {
            throw translate(e);
        }
    }

    /** The server's message without PgJDBC's "ERROR: " prefix and hint lines. */
    static String primaryMessage(SQLException e) {
        if (e instanceof PSQLException) {
            ServerErrorMessage m = ((PSQLException) e).getServerErrorMessage();
            if (m != null && m.getMessage() != null) {
                return m.getMessage();
            }
        }
        return e.getMessage();
    }

    /**
     * Connections as libpq would make them from PGHOST, PGPORT, PGUSER, PGPASSWORD and
     * PGDATABASE (PgJDBC itself reads none of them). A PGHOST that starts with "/" is the
     * directory of the server's Unix socket, reached through {@link UnixSocketFactory}.
     */
    public static ConnectionFactory fromEnvironment() {
        return fromEnvironment(System.getenv());
    }

    /** As {@link #fromEnvironment()}, from the given variables (PGAPPNAME included). */
    public static ConnectionFactory fromEnvironment(Map<String, String> env) {
        String host = env.getOrDefault("PGHOST", "localhost");
        String port = env.getOrDefault("PGPORT", "5432");
        String user = env.getOrDefault("PGUSER", System.getProperty("user.name"));
        String db = env.getOrDefault("PGDATABASE", user);
        Properties props = new Properties();
        props.setProperty("user", user);
        if (env.containsKey("PGPASSWORD")) {
            props.setProperty("password", env.get("PGPASSWORD"));
        }
        props.setProperty("ApplicationName", env.getOrDefault("PGAPPNAME", "fencelock-java"));
        String url;
        if (host.startsWith("/")) {
            props.setProperty("socketFactory", UnixSocketFactory.class.getName());
            props.setProperty("socketFactoryArg", host);
            props.setProperty("sslmode", "disable");
            props.setProperty("gssEncMode", "disable");
            url = "jdbc:postgresql://localhost:" + port + "/";
        } else {
            url = "jdbc:postgresql://" + host + ":" + port + "/";
        }
        String fullUrl = url + URLEncoder.encode(db, StandardCharsets.UTF_8).replace("+", "%20");
        return () -> DriverManager.getConnection(fullUrl, props);
    }
}
