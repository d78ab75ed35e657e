package io.github.fencelock;

import java.sql.SQLException;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * A fenced lock in the shape of Redisson's {@code RFencedLock}, and a
 * {@link java.util.concurrent.locks.Lock} for code written against that interface.
 *
 * <pre>{@code
 * FencedLock lock = new FencedLock(Fencelock.fromEnvironment(), "report:daily");
 * Long token = lock.tryLockAndGetToken(5, 30, TimeUnit.SECONDS);   // null: busy after 5 s
 * if (token != null) {
 *     try {
 *         lock.lease().update("UPDATE reports SET ..., last_fence = ? WHERE ...", token);
 *     } finally {
 *         lock.unlock();
 *     }
 * }
 * }</pre>
 *
 * Unlike Redisson, where giving a leaseTime turns its watchdog off, the lease is always renewed
 * every leaseTime/3 while held: leaseTime bounds how long a holder that died or froze keeps it.
 * The token is checked by the database (the fence trigger, assert_fence), not left to the caller.
 * One owner token per FencedLock object (its name and a random UUID), used by every lease it takes,
 * so an acquire sent again after a lost reply gets the same fence. One lease at a time, not reentrant: a second tryLock while held throws
 * IllegalStateException. Errors of the database come back from the Lock methods wrapped in
 * {@link UncheckedSQLException}; the RFencedLock-shaped ones throw them as SQLException.
 */
public final class FencedLock implements Lock {
    /** The leaseTime of the {@link Lock} methods: 30 seconds, renewed every 10. */
    public static final Duration DEFAULT_LEASE_TIME = Duration.ofSeconds(30);

    private final Fencelock.ConnectionFactory db;
    private final String name;
    private final String owner;
    private FencedLease lease;

    public FencedLock(Fencelock.ConnectionFactory db, String name) {
        this.db = db;
        this.name = name;
        this.owner = name + ":" + java.util.UUID.randomUUID();
    }

    /** The owner token of every lease this lock takes. */
    public String getOwner() {
        return owner;
    }

    public String getName() {
        return name;
    }

    /**
     * Waits up to {@code waitTime} for the lock and holds it with a lease of {@code leaseTime};
     * the fence, or null when another owner still held it at the deadline.
     */
    public synchronized Long tryLockAndGetToken(long waitTime, long leaseTime, TimeUnit unit)
            throws SQLException {
        if (lease != null) {
            throw new IllegalStateException(name + " is already held by this FencedLock");
        }
        try {
            lease = FencedLease.acquire(db, name, owner, Duration.ofNanos(unit.toNanos(leaseTime)),
                    Duration.ofNanos(unit.toNanos(waitTime)));
        } catch (BusyException e) {
            return null;
        }
        return lease.fence();
    }

    /** The fence of the held lock, or null when not held. */
    public synchronized Long getToken() {
        return lease == null ? null : lease.fence();
    }

    /** The held lease (its connection, fence, lost flag), or null. */
    public synchronized FencedLease lease() {
        return lease;
    }

    public synchronized boolean isLocked() {
        return lease != null && !lease.isLost();
    }

    @Override
    public boolean tryLock() {
        return tryLock(0, TimeUnit.SECONDS);
    }

    @Override
    public boolean tryLock(long time, TimeUnit unit) {
        try {
            return tryLockAndGetToken(unit.toNanos(time), DEFAULT_LEASE_TIME.toNanos(), TimeUnit.NANOSECONDS)
                    != null;
        } catch (SQLException e) {
            throw new UncheckedSQLException(e);
        }
    }

    /** Waits for the lock without end (in 10-second waits, so an interrupt is seen between them). */
    @Override
    public void lock() {
        while (true) {
            try {
                if (tryLockAndGetToken(10, DEFAULT_LEASE_TIME.toSeconds(), TimeUnit.SECONDS) != null) {
                    return;
                }
            } catch (SQLException e) {
                throw new UncheckedSQLException(e);
            }
        }
    }

    @Override
    public void lockInterruptibly() throws InterruptedException {
        while (true) {
            if (Thread.interrupted()) {
                throw new InterruptedException();
            }
            try {
                if (tryLockAndGetToken(1, DEFAULT_LEASE_TIME.toSeconds(), TimeUnit.SECONDS) != null) {
                    return;
                }
            } catch (SQLException e) {
                throw new UncheckedSQLException(e);
            }
        }
    }

    /**
     * Releases the lease and closes its connections. Throws IllegalMonitorStateException when
     * the lock is not held, or when the lease had been lost before (the release found it gone):
     * the work done under it since may have been refused.
     */
    @Override
    public synchronized void unlock() {
        if (lease == null) {
            throw new IllegalMonitorStateException(name + " is not held by this FencedLock");
        }
        FencedLease l = lease;
        lease = null;
        try {
            l.close();
        } catch (SQLException e) {
            throw new UncheckedSQLException(e);
        }
        if (!l.released()) {
            throw new IllegalMonitorStateException(name + ": the lease was lost before unlock ("
                    + (l.lostReason() != null ? l.lostReason() : "it expired or was taken over") + ")");
        }
    }

    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("a fenced lock has no conditions");
    }
}
