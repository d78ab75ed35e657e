package fencelock;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.postgresql.PGConnection;

/**
 * A fencelock lease held until {@link #close()}, renewed every ttl/3 by a watchdog thread on a
 * connection of its own.
 *
 * <pre>{@code
 * try (FencedLease lease = FencedLease.acquire(Fencelock.fromEnvironment(), "report:daily",
 *                                              Duration.ofSeconds(30), Duration.ZERO)) {
 *     for (Part part : parts) {
 *         work(part);                               // between statements: lease.check()
 *         lease.update("UPDATE reports SET done = ?, last_fence = ? WHERE id = 1",
 *                      part.id(), lease.fence());   // StaleFenceException (FL001) after a takeover;
 *     }                                             // LeaseLostException once the watchdog lost it
 * }
 * }</pre>
 *
 * When a renewal returns false (the lease expired or another owner has it) or fails, the lease is
 * lost: the statement the work is running is cancelled (PgJDBC's cancel request), {@link #sleep}
 * returns at once, and every later call of the lease throws {@link LeaseLostException}. Both
 * connections are in autocommit mode; a transaction of the work is its own business
 * ({@link #connection()}), but carry {@link #fence()} in every write to a fenced table.
 */
public final class FencedLease implements AutoCloseable {
    private final String resource;
    private final String owner;
    private final Duration ttl;
    private final Connection work;
    private final Connection watchdogConn;
    private final long fence;
    private final CountDownLatch lost = new CountDownLatch(1);
    private final CountDownLatch stop = new CountDownLatch(1);
    private final Thread watchdog;
    private volatile String lostReason;
    private Boolean released;

    private FencedLease(String resource, String owner, Duration ttl, Connection work,
            Connection watchdogConn, long fence) {
        this.resource = resource;
        this.owner = owner;
        this.ttl = ttl;
        this.work = work;
        this.watchdogConn = watchdogConn;
        this.fence = fence;
        this.watchdog = new Thread(this::watch, "fencelock-watchdog " + resource);
        this.watchdog.setDaemon(true);
    }

    /** The lease for a random owner (the resource and a UUID: keep owners unguessable). */
    public static FencedLease acquire(Fencelock.ConnectionFactory db, String resource, Duration ttl,
            Duration wait) throws SQLException {
        return acquire(db, resource, resource + ":" + UUID.randomUUID(), ttl, wait);
    }

    /**
     * Takes the lease (waiting up to {@code wait} for it), or throws {@link BusyException} when
     * another owner holds it; the fence is valid once the grant has committed (autocommit).
     */
    public static FencedLease acquire(Fencelock.ConnectionFactory db, String resource, String owner,
            Duration ttl, Duration wait) throws SQLException {
        Connection wd = db.connect(); // the watchdog's own
        Connection work = null;
        try {
            wd.setAutoCommit(true);
            work = db.connect(); // the work's
            work.setAutoCommit(true);
            Long fence;
            try (PreparedStatement ps = wd.prepareStatement("SELECT fencelock.acquire(?, ?, "
                    + "pg_catalog.make_interval(secs => ?), pg_catalog.make_interval(secs => ?))")) {
                ps.setString(1, resource);
                ps.setString(2, owner);
                ps.setDouble(3, seconds(ttl));
                ps.setDouble(4, seconds(wait));
                fence = Fencelock.translated(() -> single(ps, Long.class));
            }
            if (fence == null) {
                throw new BusyException(resource + " is held by another owner");
            }
            FencedLease lease = new FencedLease(resource, owner, ttl, work, wd, fence);
            lease.watchdog.start();
            return lease;
        } catch (SQLException | RuntimeException e) {
            closeQuietly(work, e);
            closeQuietly(wd, e);
            throw e;
        }
    }

    /** The fence to carry in every write to a fenced table (or to pass to assert_fence). */
    public long fence() {
        return fence;
    }

    public String resource() {
        return resource;
    }

    public String owner() {
        return owner;
    }

    /** The work's connection (autocommit unless the work changes it). */
    public Connection connection() throws LeaseLostException {
        check();
        return work;
    }

