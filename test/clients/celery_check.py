"""fencelock.celery.fenced_task under a real Celery worker (scripts/test-clients.sh).

    celery_check.py WORKDIR PYTHON

Starts `PYTHON -m celery -A celery_app worker` (prefork pool, two processes; broker and results
on the filesystem, see celery_app.py), sends it tasks, and writes one line per check to
WORKDIR/checks: "0|1 <TAB> description".  The database: PG* variables, table report_runs of
scripts/test-clients.sh, resource report:celery.
"""

import os
import signal
import subprocess
import sys
import time

import celery
import psycopg

work, python = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
os.environ["FL_CELERY_DIR"] = work
for sub in ("queue", "processed", "backend"):
    os.makedirs(os.path.join(work, sub), exist_ok=True)
sys.path.insert(0, here)
import celery_app  # noqa: E402

RES = "report:celery"
results = open(os.path.join(work, "checks"), "w")
db = psycopg.connect("", autocommit=True)


def check(desc, ok):
    results.write(f"{0 if ok else 1}\t{desc}\n")
    results.flush()


def row():
    return db.execute("SELECT step, written_by, last_fence FROM report_runs WHERE resource = %s",
                      [RES]).fetchone()


def wait_for(cond, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def outcome(r, timeout=20):
    """("ok", value) or ("error", exception) of a task's result."""
    try:
        return "ok", r.get(timeout=timeout, propagate=True)
    except Exception as e:  # the task's exception, rebuilt by Celery
        return "error", e


log = open(os.path.join(work, "worker.log"), "w")
worker = subprocess.Popen(
    [python, "-m", "celery", "-A", "celery_app", "worker", "--pool", "prefork", "--concurrency", "2",
     "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "info"],
    cwd=here, env=dict(os.environ, PYTHONPATH=here), stdout=log, stderr=subprocess.STDOUT)
try:
    t0 = time.monotonic()
    ready = wait_for(lambda: "ready." in open(os.path.join(work, "worker.log")).read(), 30)
    check(f"python celery: a Celery {celery.__version__} worker "
          f"(prefork, 2 processes, filesystem broker) starts with fenced_task's tasks "
          f"({time.monotonic() - t0:.1f} s)", ready)
    if not ready:
        sys.exit(1)

    # 1. Two tasks for the same resource at once: one runs under the lease, the other skips.
    r1 = celery_app.report.delay(RES, "celery-a", 1.5)
    r2 = celery_app.report.delay(RES, "celery-b", 1.5)
    (s1, v1), (s2, v2) = outcome(r1), outcome(r2)
    ran = [(n, v) for n, s, v in (("celery-a", s1, v1), ("celery-b", s2, v2)) if s == "ok" and v is not None]
    skipped = [n for n, s, v in (("celery-a", s1, v1), ("celery-b", s2, v2)) if s == "ok" and v is None]
    got = row()
    check(f"python celery: two tasks for one resource sent at once: one ran under the lease, its fenced "
          f"writes kept ({got}), the other skipped (result None, logged)",
          len(ran) == 1 and len(skipped) == 1 and got == (2, ran[0][0], ran[0][1])
          and "skipped, report:celery is held by another owner" in open(os.path.join(work, "worker.log")).read())

    # 2. Revoked while it works (lease.sleep): LeaseLost within ttl/3, step 2 never written.
    r = celery_app.report.delay(RES, "celery-revoked", 10)
    wait_for(lambda: row()[:2] == (1, "celery-revoked"), 15)
    t0 = time.monotonic()
    db.execute("SELECT fencelock.revoke(%s)", [RES])
    s, e = outcome(r)
    ms = (time.monotonic() - t0) * 1000
    check(f"python celery: a task whose lease is revoked mid-run fails with LeaseLost {ms:.0f} ms after "
          f"the revoke (ttl/3 = 1000 ms), its step 2 never written",
          s == "error" and type(e).__name__ == "LeaseLost" and ms < 2000 and row()[:2] == (1, "celery-revoked"))

    # 3. Revoked and taken over while the task blocks in a call that does not watch the lease:
    # its late write (its own connection, its fence) is refused; the task fails with LeaseLost.
    r = celery_app.blocking.delay(RES, "celery-blocked", 3)
    wait_for(lambda: row()[:2] == (1, "celery-blocked"), 15)
    fence = row()[2]
    db.execute("SELECT fencelock.revoke(%s)", [RES])
    new = db.execute("SELECT fencelock.acquire(%s, 'takeover', '30 s')", [RES]).fetchone()[0]
    try:
        db.execute("UPDATE report_runs SET step = 7, written_by = 'takeover', last_fence = %s "
                   "WHERE resource = %s", [new, RES])
    except psycopg.Error as e:  # only without the integration: the task's made-up fence is higher
        print(f"the takeover's write was refused: {e}", file=sys.stderr)
    s, e = outcome(r)
    tb = r.traceback or ""
    check(f"python celery: revoked and taken over during a blocking call, the task's late write with fence "
          f"{fence} is refused (FL001, StaleFence) and it fails with LeaseLost; the row keeps the takeover's "
          f"write (fence {new})",
          s == "error" and type(e).__name__ == "LeaseLost" and "StaleFence" in tb
          and f"fence {fence} is older than the stored fence {new}" in tb
          and row() == (7, "takeover", new))
    db.execute("SELECT fencelock.release(%s, 'takeover')", [RES])
finally:
    worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(10)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
