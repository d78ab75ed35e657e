package io.github.fencelock;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
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
 *     }                                             // LeaseLostException once the lease is lost
 * }
 * }</pre>
 *
 * The lease contract of doc/clients.md:
 * <ul>
 * <li>The local deadline is when the grant or the last successful renewal was sent, plus the ttl,
 * less a margin (a tenth of the ttl, at most one second) for scheduling and clock drift, on the
 * monotonic clock ({@link System#nanoTime()}). Every renewal, and every reconnection, is bounded
 * by what remains of it; when it passes without an answer the lease is lost, whatever the network
 * does, so a partitioned holder learns of the loss before the server can grant the lease to anyone
 * else.</li>
 * <li>A renewal that fails (the connection was terminated, the server restarted or failed over)
 * is retried on a new connection from the factory, naming the grant's fence, until the local
 * deadline; only a renewal that answers false (the lease expired or another owner has it) ends
 * the lease at once.</li>
 * <li>On loss the work is told: {@link #sleep} and {@link #check} throw
 * {@link LeaseLostException}; the statement the work is running ({@link #update}, {@link #run},
 * or one {@link #register registered}) is stopped, and its call throws
 * {@link LeaseLostException}: when a renewal answered false, by {@code pg_cancel_backend} from a
 * connection of the lease's own (PgJDBC's {@code Statement.cancel()} keeps the connection locked
 * until its cancel request is answered), its connection aborted if it has not returned a tenth of
 * the ttl later (at most one second); when the server could not be reached by the deadline, by
 * aborting its connection at once (a cancel could not reach the server either). A work statement that fails
 * because its connection broke waits for the watchdog's verdict: the driver's exception if the
 * lease was renewed meanwhile ({@link #connection()} opens a new connection), LeaseLostException
 * if it was lost.</li>
 * <li>One owner token per lease object; an acquire whose reply was lost (the connection broke)
 * is sent again with the same token, and fencelock answers it with the same fence.</li>
 * </ul>
 * Both connections are in autocommit mode; a transaction of the work is its own business, but
 * carry {@link #fence()} in every write to a fenced table.
 */
public final class FencedLease implements AutoCloseable {
    /** Connection attempts, abandoned calls and cancel requests: never the caller's thread. */
    private static final ExecutorService IO = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "fencelock-io");
        t.setDaemon(true);
        return t;
    });
    private static final long RETRY_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

    private final Fencelock.ConnectionFactory db;
    private final String resource;
    private final String owner;
    private final Duration ttl;
    private final long ttlNanos;
    private final long marginNanos;
    private final CountDownLatch lost = new CountDownLatch(1);
    private final Object signal = new Object(); // wakes the watchdog: stopping, renewNow
    private volatile boolean stopping;
    private final Set<Statement> registered = ConcurrentHashMap.newKeySet();
    private final AtomicInteger running = new AtomicInteger();
    private final Object verdict = new Object(); // notified on each renewal and on loss
    private Thread watchdog;
    private long fence;
    private volatile long sentAt; // nanoTime when the grant or last successful renewal was sent
    private volatile Connection watchConn; // the watchdog's; replaced when it breaks
    private volatile Connection work; // the work's; replaced by connection() when it broke
    private volatile boolean renewNow;
    private volatile String lostReason;
    private volatile int renewals, reconnections;
    private Boolean released;

    private FencedLease(Fencelock.ConnectionFactory db, String resource, String owner, Duration ttl) {
        this.db = db;
        this.resource = resource;
        this.owner = owner;
        this.ttl = ttl;
        this.ttlNanos = ttl.toNanos();
        this.marginNanos = Math.min(ttlNanos / 10, TimeUnit.SECONDS.toNanos(1));
    }

    /** The lease for a random owner (the resource and a UUID: keep owners unguessable). */
    public static FencedLease acquire(Fencelock.ConnectionFactory db, String resource, Duration ttl,
            Duration wait) throws SQLException {
        return acquire(db, resource, resource + ":" + UUID.randomUUID(), ttl, wait);
    }

    /**
     * Takes the lease (waiting up to {@code wait} for it), or throws {@link BusyException} when
     * another owner holds it; the fence is valid once the grant has committed (autocommit). A
     * connection that breaks before the answer arrives is opened again and the acquire sent again
     * with the same owner (the same fence if the first was granted), for up to wait + ttl.
     */
    public static FencedLease acquire(Fencelock.ConnectionFactory db, String resource, String owner,
            Duration ttl, Duration wait) throws SQLException {
        if (ttl.isNegative() || ttl.isZero()) {
            throw new IllegalArgumentException("ttl must be positive");
        }
        FencedLease lease = new FencedLease(db, resource, owner, ttl);
        try {
            lease.take(wait);
            lease.work = db.connect();
            lease.work.setAutoCommit(true);
        } catch (SQLException | RuntimeException e) {
            lease.closeConnections(e);
            throw e;
        }
        lease.watchdog = new Thread(lease::watch, "fencelock-watchdog " + resource);
        lease.watchdog.setDaemon(true);
        lease.watchdog.start();
        return lease;
    }

    private void take(Duration wait) throws SQLException {
        long start = System.nanoTime();
        long budget = wait.toNanos() + ttlNanos;
        // An attempt may wait up to `wait` on the server; past that, a silent server is a broken one.
        int timeoutMs = (int) Math.min(Integer.MAX_VALUE, wait.toMillis() + Math.max(1000, ttl.toMillis() / 3));
        while (true) {
            try {
                Connection c = watchConnection();
                c.setNetworkTimeout(IO, timeoutMs);
                long sent = System.nanoTime(); // the deadline counts from here, not the connecting
                Long f;
                try (PreparedStatement ps = c.prepareStatement("SELECT fencelock.acquire(?, ?, "
                        + "pg_catalog.make_interval(secs => ?), pg_catalog.make_interval(secs => ?))")) {
                    ps.setString(1, resource);
                    ps.setString(2, owner);
                    ps.setDouble(3, seconds(ttl));
                    ps.setDouble(4, seconds(wait));
                    f = single(ps, Long.class);
                }
                if (f == null) {
                    throw new BusyException(resource + " is held by another owner");
                }
                fence = f;
                sentAt = sent;
                if (System.nanoTime() - sent > ttlNanos / 3) {
                    renewLateGrant();
                }
                return;
            } catch (BusyException e) {
                throw e;
            } catch (SQLException e) {
                if (!connectionLost(e) || System.nanoTime() - start + RETRY_NANOS > budget) {
                    throw Fencelock.translate(e);
                }
                dropWatchConnection();
                reconnections++;
                sleepNanos(RETRY_NANOS);
            }
        }
    }

    /**
     * A grant that came long after its request was sent (it waited): the deadline counted from
     * the request is (nearly) spent, though the grant is recent. Renewed at once, bounded by the
     * ttl, so the deadline counts from this renewal.
     */
    private void renewLateGrant() throws SQLException {
        if (!attempt(true, ttlNanos)) {
            throw new LeaseLostException("granted after a long wait, expired before its first renewal", null);
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

    /**
     * The work's connection (autocommit unless the work changes it); a new one from the factory
     * when the last one broke.
     */
    public Connection connection() throws SQLException {
        check();
        Connection c = work;
        if (c == null || c.isClosed()) {
            c = connectBounded();
            c.setAutoCommit(true);
            work = c;
        }
        return c;
    }

    /** A new connection from the factory, given up on (LeaseLostException) when the lease is lost. */
    private Connection connectBounded() throws SQLException {
        Future<Connection> f = IO.submit(db::connect);
        try {
            while (true) {
                try {
                    return f.get(50, TimeUnit.MILLISECONDS);
                } catch (TimeoutException e) {
                    if (isLost()) throw new LeaseLostException(lostReason, null);
                }
            }
        } catch (ExecutionException e) {
            if (e.getCause() instanceof SQLException) throw (SQLException) e.getCause();
            throw new IllegalStateException(e.getCause());
        } catch (InterruptedException | LeaseLostException e) {
            IO.execute(() -> { // close it once it is open
                try {
                    f.get().close();
                } catch (Exception ignored) {
                    // it never opened
                }
            });
            if (e instanceof InterruptedException) {
                Thread.currentThread().interrupt();
                throw new SQLException("interrupted while connecting", "08001", e);
            }
            throw (LeaseLostException) e;
        }
    }

    public boolean isLost() {
        return lost.getCount() == 0;
    }

    /** Why the lease was lost, or null. */
    public String lostReason() {
        return lostReason;
    }

    /** The local deadline: until then the lease is held (System.nanoTime() units). */
    public long deadlineNanos() {
        return sentAt + ttlNanos - marginNanos;
    }

    /** Successful renewals so far, and connections the lease opened again after one broke. */
    public int renewals() {
        return renewals;
    }

    public int reconnections() {
        return reconnections;
    }

    /** Throws {@link LeaseLostException} if the lease is lost. */
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

    /**
     * A statement (of any PgJDBC connection) the lease cancels when it is lost, until the returned
     * registration is closed: {@code try (var r = lease.register(st)) { st.execute(...); }}.
     */
    public AutoCloseable register(Statement st) {
        registered.add(st);
        return () -> registered.remove(st);
    }

    /**
     * Runs JDBC work on the work connection ({@link #connection()}), FL001/FL002 translated; on
     * loss the running statement is cancelled and the call throws {@link LeaseLostException}.
     */
    public <T> T run(Fencelock.SqlCall<T> call) throws SQLException {
        running.incrementAndGet();
        long started = System.nanoTime();
        try {
            connection();
            T result = call.call();
            check(); // lost meanwhile: whatever the work did outside the database is suspect
            return result;
        } catch (SQLException e) {
            if (e instanceof LeaseLostException) throw e;
            if (!isLost() && connectionLost(e)) {
                awaitVerdict(started);
            }
            if (isLost()) { // most likely cancelled because of it
                throw new LeaseLostException(lostReason, e);
            }
            throw Fencelock.translate(e);
        } finally {
            running.decrementAndGet();
        }
    }

    /** One statement on the work connection with its parameters; the update count. */
    public int update(String sql, Object... params) throws SQLException {
        return run(() -> {
            try (PreparedStatement ps = work.prepareStatement(sql); AutoCloseable r = register(ps)) {
                for (int i = 0; i < params.length; i++) {
                    ps.setObject(i + 1, params[i]);
                }
                return ps.execute() ? 0 : ps.getUpdateCount();
            } catch (SQLException e) {
                throw e;
            } catch (Exception e) {
                throw new IllegalStateException(e); // the registration's close cannot throw
            }
        });
    }

    /**
     * Stops the watchdog, releases the lease (see {@link #released()}) and closes both
     * connections. A lost lease is not an error here: the release just answers false, and a
     * lease already lost is not released at all (so a broken connection cannot turn the loss
     * into another exception). A release of a held lease that fails throws.
     */
    @Override
    public void close() throws SQLException {
        if (released != null) {
            return;
        }
        stopping = true;
        synchronized (signal) {
            signal.notifyAll();
        }
        try {
            if (watchdog != null) watchdog.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        released = false;
        try {
            if (!isLost()) {
                released = attempt(false);
            }
        } catch (SQLException e) {
            if (!isLost() && System.nanoTime() < deadlineNanos()) throw e;
        } finally {
            closeConnections(null);
        }
    }

    /** true: released; false: the lease had been lost; null: not closed yet. */
    public Boolean released() {
        return released;
    }

    // -- the watchdog ---------------------------------------------------------------------------

    private void watch() {
        long period = Math.max(1, ttlNanos / 3);
        long next = sentAt + period;
        try {
            while (true) {
                long deadline = deadlineNanos();
                long wake = Math.min(renewNow ? System.nanoTime() : next, deadline);
                if (pause(wake - System.nanoTime())) return;
                long now = System.nanoTime();
                if (now - deadline >= 0) {
                    lose("not renewed before its deadline (the last renewal sent, plus the ttl)", false);
                    return;
                }
                if (!renewNow && now - next < 0) continue;
                renewNow = false;
                Boolean ok = renewBounded(deadline - now);
                if (ok == null) { // failed: a new connection, and again, until the deadline
                    next = System.nanoTime() + RETRY_NANOS;
                } else if (!ok) {
                    lose("the lease expired or was taken over", true);
                    return;
                } else {
                    next = sentAt + period;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Waits up to nanos, or until a renewal is asked for; true when the lease is closing. */
    private boolean pause(long nanos) throws InterruptedException {
        long end = System.nanoTime() + nanos;
        synchronized (signal) {
            while (!stopping && !renewNow) {
                long left = end - System.nanoTime();
                if (left <= 0) break;
                TimeUnit.NANOSECONDS.timedWait(signal, left);
            }
        }
        return stopping;
    }

    /** A renewal abandoned when the deadline comes first: true, false, or null when it failed. */
    private Boolean renewBounded(long remaining) throws InterruptedException {
        Future<Boolean> f = IO.submit(() -> attempt(true));
        try {
            return f.get(remaining, TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            f.cancel(true);
            dropWatchConnection(); // aborted: the abandoned call returns at once
            return null;
        } catch (ExecutionException e) {
            dropWatchConnection();
            reconnections++;
            return null;
        }
    }

    /**
     * renew (the watchdog's) or release (close()'s) on the watchdog's connection, a new one if it
     * broke, naming this grant's fence: a late call (a retry after a lost response) cannot renew or
     * release a newer grant of the same owner. Bounded by what remains of the local deadline.
     */
    private boolean attempt(boolean renew) throws SQLException {
        return attempt(renew, deadlineNanos() - System.nanoTime());
    }

    /** attempt, bounded by {@code bound} nanoseconds from now. */
    private boolean attempt(boolean renew, long bound) throws SQLException {
        long end = System.nanoTime() + bound;
        if (bound <= 0) {
            throw new LeaseLostException("the local deadline passed", null);
        }
        Connection c = watchConnection();
        c.setNetworkTimeout(IO, (int) Math.max(1, TimeUnit.NANOSECONDS.toMillis(end - System.nanoTime())));
        String sql = renew
                ? "SELECT fencelock.renew(?, ?, pg_catalog.make_interval(secs => ?), ?::pg_catalog.int8)"
                : "SELECT fencelock.release(?, ?, ?::pg_catalog.int8)";
        long sent = System.nanoTime();
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            int i = 0;
            ps.setString(++i, resource);
            ps.setString(++i, owner);
            if (renew) ps.setDouble(++i, seconds(ttl));
            ps.setLong(++i, fence);
            Boolean ok = single(ps, Boolean.class);
            boolean held = ok != null && ok;
            if (renew && held) {
                sentAt = sent;
                renewals++;
                synchronized (verdict) {
                    verdict.notifyAll();
                }
            }
            return held;
        }
    }

    private Connection watchConnection() throws SQLException {
        Connection c = watchConn;
        if (c == null || c.isClosed()) {
            c = db.connect();
            c.setAutoCommit(true);
            watchConn = c;
        }
        return c;
    }

    private void dropWatchConnection() {
        Connection c = watchConn;
        watchConn = null;
        if (c != null) abortQuietly(c);
    }

    /** After the work's connection broke: wait until a renewal sent since, or the loss. */
    private void awaitVerdict(long since) throws LeaseLostException {
        renewNow = true;
        synchronized (signal) {
            signal.notifyAll();
        }
        synchronized (verdict) {
            while (!isLost() && sentAt - since < 0) {
                long left = TimeUnit.NANOSECONDS.toMillis(deadlineNanos() - System.nanoTime());
                if (left <= 0) break;
                try {
                    verdict.wait(Math.min(left, 50));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
    }

    private void lose(String why, boolean reachable) {
        lostReason = why;
        lost.countDown();
        synchronized (verdict) {
            verdict.notifyAll();
        }
        // The running statements: the work's, and those registered. When the server answered
        // (the lease expired or was taken over), each is cancelled by pg_cancel_backend from a
        // connection of the lease's own, not by PgJDBC's cancel request, which holds the
        // statement's connection locked until it is answered (10 s by default); its connection
        // is aborted if it has not returned a tenth of the ttl later (at most 1 s). When the
        // server could not be reached by the deadline, a cancel could not reach it either: the
        // connection is aborted at once, so the work stops before the server's deadline.
        Set<Connection> conns = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        Connection w = work;
        if (running.get() > 0 && w != null) conns.add(w);
        for (Statement st : registered) {
            try {
                conns.add(st.getConnection());
            } catch (SQLException e) {
                // closed meanwhile
            }
        }
        for (Connection c : conns) {
            if (!reachable) {
                abortQuietly(c);
                continue;
            }
            IO.execute(() -> cancelBackend(c));
            IO.execute(() -> {
                sleepNanos(marginNanos);
                if (c == work ? running.get() > 0 : registered.stream().anyMatch(st -> owns(c, st))) {
                    abortQuietly(c);
                }
            });
        }
    }

    private void cancelBackend(Connection target) {
        try {
            int pid = target.unwrap(PGConnection.class).getBackendPID();
            try (Connection c = db.connect()) {
                c.setNetworkTimeout(IO, (int) Math.max(1000, TimeUnit.NANOSECONDS.toMillis(ttlNanos)));
                try (PreparedStatement ps = c.prepareStatement("SELECT pg_catalog.pg_cancel_backend(?)")) {
                    ps.setInt(1, pid);
                    ps.execute();
                }
            }
        } catch (SQLException e) {
            // the server cannot be reached: the abort ends the statement
        }
    }

    private static boolean owns(Connection c, Statement st) {
        try {
            return st.getConnection() == c;
        } catch (SQLException e) {
            return false;
        }
    }

    // -- helpers --------------------------------------------------------------------------------

    /** The connection broke or the server went away (restart, failover, terminate, timeout). */
    static boolean connectionLost(SQLException e) {
        String s = e.getSQLState();
        return s != null && (s.startsWith("08") || s.startsWith("57P") || s.equals("25006"));
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

    private static void sleepNanos(long nanos) {
        try {
            TimeUnit.NANOSECONDS.sleep(nanos);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void abortQuietly(Connection c) {
        try {
            c.abort(IO);
        } catch (SQLException | RuntimeException e) {
            // already closed
        }
    }

    private void closeConnections(Exception primary) {
        for (Connection c : new Connection[] {work, watchConn}) {
            if (c == null) continue;
            try {
                c.close();
            } catch (SQLException e) {
                if (primary != null) primary.addSuppressed(e);
            }
        }
    }
}
