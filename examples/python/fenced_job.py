#!/usr/bin/env python3
"""A fenced job: one worker at a time runs it; a paused worker's late writes are refused.

It writes its progress into a fenced table (the fence trigger refuses an older fence):

    CREATE TABLE report_runs (resource text PRIMARY KEY, step integer, written_by text,
                              last_fence bigint);
    CREATE TRIGGER fence BEFORE UPDATE ON report_runs FOR EACH ROW
        EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
    INSERT INTO report_runs (resource) VALUES ('report:daily');

    python3 fenced_job.py --name worker-a --ttl 30 --steps 5 --work 2

Connection settings come from PG* environment variables (or --dsn).  Exit status: 0 done,
2 busy (another worker holds the lease), 3 lease lost (the watchdog stopped the work),
4 stale fence (a write was refused with FL001: a newer holder exists).
"""

import argparse
import sys
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
    a = p.parse_args()

    def say(msg):
        print(f"{a.name}: {msg}", flush=True)

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


if __name__ == "__main__":
    sys.exit(main())
