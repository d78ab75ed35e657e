#!/usr/bin/env python3
"""A fenced job: one worker at a time runs it; a paused worker's late writes are refused.

It writes its progress into a fenced table (the fence trigger refuses an older fence):

    CREATE TABLE report_runs (resource text PRIMARY KEY, step integer, written_by text,
                              last_fence bigint);
    CREATE TRIGGER fence BEFORE UPDATE ON report_runs FOR EACH ROW
        EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
    INSERT INTO report_runs (resource) VALUES ('report:daily');

    python3 fenced_job.py --name worker-a --ttl 30 --steps 5 --work 2
    python3 fenced_job.py --name worker-a --ttl 30 --steps 1 --one-step

--one-step runs the job as fencelock.fenced_step: the grant, the writes and the release in one
transaction on one connection, no watchdog (for work that is writes in this database and takes
less than the TTL).  Its --work is spent idle inside the transaction: past the TTL the server
ends the session, nothing of the job remains and it exits 3.  --hold-file PATH: after the
writes, wait (polling the server every 0.1 s, so the session is not idle) until PATH exists;
--fail-at STEP: raise an error after writing that step (the transaction rolls back).

Connection settings come from PG* environment variables (or --dsn).  Exit status: 0 done,
2 busy (another worker holds the lease), 3 lease lost (the watchdog stopped the work),
4 stale fence (a write was refused with FL001: a newer holder exists).
"""

import argparse
import os
import sys
import time
import uuid

import fencelock


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dsn", default="")
    p.add_argument("--resource", default="report:daily")
    p.add_argument("--name", default="worker")
    p.add_argument("--ttl", type=float, default=30.0, help="lease seconds; renewed every ttl/3")
    p.add_argument("--wait", type=float, default=0.0, help="seconds to wait for the lease")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--work", type=float, default=1.0, help="seconds of work after each write")
    p.add_argument("--one-step", action="store_true", help="one transaction, no watchdog")
    p.add_argument("--hold-file", help="--one-step: before committing, wait until this exists")
    p.add_argument("--fail-at", type=int, default=0, help="--one-step: fail after this step")
    a = p.parse_args()

    def say(msg):
        print(f"{a.name}: {msg}", flush=True)

    if a.one_step:
        return one_step(a, say)
    try:
        with fencelock.Lease(a.dsn, a.resource, owner=f"{a.name}:{uuid.uuid4()}",
                             ttl=a.ttl, wait=a.wait) as lease:
            say(f"acquired {a.resource} with fence {lease.fence}")
            for step in range(1, a.steps + 1):
                # Every write carries the fence: after a takeover it is refused (StaleFence).
                lease.execute("UPDATE report_runs SET step = %s, written_by = %s, last_fence = %s"
                              " WHERE resource = %s", [step, a.name, lease.fence, a.resource])
                say(f"step {step} written with fence {lease.fence}")
                lease.sleep(a.work)  # the work; wakes at once if the watchdog lost the lease
        say(f"done; released: {lease.released}")
        return 0
    except fencelock.Busy as e:
        say(f"busy: {e}")
        return 2
    except fencelock.LeaseLost as e:
        say(f"lease lost, work stopped: {e}; released: {lease.released}")
        return 3
    except fencelock.StaleFence as e:
        say(f"stale fence, stopped: {e}; released: {lease.released}")
        return 4


def one_step(a, say):
    def job(conn, fence):
        say(f"acquired {a.resource} with fence {fence}")
        for step in range(1, a.steps + 1):
            conn.execute("UPDATE report_runs SET step = %s, written_by = %s, last_fence = %s"
                         " WHERE resource = %s", [step, a.name, fence, a.resource])
            say(f"step {step} written with fence {fence}")
            if step == a.fail_at:
                raise RuntimeError(f"failed after step {step}")
            time.sleep(a.work)  # idle in the transaction: past the TTL the server ends it
        while a.hold_file and not os.path.exists(a.hold_file):
            conn.execute("SELECT pg_catalog.pg_sleep(0.1)")

    try:
        fencelock.fenced_step(a.dsn, a.resource, job, ttl=a.ttl, wait=a.wait,
                              owner=f"{a.name}:{uuid.uuid4()}")
        say("done; released: True")
        return 0
    except fencelock.Busy as e:
        say(f"busy: {e}")
        return 2
    except fencelock.LeaseLost as e:
        say(f"lease lost, nothing committed: {e}")
        return 3
    except fencelock.StaleFence as e:
        say(f"stale fence, nothing committed: {e}")
        return 4
    except RuntimeError as e:
        say(f"failed, nothing committed: {e}")
        return 5


if __name__ == "__main__":
    sys.exit(main())
