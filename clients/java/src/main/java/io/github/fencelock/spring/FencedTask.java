package io.github.fencelock.spring;

import io.github.fencelock.BusyException;
import io.github.fencelock.FencedLease;
import io.github.fencelock.Fencelock;
import io.github.fencelock.UncheckedSQLException;
import java.sql.SQLException;
import java.time.Duration;
import java.util.concurrent.ScheduledFuture;
import java.util.function.Consumer;
import org.springframework.scheduling.TaskScheduler;
import org.springframework.scheduling.Trigger;

/**
 * A scheduled task that runs only while it holds a fencelock lease: give it to Spring's
 * {@link TaskScheduler} (a {@code ThreadPoolTaskScheduler} with a {@code CronTrigger} or a fixed
 * rate, or a {@code SchedulingConfigurer}'s registrar) in every replica, and each tick runs in
 * one of them only.
 *
 * <pre>{@code
 * FencedTask task = new FencedTask(Fencelock.fromEnvironment(), "report:daily",
 *         Duration.ofSeconds(30), lease -> {
 *             lease.update("UPDATE reports SET done = now(), last_fence = ? WHERE id = 1",
 *                          lease.fence());            // each write carries the fence
 *         });
 * task.schedule(scheduler, new CronTrigger("0 0 3 * * *"));
 * }</pre>
 *
 * Each run takes the lease with {@link FencedLease#acquire} without waiting. A tick that finds it
 * held by another owner skips (the {@link #onBusy} callback, nothing by default). While the body
 * runs, the lease's watchdog renews it; on loss the body's {@link FencedLease#sleep},
 * {@link FencedLease#check} and running statement throw
 * {@link io.github.fencelock.LeaseLostException}, exactly as for a {@link FencedLease} used by
 * hand. What the body throws reaches Spring's error handler (logged, the schedule goes on) as an
 * {@link UncheckedSQLException} for an SQLException, as itself for a RuntimeException; the
 * lease is released after the body either way, and a failing release never replaces the body's
 * exception.
 *
 * <p>Spring is an optional dependency of the library: only this package needs it (Spring
 * Framework 4.3 or later; {@link TaskScheduler} and {@link Trigger} alone, no proxies).
 */
public final class FencedTask implements Runnable {
    /** The task's work, given the lease it holds; carry {@link FencedLease#fence()} in its writes. */
    @FunctionalInterface
    public interface FencedBody {
        void run(FencedLease lease) throws Exception;
    }

    private final Fencelock.ConnectionFactory db;
    private final String resource;
    private final Duration ttl;
    private final FencedBody body;
    private volatile Consumer<BusyException> onBusy = busy -> {};

    /** ttl: the lease's; the watchdog renews it every ttl/3, loss is reported by ttl. */
    public FencedTask(Fencelock.ConnectionFactory db, String resource, Duration ttl, FencedBody body) {
        if (ttl.isNegative() || ttl.isZero()) {
            throw new IllegalArgumentException("ttl must be positive");
        }
        this.db = db;
        this.resource = resource;
        this.ttl = ttl;
        this.body = body;
    }

    /** Called on a tick that skips because another owner holds the lease. */
    public FencedTask onBusy(Consumer<BusyException> callback) {
        this.onBusy = callback;
        return this;
    }

    public String resource() {
        return resource;
    }

    /** {@code scheduler.schedule(this, trigger)}: the ticks of a cron expression or a period. */
    public ScheduledFuture<?> schedule(TaskScheduler scheduler, Trigger trigger) {
        return scheduler.schedule(this, trigger);
    }

    @Override
    public void run() {
        FencedLease lease;
        try {
            lease = FencedLease.acquire(db, resource, ttl, Duration.ZERO);
        } catch (BusyException busy) {
            onBusy.accept(busy);
            return;
        } catch (SQLException e) {
            throw new UncheckedSQLException(e);
        }
        Throwable failed = null;
        try {
            body.run(lease);
        } catch (Exception e) {
            failed = e;
        } catch (Error e) {
            failed = e;
            throw e;
        } finally {
            try {
                lease.close();
            } catch (SQLException | RuntimeException e) {
                if (failed == null) {
                    failed = e;
                } else {
                    failed.addSuppressed(e); // the body's exception stays the one reported
                }
            }
        }
        if (failed instanceof SQLException) {
            throw new UncheckedSQLException((SQLException) failed);
        } else if (failed instanceof RuntimeException) {
            throw (RuntimeException) failed;
        } else if (failed != null) {
            throw new IllegalStateException(failed.getMessage(), failed);
        }
    }
}
