"""Celery tasks that run only while they hold a fencelock lease (pip install "fencelock[celery]").

    from fencelock.celery import fenced_task

    @fenced_task(app, resource="report:{0}", ttl=30)
    def build_report(lease, day):
        lease.execute("UPDATE reports SET total = %s, last_fence = %s WHERE day = %s",
                      [compute(day), lease.fence, day])

    build_report.delay("2026-12-03")   # called without the lease: the decorator adds it

The body runs inside fencelock.Lease (doc/clients.md's lease contract): the watchdog renews the
lease while the body runs, lease.fence goes into every fenced write, and once the lease is lost
the body's next lease call (lease.execute, lease.check, lease.sleep) raises LeaseLost.  When the
body fails in any way after its lease was lost (its own connection's write refused with FL001,
a statement cut off by the loss), the task fails with LeaseLost, the body's error as its cause:
what the task did after the loss is not to be trusted.

A second worker running the task for the same resource meanwhile does not run the body: with
on_busy="skip" (the default) the task succeeds with the result None and logs that it skipped;
with on_busy="raise" it fails with fencelock.Busy (add autoretry_for=(Busy,) to have Celery
retry it later); wait=seconds first waits that long for the lease.

resource: a str.format template filled with the task's arguments, or a callable taking them.
conninfo: a libpq connection string; None takes the app's setting fencelock_conninfo, and
without it the PG* environment variables.  The other keyword arguments go to app.task (bind=True
gives the body the task as its first argument, before the lease).
"""

from __future__ import annotations

import functools
import inspect
import uuid
from typing import Any, Callable, Optional, Union

from celery.utils.log import get_task_logger

from . import Busy, Lease, LeaseLost

__all__ = ["fenced_task"]

logger = get_task_logger("fencelock.celery")


def fenced_task(app: Any, resource: Union[str, Callable[..., str]], *,
                conninfo: Optional[str] = None, ttl: float = 30.0, wait: float = 0.0,
                on_busy: str = "skip", **task_options: Any) -> Callable[[Callable[..., Any]], Any]:
    """Decorate fn(lease, *args, **kwargs) into a Celery task of app that holds the lease."""
    if on_busy not in ("skip", "raise"):
        raise ValueError(f'on_busy must be "skip" or "raise", not {on_busy!r}')
    bind = bool(task_options.get("bind"))

    def decorate(fn: Callable[..., Any]) -> Any:
        # Celery checks the arguments of a call against the task's signature: the caller's,
        # without the lease the decorator passes in.
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        lease_at = 1 if bind else 0
        if len(params) <= lease_at:
            raise TypeError(f"{fn.__name__} must take the lease as its "
                            f"{'second' if bind else 'first'} argument")
        del params[lease_at]

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            head, args = (args[:1], args[1:]) if bind else ((), args)
            name = resource(*args, **kwargs) if callable(resource) else resource.format(*args, **kwargs)
            task_id = task.request.id or "eager"
            lease = Lease(conninfo if conninfo is not None else app.conf.get("fencelock_conninfo") or "",
                          name, owner=f"{name}:celery:{task_id}:{uuid.uuid4()}", ttl=ttl, wait=wait)
            try:
                lease.acquire()
            except Busy:
                if on_busy == "raise":
                    raise
                logger.info("%s[%s]: skipped, %s is held by another owner", task.name, task_id, name)
                return None
            try:
                return fn(*head, lease, *args, **kwargs)
            except LeaseLost:
                raise
            except Exception as e:
                if lease.lost:
                    raise LeaseLost(f"{lease.lost_reason}; the task failed after the loss: "
                                    f"{type(e).__name__}: {e}") from e
                raise
            finally:
                lease.release()

        run.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        del run.__wrapped__  # type: ignore[attr-defined]  # or inspect would show fn's again
        task = app.task(**task_options)(run)
        return task

    return decorate
