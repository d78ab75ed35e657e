package io.github.fencelock;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.After;
import org.junit.Assume;
import org.junit.Before;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TestName;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

/**
 * Against the database of the PG* environment variables (a superuser, fencelock installed);
 * without PGDATABASE the tests that need it are skipped. scripts/test-clients.sh runs them.
 */
public class FencedLeaseTest {
    @Rule
    public TestName test = new TestName();

    private Fencelock.ConnectionFactory db;
    private Connection admin;
    private String resource;

    @Before
    public void connect() throws SQLException {
        resource = "java-test:" + test.getMethodName() + ":" + System.nanoTime();
        if (System.getenv("PGDATABASE") == null) return;
        db = Fencelock.fromEnvironment();
        admin = db.connect();
    }

    @After
    public void disconnect() throws SQLException {
        if (admin != null) admin.close();
    }

    private void needDatabase() {
        Assume.assumeTrue("PGDATABASE is not set", db != null);
    }

    private Object value(String sql) throws SQLException {
        try (Statement s = admin.createStatement(); ResultSet rs = s.executeQuery(sql)) {
            rs.next();
            return rs.getObject(1);
        }
    }

    private static PSQLException serverError(String sqlState, String message) {
        return new PSQLException(new ServerErrorMessage("SERROR\0C" + sqlState + "\0M" + message + "\0"));
    }

    @Test
    public void translateWithoutServer() {
        PSQLException stale = serverError("FL001", "fence 1 is older than the stored fence 2");
        SQLException t = Fencelock.translate(stale);
        assertTrue(t instanceof StaleFenceException);
        assertEquals("FL001", t.getSQLState());
        assertEquals("fence 1 is older than the stored fence 2", t.getMessage());
        assertSame(stale, t.getCause());
        assertTrue(Fencelock.translate(serverError("FL002", "x")) instanceof UnfencedException);
        PSQLException other = serverError("22012", "division by zero");
        assertSame(other, Fencelock.translate(other));
    }

    @Test
    public void busy() throws Exception {
        needDatabase();
        try (FencedLease a = FencedLease.acquire(db, resource, Duration.ofSeconds(5), Duration.ZERO)) {
            assertThrows(BusyException.class,
                    () -> FencedLease.acquire(db, resource, Duration.ofSeconds(5), Duration.ZERO));
            FencedLock lock = new FencedLock(db, resource);
            assertFalse(lock.tryLock());
            assertNull(lock.tryLockAndGetToken(100, 5000, TimeUnit.MILLISECONDS));
            a.close();
            assertTrue(a.released());
        }
    }

    @Test
    public void watchdogRenews() throws Exception {
        needDatabase();
        try (FencedLease l = FencedLease.acquire(db, resource, Duration.ofMillis(1200), Duration.ZERO)) {
            l.sleep(Duration.ofMillis(3000));
            assertEquals("held", value("SELECT state FROM fencelock.leases WHERE resource = '" + resource + "'"));
            l.close();
            assertTrue(l.released());
        }
    }

    /** A revoke stops a running statement within ttl/3: cancelled, LeaseLost, release refused. */
    @Test
    public void revokeCancelsRunningStatement() throws Exception {
        needDatabase();
        try (FencedLease l = FencedLease.acquire(db, resource, Duration.ofMillis(1500), Duration.ZERO)) {
            Thread revoker = new Thread(() -> {
                try {
                    Thread.sleep(200);
                    value("SELECT fencelock.revoke('" + resource + "')");
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            revoker.start();
            long t0 = System.nanoTime();
            LeaseLostException e = assertThrows(LeaseLostException.class, () -> l.update("SELECT pg_sleep(30)"));
            long ms = (System.nanoTime() - t0) / 1_000_000;
            revoker.join();
            assertTrue("stopped after " + ms + " ms", ms < 1500);
            assertEquals("57014", e.getCause() instanceof SQLException ? ((SQLException) e.getCause()).getSQLState() : null);
            assertTrue(l.isLost());
            assertThrows(LeaseLostException.class, () -> l.update("SELECT 1"));
            l.close();
            assertFalse(l.released());
        }
    }

    @Test
    public void updateTranslates() throws Exception {
        needDatabase();
        String tbl = "java_test_" + System.nanoTime();
        try (Statement s = admin.createStatement()) {
            s.execute("CREATE TABLE " + tbl + " (id int PRIMARY KEY, v int, fence bigint)");
            s.execute("CREATE TRIGGER fence BEFORE UPDATE ON " + tbl
                    + " FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger('fence')");
            s.execute("INSERT INTO " + tbl + " VALUES (1, 0, 0)");
        }
        try (FencedLease l = FencedLease.acquire(db, resource, Duration.ofSeconds(5), Duration.ZERO)) {
            assertEquals(1, l.update("UPDATE " + tbl + " SET v = 1, fence = ?", l.fence() + 1));
            assertThrows(StaleFenceException.class, () -> l.update("UPDATE " + tbl + " SET v = 2, fence = ?", l.fence()));
            assertThrows(UnfencedException.class, () -> l.update("UPDATE " + tbl + " SET v = 3"));
            SQLException e = assertThrows(SQLException.class, () -> l.update("SELECT 1/0"));
            assertFalse(e instanceof FencelockException);
            assertEquals("22012", e.getSQLState());
        } finally {
            try (Statement s = admin.createStatement()) {
                s.execute("DROP TABLE " + tbl);
            }
        }
    }

    /** RFencedLock's shape and Lock's tryLock/unlock. */
    @Test
    public void fencedLock() throws Exception {
        needDatabase();
        FencedLock lock = new FencedLock(db, resource);
        Long token = lock.tryLockAndGetToken(0, 5, TimeUnit.SECONDS);
        assertNotNull(token);
        assertEquals(token, lock.getToken());
        assertEquals(token.longValue(), lock.lease().fence());
        assertThrows(IllegalStateException.class, () -> lock.tryLock());
        lock.unlock();
        assertNull(lock.getToken());
        assertThrows(IllegalMonitorStateException.class, lock::unlock);
        // A lease lost before unlock: unlock says so.
        assertTrue(lock.tryLock(1, TimeUnit.SECONDS));
        assertTrue(lock.getToken() > token);
        value("SELECT fencelock.revoke('" + resource + "')");
        assertThrows(IllegalMonitorStateException.class, lock::unlock);
    }
}
