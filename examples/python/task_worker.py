#!/usr/bin/env python3
"""A task-table worker: claim, heartbeat, checkpoint carrying the fence, complete or fail.

The table follows doc/claim.md's walkthrough (attempt_id for the attempt column), to
which fail() needs a last_error text column (and max_attempts, not to retry for ever):

    CREATE TABLE tasks (id text PRIMARY KEY, state text NOT NULL DEFAULT 'ready',
                        lease_owner text, lease_until timestamptz,
                        attempt_id integer NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0,
                        checkpoint text, result text);
    SELECT fencelock.enable_tasks('tasks', attempt_col => 'attempt_id');

    python3 task_worker.py --table tasks --name worker-a --steps 12 --step-time 1 --exit-when-idle

A job runs --steps steps, resuming after its last checkpoint; ids starting with "bad-" fail at
their second step (to show fail()).  A write refused with FL001 (StaleFence) means another
worker has the job now: the worker drops it at once and claims the next.
"""

import argparse
import sys
import time

import psycopg
from psycopg import sql

import fencelock


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dsn", default="")
    p.add_argument("--table", default="tasks")
    p.add_argument("--name", default="worker")
    p.add_argument("--ttl", type=float, default=30.0, help="lease seconds; heartbeat every ttl/3")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--step-time", type=float, default=1.0)
    p.add_argument("--exit-when-idle", action="store_true")
    a = p.parse_args()
    say = lambda msg: print(f"{a.name}: {msg}", flush=True)  # noqa: E731
    tbl = sql.Identifier(*a.table.split("."))
    ttl = f"{a.ttl} s"

    # Autocommit: a claim's fence is valid once the claim has committed.
    with psycopg.connect(a.dsn, autocommit=True) as conn:
        def run(query, params):
            with fencelock.translated():
                return conn.execute(query, params)

        def work(job, checkpoint, fence):
            step = int(checkpoint.split("-")[1]) if checkpoint else 0
            beat = time.monotonic()
            while step < a.steps:
                time.sleep(a.step_time)  # the work
                step += 1
                if job.startswith("bad-") and step == 2:
                    raise RuntimeError(f"cannot process {job}")
                run(sql.SQL("UPDATE {} SET checkpoint = %s, fence = %s WHERE id = %s")
                    .format(tbl), [f"step-{step}", fence, job])
                say(f"checkpoint step-{step}")
                if time.monotonic() - beat >= a.ttl / 3:
                    if not run("SELECT fencelock.heartbeat(%s, %s, %s, %s)",
                               [a.table, job, fence, ttl]).fetchone()[0]:
                        raise fencelock.LeaseLost(f"{job} is not running any more")
                    beat = time.monotonic()
            with conn.transaction(), fencelock.translated():  # result and completion together
                conn.execute(sql.SQL("UPDATE {} SET result = %s, fence = %s WHERE id = %s")
                             .format(tbl), [f"{a.name}'s result", fence, job])
                conn.execute("SELECT fencelock.complete(%s, %s, %s)", [a.table, job, fence])

        while True:
            row = run(sql.SQL("SELECT id, checkpoint, fence FROM fencelock.claim(NULL::{}, %s, %s)")
                      .format(tbl), [a.name, ttl]).fetchone()
            if row is None:
                if a.exit_when_idle:
                    say("no job left")
                    return 0
                time.sleep(1)
                continue
            job, checkpoint, fence = row
            say(f"claimed {job} with fence {fence}, checkpoint {checkpoint}")
            try:
                try:
                    work(job, checkpoint, fence)
                    say(f"completed {job}")
                except (fencelock.StaleFence, fencelock.LeaseLost):
                    raise
                except Exception as e:  # the work failed: ready again (or dead at max_attempts)
                    state = run("SELECT fencelock.fail(%s, %s, %s, %s)",
                                [a.table, job, fence, str(e)]).fetchone()[0]
                    say(f"failed {job}: {e}; now {state}")
            except (fencelock.StaleFence, fencelock.LeaseLost) as e:
                say(f"dropped {job}: {type(e).__name__}: {e}")  # taken over: never retry it


if __name__ == "__main__":
    sys.exit(main())