    public boolean isLost() {
        return lost.getCount() == 0;
    }

    /** Why the lease was lost, or null. */
    public String lostReason() {
        return lostReason;
    }

    /** Throws {@link LeaseLostException} if the watchdog lost the lease. */
    public void check() throws LeaseLostException {
        if (isLost()) {
            throw new LeaseLostException(lostReason, null);
        }
    }

    /** Waits (pacing, or work elsewhere), throwing {@link LeaseLostException} at once on loss. */
    public void sleep(Duration d) throws LeaseLostException, InterruptedException {
        if (lost.await(d.toNanos(), TimeUnit.NANOSECONDS)) {
            check();
        }
    }

    /** Runs JDBC work on the work connection, FL001/FL002 translated; a cancel becomes LeaseLost. */
    public <T> T run(Fencelock.SqlCall<T> call) throws SQLException {
        check();
        try {
            return call.call();
        } catch (SQLException e) {
            if (isLost()) { // most likely cancelled by the watchdog
                throw new LeaseLostException(lostReason, e);
            }
            throw Fencelock.translate(e);
        }
    }

    /** One statement on the work connection with its parameters; the update count. */
    public int update(String sql, Object... params) throws SQLException {
        return run(() -> {
            try (PreparedStatement ps = work.prepareStatement(sql)) {
                for (int i = 0; i < params.length; i++) {
                    ps.setObject(i + 1, params[i]);
                }
                return ps.executeUpdate();
            }
        });
    }

    /**
     * Stops the watchdog, releases the lease (see {@link #released()}) and closes both
     * connections. A lost lease is not an error here: the release just answers false.
     */
    @Override
    public void close() throws SQLException {
        if (released != null) {
            return;
        }
        stop.countDown();
        try {
            watchdog.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try {
            released = leaseCall(false);
        } finally {
            released = released != null && released;
            closeQuietly(work, null);
            watchdogConn.close();
        }
    }

    /** true: released; false: the lease had been lost; null: not closed yet. */
    public Boolean released() {
        return released;
    }

    private void watch() {
        long period = Math.max(1, ttl.toNanos() / 3);
        try {
            while (!stop.await(period, TimeUnit.NANOSECONDS)) {
                String why;
                try {
                    why = leaseCall(true) ? null : "the lease expired or was taken over";
                } catch (SQLException e) {
                    why = "renewal failed: " + e.getMessage();
                }
                if (why != null) {
                    lose(why);
                    return;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void lose(String why) {
        lostReason = why;
        lost.countDown();
        try {
            work.unwrap(PGConnection.class).cancelQuery(); // the work's running statement, if any
        } catch (SQLException e) {
            // The server cannot be reached: the statement fails by itself.
        }
    }

    /**
     * renew (the watchdog's) or release (close()'s) on the watchdog connection, naming this
     * grant's fence: a call that comes late (a retry after a lost response) cannot renew or
     * release a newer grant of the same owner.
     */
    private boolean leaseCall(boolean renew) throws SQLException {
        String sql = renew
                ? "SELECT fencelock.renew(?, ?, pg_catalog.make_interval(secs => ?)"
                : "SELECT fencelock.release(?, ?";
        sql += ", ?::pg_catalog.int8)";
        synchronized (watchdogConn) {
            try (PreparedStatement ps = watchdogConn.prepareStatement(sql)) {
                int i = 0;
                ps.setString(++i, resource);
                ps.setString(++i, owner);
                if (renew) ps.setDouble(++i, seconds(ttl));
                ps.setLong(++i, fence);
                Boolean ok = single(ps, Boolean.class);
                return ok != null && ok;
            }
        }
    }

    static double seconds(Duration d) {
        return d.toNanos() / 1e9;
    }

    private static <T> T single(PreparedStatement ps, Class<T> type) throws SQLException {
        try (ResultSet rs = ps.executeQuery()) {
            rs.next();
            return rs.getObject(1, type);
        }
    }

    private static void closeQuietly(Connection c, Exception primary) {
        if (c == null) return;
        try {
            c.close();
        } catch (SQLException e) {
            if (primary != null) primary.addSuppressed(e);
        }
    }
}
