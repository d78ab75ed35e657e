package io.github.fencelock.examples;

import io.github.fencelock.BusyException;
import io.github.fencelock.FencedLease;
import io.github.fencelock.FencedStep;
import io.github.fencelock.Fencelock;
import io.github.fencelock.LeaseLostException;
import io.github.fencelock.StaleFenceException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

/**
 * A fenced job: one worker at a time runs it; a paused worker's late writes are refused. The
 * table and the exit statuses are those of examples/python/fenced_job.py:
 *
 * <pre>
 * CREATE TABLE report_runs (resource text PRIMARY KEY, step integer, written_by text,
 *                           last_fence bigint);
 * CREATE TRIGGER fence BEFORE UPDATE ON report_runs FOR EACH ROW
 *     EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
 * INSERT INTO report_runs (resource) VALUES ('report:daily');
 *
 * java -cp target/fencelock-0.4.0.jar:/usr/share/java/postgresql.jar fencelock.examples.FencedJob \
 *     --name worker-a --ttl 30 --steps 5 --work 2
 * java ... fencelock.examples.FencedJob --name worker-a --ttl 30 --steps 1 --one-step
 * </pre>
 *
 * {@code --one-step} runs the job as {@link FencedStep} (one transaction, no watchdog), with
 * {@code --hold-file} and {@code --fail-at} as in examples/python/fenced_job.py; exit 5 when
 * the job failed (nothing committed).
 *
 * Connection settings come from PG* environment variables. Exit status: 0 done, 2 busy, 3 lease
 * lost (the watchdog stopped the work), 4 stale fence (a write was refused with FL001).
 */
public final class FencedJob {
    public static void main(String[] argv) throws Exception {
        Args a = new Args(argv, Set.of("one-step"), Map.of("resource", "report:daily", "name", "worker",
                "ttl", "30", "wait", "0", "steps", "5", "work", "1", "hold-file", "", "fail-at", "0"));
        String name = a.str("name");
        if (a.flag("one-step")) {
            System.exit(oneStep(a, name));
        }
        FencedLease lease;
        try {
            lease = FencedLease.acquire(Fencelock.fromEnvironment(), a.str("resource"),
                    name + ":" + UUID.randomUUID(), a.seconds("ttl"), a.seconds("wait"));
        } catch (BusyException e) {
            say(name, "busy: " + e.getMessage());
            System.exit(2);
            return;
        }
        int status = 0;
        String outcome = "done";
        try (lease) {
            say(name, "acquired " + a.str("resource") + " with fence " + lease.fence());
            for (int step = 1; step <= a.integer("steps"); step++) {
                // Every write carries the fence: after a takeover it is refused (StaleFence).
                lease.update("UPDATE report_runs SET step = ?, written_by = ?, last_fence = ? WHERE resource = ?",
                        step, name, lease.fence(), a.str("resource"));
                say(name, "step " + step + " written with fence " + lease.fence());
                lease.sleep(a.seconds("work")); // the work; throws at once if the lease is lost
            }
        } catch (LeaseLostException e) {
            status = 3;
            outcome = "lease lost, work stopped: " + e.getMessage();
        } catch (StaleFenceException e) {
            status = 4;
            outcome = "stale fence, stopped: " + e.getMessage();
        }
        say(name, outcome + "; released: " + lease.released());
        System.exit(status);
    }

    /** The job as one FencedStep: its --work is spent idle inside the transaction. */
    static int oneStep(Args a, String name) throws Exception {
        String resource = a.str("resource");
        try (Connection c = Fencelock.fromEnvironment().connect()) {
            FencedStep.run(c, resource, name + ":" + UUID.randomUUID(), a.seconds("ttl"), a.seconds("wait"), (conn, fence) -> {
                say(name, "acquired " + resource + " with fence " + fence);
                try (PreparedStatement ps = conn.prepareStatement(
                        "UPDATE report_runs SET step = ?, written_by = ?, last_fence = ? WHERE resource = ?")) {
                    for (int step = 1; step <= a.integer("steps"); step++) {
                        ps.setInt(1, step);
                        ps.setString(2, name);
                        ps.setLong(3, fence);
                        ps.setString(4, resource);
                        ps.executeUpdate();
                        say(name, "step " + step + " written with fence " + fence);
                        if (step == a.integer("fail-at")) {
                            throw new IllegalStateException("failed after step " + step);
                        }
                        try {
                            Thread.sleep(a.seconds("work").toMillis()); // idle in the transaction
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                            throw new IllegalStateException("interrupted");
                        }
                    }
                }
                try (Statement s = conn.createStatement()) {
                    while (!a.str("hold-file").isEmpty() && !Files.exists(Path.of(a.str("hold-file")))) {
                        s.execute("SELECT pg_catalog.pg_sleep(0.1)");
                    }
                }
                return null;
            });
            say(name, "done; released: true");
            return 0;
        } catch (BusyException e) {
            say(name, "busy: " + e.getMessage());
            return 2;
        } catch (LeaseLostException e) {
            say(name, "lease lost, nothing committed: " + e.getMessage());
            return 3;
        } catch (StaleFenceException e) {
            say(name, "stale fence, nothing committed: " + e.getMessage());
            return 4;
        } catch (IllegalStateException e) {
            say(name, "failed, nothing committed: " + e.getMessage());
            return 5;
        }
    }

    static void say(String name, String msg) {
        System.out.println(name + ": " + msg);
        System.out.flush();
    }
}
