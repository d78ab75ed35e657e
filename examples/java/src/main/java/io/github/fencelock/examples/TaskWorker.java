package io.github.fencelock.examples;

import io.github.fencelock.Fencelock;
import io.github.fencelock.LeaseLostException;
import io.github.fencelock.StaleFenceException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Map;
import java.util.Set;

/**
 * A task-table worker: claim, heartbeat, checkpoint carrying the fence, complete or fail. The
 * table, the options and the output are those of examples/python/task_worker.py (the walkthrough
 * table of doc/claim.md; fail() needs a last_error column):
 *
 * <pre>
 * java -cp target/fencelock-0.4.0.jar:/usr/share/java/postgresql.jar fencelock.examples.TaskWorker \
 *     --table tasks --name worker-a --steps 12 --step-time 1 --exit-when-idle
 * </pre>
 *
 * A write refused with FL001 (StaleFenceException) means another worker has the job now: the
 * worker drops it at once and claims the next. Ids starting with "bad-" fail at their second step.
 */
public final class TaskWorker {
    private final Args a;
    private final String name;
    private final String table;
    private final String quotedTable;
    private final double ttl;
    private final Connection conn;

    private TaskWorker(Args a, Connection conn) {
        this.a = a;
        this.name = a.str("name");
        this.table = a.str("table");
        StringBuilder q = new StringBuilder();
        for (String part : table.split("\\.")) {
            if (q.length() > 0) q.append('.');
            q.append('"').append(part.replace("\"", "\"\"")).append('"');
        }
        this.quotedTable = q.toString();
        this.ttl = a.seconds("ttl").toNanos() / 1e9;
        this.conn = conn;
    }

    public static void main(String[] argv) throws Exception {
        Args a = new Args(argv, Set.of("exit-when-idle"), Map.of("table", "tasks", "name", "worker",
                "ttl", "30", "steps", "12", "step-time", "1"));
        // Autocommit: a claim's fence is valid once the claim has committed.
        try (Connection conn = Fencelock.fromEnvironment().connect()) {
            conn.setAutoCommit(true);
            new TaskWorker(a, conn).loop();
        }
    }

    private void loop() throws Exception {
        while (true) {
            String job, checkpoint;
            long fence;
            try (PreparedStatement ps = conn.prepareStatement("SELECT id, checkpoint, fence FROM fencelock.claim(NULL::"
                    + quotedTable + ", ?, pg_catalog.make_interval(secs => ?))")) {
                ps.setString(1, name);
                ps.setDouble(2, ttl);
                try (ResultSet rs = Fencelock.translated(ps::executeQuery)) {
                    if (!rs.next()) {
                        if (a.flag("exit-when-idle")) {
                            say("no job left");
                            return;
                        }
                        Thread.sleep(1000);
                        continue;
                    }
                    job = rs.getString(1);
                    checkpoint = rs.getString(2);
                    fence = rs.getLong(3);
                }
            }
            say("claimed " + job + " with fence " + fence + ", checkpoint " + checkpoint);
            try {
                try {
                    work(job, checkpoint, fence);
                    say("completed " + job);
                } catch (StaleFenceException | LeaseLostException e) {
                    throw e;
                } catch (Exception e) { // the work failed: ready again (or dead at max_attempts)
                    String state = call("SELECT fencelock.fail(?::pg_catalog.regclass, ?::pg_catalog.text, ?, ?)",
                            String.class, table, job, fence, e.getMessage());
                    say("failed " + job + ": " + e.getMessage() + "; now " + state);
                }
            } catch (StaleFenceException | LeaseLostException e) {
                // taken over: never retry it
                say("dropped " + job + ": " + e.getClass().getSimpleName() + ": " + e.getMessage());
            }
        }
    }

    private void work(String job, String checkpoint, long fence) throws Exception {
        int step = checkpoint == null ? 0 : Integer.parseInt(checkpoint.split("-")[1]);
        long beat = System.nanoTime();
        Duration stepTime = a.seconds("step-time");
        while (step < a.integer("steps")) {
            Thread.sleep(stepTime.toMillis()); // the work
            step++;
            if (job.startsWith("bad-") && step == 2) {
                throw new IllegalStateException("cannot process " + job);
            }
            call("UPDATE " + quotedTable + " SET checkpoint = ?, fence = ? WHERE id = ?", null,
                    "step-" + step, fence, job);
            say("checkpoint step-" + step);
            if (System.nanoTime() - beat >= ttl * 1e9 / 3) {
                Boolean ok = call("SELECT fencelock.heartbeat(?::pg_catalog.regclass, ?::pg_catalog.text, ?, "
                        + "pg_catalog.make_interval(secs => ?))", Boolean.class, table, job, fence, ttl);
                if (!ok) {
                    throw new LeaseLostException(job + " is not running any more", null);
                }
                beat = System.nanoTime();
            }
        }
        conn.setAutoCommit(false); // the result and the completion in one transaction
        try {
            call("UPDATE " + quotedTable + " SET result = ?, fence = ? WHERE id = ?", null,
                    name + "'s result", fence, job);
            call("SELECT fencelock.complete(?::pg_catalog.regclass, ?::pg_catalog.text, ?)", Boolean.class,
                    table, job, fence);
            conn.commit();
        } catch (SQLException e) {
            conn.rollback();
            throw e;
        } finally {
            conn.setAutoCommit(true);
        }
    }

    /** One statement, FL001/FL002 translated; its single value (type null: none). */
    private <T> T call(String sql, Class<T> type, Object... params) throws SQLException {
        return Fencelock.translated(() -> {
            try (PreparedStatement ps = conn.prepareStatement(sql)) {
                for (int i = 0; i < params.length; i++) {
                    ps.setObject(i + 1, params[i]);
                }
                if (type == null) {
                    ps.executeUpdate();
                    return null;
                }
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    return rs.getObject(1, type);
                }
            }
        });
    }

    private void say(String msg) {
        FencedJob.say(name, msg);
    }
}
