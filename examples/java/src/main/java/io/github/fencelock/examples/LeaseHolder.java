package io.github.fencelock.examples;

import io.github.fencelock.BusyException;
import io.github.fencelock.FencedLease;
import io.github.fencelock.Fencelock;
import io.github.fencelock.LeaseLostException;
import java.sql.SQLException;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;

/**
 * The program the fault scenarios of doc/clients.md drive. It acquires --resource as --owner for
 * --ttl seconds (connection settings from the PG* variables, application_name the owner token),
 * (waiting up to --wait seconds), then holds the lease for --hold seconds while the library renews
 * it: in the lease's sleep, or with --query running a statement that long (pg_sleep) through the
 * lease, which the lease cancels on loss; a statement whose connection broke while the lease held
 * is run again for the time left (a "work:" line). Lines on stdout:
 *
 * <pre>
 * acquired R with fence N at EPOCH_MS
 * busy                                          (exit 2)
 * lost at EPOCH_MS: LeaseLostException: ...     (exit 3)
 * held; released: true|false                   (exit 0)
 * </pre>
 */
public final class LeaseHolder {
    public static void main(String[] argv) throws Exception {
        Args a = new Args(argv, Set.of("query"),
                Map.of("resource", "fault", "owner", "", "ttl", "3", "wait", "0", "hold", "10"));
        String resource = a.str("resource");
        Map<String, String> env = new HashMap<>(System.getenv());
        env.put("PGAPPNAME", a.str("owner"));
        FencedLease lease;
        try {
            lease = FencedLease.acquire(Fencelock.fromEnvironment(env), resource, a.str("owner"),
                    a.seconds("ttl"), a.seconds("wait"));
        } catch (BusyException e) {
            System.out.println("busy");
            System.exit(2);
            return;
        }
        say("acquired " + resource + " with fence " + lease.fence() + " at " + System.currentTimeMillis());
        Exception loss = null;
        try {
            if (a.flag("query")) {
                long end = System.nanoTime() + a.seconds("hold").toNanos();
                for (long left; (left = end - System.nanoTime()) > 0;) {
                    try {
                        lease.update("SELECT pg_catalog.pg_sleep(?)", left / 1e9);
                    } catch (LeaseLostException e) {
                        throw e;
                    } catch (SQLException e) {
                        // The connection broke and the lease was renewed meanwhile (else this would
                        // be LeaseLostException): go on, on a new connection.
                        say("work: " + e.getSQLState() + " " + e.getMessage() + "; the lease holds, again");
                    }
                }
            } else {
                lease.sleep(a.seconds("hold"));
            }
        } catch (Exception e) { // the type is what the scenario checks: LeaseLostException
            loss = e;
            say("lost at " + System.currentTimeMillis() + ": " + e.getClass().getSimpleName() + ": " + e.getMessage());
        }
        lease.close(); // never throws for a lost lease: the loss stands
        if (loss != null) {
            System.exit(loss instanceof LeaseLostException ? 3 : 1);
        }
        say("held; released: " + lease.released());
        System.exit(0);
    }

    static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
