// fencelock's FencedTask under Spring's ThreadPoolTaskScheduler (scripts/test-clients.sh; run as
// a single-file program on the installed library, PgJDBC and Debian's Spring 4.3 jars).
//
//   java -cp ... SpringTask.java NAME RESOURCE SECONDS WORK_MS
//
// Schedules the task with CronTrigger("* * * * * *") for SECONDS seconds.  Each tick that runs
// writes step 1 and, WORK_MS later (lease.sleep: woken at the loss), step 2 into report_runs,
// both with its fence; prints "NAME: ran SECOND fence F", "NAME: skipped SECOND", "NAME: started
// SECOND" and, on loss, "NAME: lost SECOND LeaseLostException: ..." and what became of the
// run's late step-2 write with its fence ("late write refused FL001" or "late write went in").
// FL_SPRING_PLAIN=1: the same body as a plain Runnable (a made-up fence, no lease), to see the
// checks fail; the suite never sets it.
import io.github.fencelock.FencedLease;
import io.github.fencelock.Fencelock;
import io.github.fencelock.LeaseLostException;
import io.github.fencelock.spring.FencedTask;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.concurrent.ScheduledFuture;
import org.springframework.scheduling.concurrent.ThreadPoolTaskScheduler;
import org.springframework.scheduling.support.CronTrigger;

public class SpringTask {
    static final String STEP =
            "UPDATE report_runs SET step = ?, written_by = ?, last_fence = ? WHERE resource = ?";

    static long second() {
        return System.currentTimeMillis() / 1000;
    }

    static void write(Connection c, int step, String name, long fence, String resource) throws SQLException {
        try (PreparedStatement st = c.prepareStatement(STEP)) {
            st.setInt(1, step);
            st.setString(2, name);
            st.setLong(3, fence);
            st.setString(4, resource);
            st.executeUpdate();
        }
    }

    public static void main(String[] args) throws Exception {
        String name = args[0], resource = args[1];
        long seconds = (long) (Double.parseDouble(args[2]) * 1000), workMs = Long.parseLong(args[3]);
        Fencelock.ConnectionFactory db = Fencelock.fromEnvironment();
        Runnable task;
        if (System.getenv("FL_SPRING_PLAIN") != null) {
            task = () -> { // no lease: every instance runs every tick, nothing stops a revoked run
                long s = second();
                long fence = System.currentTimeMillis() * 1000 + ProcessHandle.current().pid() % 1000;
                System.out.println(name + ": started " + s);
                try (Connection c = db.connect()) {
                    write(c, 1, name, fence, resource);
                    Thread.sleep(workMs);
                    write(c, 2, name, fence, resource);
                    System.out.println(name + ": ran " + s + " fence " + fence);
                } catch (Exception e) {
                    System.out.println(name + ": failed " + s + " " + e);
                }
            };
        } else {
            task = new FencedTask(db, resource, Duration.ofSeconds(3), lease -> {
                long s = second();
                System.out.println(name + ": started " + s);
                lease.update(STEP, 1, name, lease.fence(), resource);
                try {
                    lease.sleep(Duration.ofMillis(workMs));
                } catch (LeaseLostException lost) {
                    System.out.println(name + ": lost " + s + " LeaseLostException: " + lost.getMessage());
                    lateWrite(db, name, lease, resource);
                    throw lost;
                }
                lease.update(STEP, 2, name, lease.fence(), resource);
                System.out.println(name + ": ran " + s + " fence " + lease.fence());
            }).onBusy(busy -> System.out.println(name + ": skipped " + second()));
        }
        try (Connection warm = db.connect()) { // PgJDBC loaded before the first tick
            warm.isValid(1);
        }
        ThreadPoolTaskScheduler scheduler = new ThreadPoolTaskScheduler();
        scheduler.setPoolSize(2);
        scheduler.setThreadNamePrefix(name + "-");
        scheduler.setErrorHandler(e -> System.out.println(name + ": task failed: " + e));
        scheduler.setWaitForTasksToCompleteOnShutdown(true);
        scheduler.setAwaitTerminationSeconds(30);
        scheduler.initialize();
        ScheduledFuture<?> ticks = scheduler.schedule(task, new CronTrigger("* * * * * *"));
        Thread.sleep(seconds);
        ticks.cancel(false); // no more ticks; a running one finishes
        scheduler.shutdown();
        System.out.println(name + ": done");
    }

    /** What a body that ignored the loss would write next: fencelock must refuse it. */
    static void lateWrite(Fencelock.ConnectionFactory db, String name, FencedLease lease, String resource) {
        try (Connection c = db.connect()) { // assert_fence: as lease-bound writes check the fence
            c.setAutoCommit(false);
            try (PreparedStatement st = c.prepareStatement("SELECT fencelock.assert_fence(?, ?)")) {
                st.setString(1, resource);
                st.setLong(2, lease.fence());
                st.execute();
            }
            write(c, 2, name, lease.fence(), resource);
            c.commit();
            System.out.println(name + ": late write went in");
        } catch (SQLException e) {
            System.out.println(name + ": late write refused " + e.getSQLState() + " " + e.getMessage());
        }
    }
}
