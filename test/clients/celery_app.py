"""The Celery app of test/clients/celery_check.py: fencelock.celery.fenced_task on two tasks.

Broker: kombu's filesystem transport (messages as files in $FL_CELERY_DIR/queue), results:
Celery's file:// backend.  Both work offline, with no broker server to start and nothing in
the database under test but the tasks' own writes.  The connection comes from the PG*
variables.  FL_CELERY_PLAIN=1 defines the same tasks as plain Celery tasks with a lease-less
stand-in (a made-up, ever-growing fence, no renewal): celery_check.py's checks fail then, which
shows they test the integration; the suite never sets it.
"""

import os
import time

import psycopg
from celery import Celery

import fencelock
from fencelock.celery import fenced_task

d = os.environ["FL_CELERY_DIR"]
app = Celery("fencelock_celery_check", broker="filesystem://", backend=f"file://{d}/backend")
app.conf.update(
    broker_transport_options={"data_folder_in": f"{d}/queue", "data_folder_out": f"{d}/queue",
                              "processed_folder": f"{d}/processed", "store_processed": False,
                              "polling_interval": 0.05},
    worker_prefetch_multiplier=1,  # one message per pool process: two tasks run side by side
    broker_connection_retry_on_startup=True,
    fencelock_conninfo="",
)

if os.environ.get("FL_CELERY_PLAIN"):
    class _NoLease:  # what a task without the integration has: no lease, a fence made up
        def __init__(self) -> None:
            self.fence = time.time_ns() // 1000
            self.conn = psycopg.connect("", autocommit=True)
            self.lost = False

        def execute(self, q, p):
            with fencelock.translated():
                return self.conn.execute(q, p)

        def sleep(self, s):
            time.sleep(s)

    def fenced_task(app, resource, **opts):  # noqa: F811
        for k in ("ttl", "wait", "on_busy", "conninfo"):
            opts.pop(k, None)

        def decorate(fn):
            def plain(*a, **k):
                return fn(_NoLease(), *a, **k)

            plain.__name__ = fn.__name__
            return app.task(**opts)(plain)

        return decorate

STEP = "UPDATE report_runs SET step = %s, written_by = %s, last_fence = %s WHERE resource = %s"


@fenced_task(app, resource="{0}", ttl=3)
def report(lease, resource, name, work):
    """Step 1, work (lease.sleep: wakes with LeaseLost at the loss), step 2; returns the fence."""
    lease.execute(STEP, [1, name, lease.fence, resource])
    lease.sleep(work)
    lease.execute(STEP, [2, name, lease.fence, resource])
    return lease.fence


@fenced_task(app, resource="{0}", ttl=3)
def blocking(lease, resource, name, work):
    """The same through a connection of the task's own, its work a call that does not watch the
    lease: only the fence in the write stops it."""
    with psycopg.connect("", autocommit=True) as conn, fencelock.translated():
        conn.execute(STEP, [1, name, lease.fence, resource])
        time.sleep(work)
        conn.execute(STEP, [2, name, lease.fence, resource])
    return lease.fence
