package io.github.fencelock;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.UUID;

/**
 * A one-step job (take the lock, write rows carrying the fence, release) as one transaction on
 * one connection, without a watchdog.
 *
 * <pre>{@code
 * long total = FencedStep.run(Fencelock.fromEnvironment(), "report:daily", Duration.ofSeconds(30),
 *         Duration.ZERO, (c, fence) -> {
 *             try (PreparedStatement ps = c.prepareStatement(
 *                     "UPDATE reports SET total = total + 1, last_fence = ? WHERE id = 1")) {
 *                 ps.setLong(1, fence);
 *                 return (long) ps.executeUpdate();
 *             }
 *         });
 * }</pre>
 *
 * BEGIN; SET LOCAL idle_in_transaction_session_timeout = ttl; acquire_xact (waiting up to
 * {@code wait}); the function's writes (carry the fence); COMMIT, which frees the lease. The
 * ttl is only the idle timeout: acquire_xact's grant lasts as long as its transaction. The open
 * transaction keeps the grant's
 * row locked, so no other owner gets the lease before it ends (a try-once acquire answers NULL, a
 * waiting one waits), also past the TTL; grant, writes and release commit or vanish together. A
 * step idle in its transaction for longer than the TTL (a paused process) is ended by the server:
 * its writes roll back, the lease is free again, and the step throws {@link LeaseLostException}.
 * {@link BusyException} when another owner holds the lease (after {@code wait}); FL001/FL002 as
 * {@link StaleFenceException}/{@link UnfencedException}; on any exception the transaction is
 * rolled back.
 */
public final class FencedStep {
    private FencedStep() {}

    /** The step's work: runs inside the transaction; must not commit or roll back. */
    @FunctionalInterface
    public interface Work<T> {
        T run(Connection c, long fence) throws SQLException;
    }

    /** On a connection of its own from {@code db}, closed at the end, for a random owner. */
    public static <T> T run(Fencelock.ConnectionFactory db, String resource, Duration ttl,
            Duration wait, Work<T> work) throws SQLException {
        try (Connection c = db.connect()) {
            return run(c, resource, resource + ":" + UUID.randomUUID(), ttl, wait, work);
        }
    }

    /**
     * On {@code c} (outside a transaction; left in autocommit mode). The owner token is what
     * releases: keep it unguessable.
     */
    public static <T> T run(Connection c, String resource, String owner, Duration ttl,
            Duration wait, Work<T> work) throws SQLException {
        boolean committing = false;
        try {
            c.setAutoCommit(false); // PgJDBC sends the BEGIN with the first statement
            Long fence;
            // The timeout only counts while the session is idle in the transaction, so it can be
            // set in the acquire's statement.
            try (PreparedStatement ps = c.prepareStatement(
                    "SELECT pg_catalog.set_config('idle_in_transaction_session_timeout', ?, true), "
                    + "fencelock.acquire_xact(?, ?, pg_catalog.make_interval(secs => ?))")) {
                ps.setString(1, Long.toString(Math.max(1, ttl.toMillis())));
                ps.setString(2, resource);
                ps.setString(3, owner);
                ps.setDouble(4, wait.toNanos() / 1e9);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    fence = rs.getObject(2, Long.class);
                }
            }
            if (fence == null) {
                throw new BusyException(resource + " is held by another owner");
            }
            T result = work.run(c, fence);
            committing = true;
            c.commit(); // frees the lease: acquire_xact's grant ends with its transaction
            c.setAutoCommit(true);
            return result;
        } catch (SQLException | RuntimeException e) {
            if (!committing && sessionEnded(c, e)) {
                throw new LeaseLostException(
                        "the session ended before the step committed: " + e.getMessage(), e);
            }
            try {
                if (!c.isClosed()) {
                    c.rollback();
                    c.setAutoCommit(true);
                }
            } catch (SQLException r) {
                e.addSuppressed(r);
            }
            if (e instanceof SQLException) {
                throw Fencelock.translate((SQLException) e);
            }
            throw (RuntimeException) e;
        }
    }

    /** The server ended the session (idle past the TTL, a terminate, a broken connection). */
    private static boolean sessionEnded(Connection c, Exception e) {
        if (e instanceof SQLException) {
            String s = ((SQLException) e).getSQLState();
            if (s != null && (s.startsWith("08") || s.startsWith("57P0") || s.equals("25P03"))) {
                return true;
            }
        }
        try {
            return c.isClosed();
        } catch (SQLException ignored) {
            return true;
        }
    }
}
