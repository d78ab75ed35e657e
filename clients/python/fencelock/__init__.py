"""fencelock from Python (psycopg 3): leases that report their loss in time, and typed errors.

    with fencelock.Lease(conninfo, "report:daily", ttl=30) as lease:
        for part in parts:
            work(part)                            # between calls: lease.check() or lease.lost
            lease.execute("UPDATE reports SET done = %s, last_fence = %s WHERE id = 1",
                          [part, lease.fence])    # StaleFence (FL001) after a takeover;
                                                  # LeaseLost once the lease is lost

The lease contract (doc/clients.md): the lease is lost no later than its local deadline, the
moment the grant or the last successful renewal was sent plus the ttl, on the monotonic clock;
every renewal is bounded by what remains; a broken connection is reopened and the lease renewed
there, naming its fence, while the deadline allows; the loss is raised as LeaseLost in the block
(at its next lease call) and shown by lease.lost; a failing release never replaces it.  One
owner token per Lease object, reused by its retries: an acquire whose reply was lost is retried
with the same token and gets the same fence.

A one-step job (take the lock, write rows carrying the fence, end) needs no renewals:
fenced_step runs it as one transaction on acquire_xact.

    total = fencelock.fenced_step(conninfo, "report:daily", lambda conn, fence: conn.execute(
        "UPDATE reports SET total = total + 1, last_fence = %s WHERE id = 1 RETURNING total",
        [fence]).fetchone()[0], ttl=30)
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import threading
import time
import uuid
from typing import Any, Callable, Iterator, Optional, Sequence, TypeVar, Union

import psycopg
from psycopg import errors as pgerrors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow

__version__ = "0.4.0"
__all__ = ["FencelockError", "StaleFence", "Unfenced", "Busy", "LeaseLost", "Lease", "fenced_step",
           "translated", "__version__"]

T = TypeVar("T")


class FencelockError(Exception):
    """Base class; sqlstate is set when the server raised it."""

    sqlstate: Optional[str] = None


class StaleFence(FencelockError):
    """FL001: a newer holder exists.  Roll back and stop; never retry with the same fence."""

    sqlstate = "FL001"


class Unfenced(FencelockError):
    """FL002: the write did not carry a fence (a bug in the caller)."""

    sqlstate = "FL002"


class Busy(FencelockError):
    """acquire returned NULL: another owner holds a live lease."""


class LeaseLost(FencelockError):
    """The lease is lost (refused, or not renewed before its deadline): stop the work."""


_BY_SQLSTATE = {cls.sqlstate: cls for cls in (StaleFence, Unfenced)}


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Re-raise FL001/FL002 from psycopg as StaleFence/Unfenced (the original as __cause__)."""
    try:
        yield
    except psycopg.Error as e:
        cls = _BY_SQLSTATE.get(e.sqlstate or "")
        if cls is None:
            raise
        raise cls(e.diag.message_primary or str(e)) from e


class _Timeout(Exception):
    pass


def _shutdown(conn: Optional[psycopg.Connection[Any]]) -> None:
    """Break a connection's socket so that a call blocked on it in another thread returns.

    Only shutdown(): closing the descriptor under a thread that uses it could reuse the number.
    """
    if conn is None or conn.closed:
        return
    try:
        s = socket.socket(fileno=os.dup(conn.fileno()))
    except (OSError, psycopg.Error):
        return
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        s.close()


def _bounded(timeout: float, fn: Callable[[], T], on_timeout: Callable[[], None]) -> T:
    """fn() in a thread of its own, waited for at most timeout seconds (then on_timeout())."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = fn()
        except BaseException as e:  # handed to the caller
            box["error"] = e

    t = threading.Thread(target=run, name="fencelock-call", daemon=True)
    t.start()
    t.join(max(0.0, timeout))
    if t.is_alive():
        on_timeout()
        raise _Timeout()
    if "error" in box:
        raise box["error"]
    return box["result"]


class Lease:
    """A fencelock lease held while the with-block runs, renewed by a watchdog thread.

    conninfo: a libpq connection string ("" for the PG* variables).  ttl and wait in seconds.
    margin: how long before the local deadline the loss is declared (default: ttl/10, at most
    0.25 s).  owner defaults to the resource and a random UUID (it renews and releases: keep it
    unguessable); one token per Lease object, reused by its own retries.
    """

    def __init__(self, conninfo: str, resource: str, owner: Optional[str] = None,
                 ttl: float = 30.0, wait: float = 0.0, margin: Optional[float] = None) -> None:
        self.conninfo, self.resource, self.ttl, self.wait = conninfo, resource, ttl, wait
        self.owner: str = owner or f"{resource}:{uuid.uuid4()}"
        self.margin: float = margin if margin is not None else min(0.25, ttl / 10)
        self.fence: Optional[int] = None
        self.released: Optional[bool] = None
        self.lost_reason: Optional[str] = None
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._deadline = 0.0  # monotonic: when the lease may have expired on the server
        self._wd: Optional[psycopg.Connection[TupleRow]] = None  # the watchdog's connection
        self._conn: Optional[psycopg.Connection[TupleRow]] = None  # the work's
        self._thread: Optional[threading.Thread] = None

    # -- connections -------------------------------------------------------------------------
    def _renewal_ms(self) -> int:
        """The server's statement_timeout for a renewal: what remains at a regular renewal."""
        return max(1, int((self.ttl * 2 / 3 - self.margin) * 1000))

    def _connect(self, timeout: float, statement_ms: int) -> psycopg.Connection[TupleRow]:
        # libpq's connect_timeout is whole seconds, at least 2; _bounded bounds it exactly.
        options = conninfo_to_dict(self.conninfo).get("options") or os.environ.get("PGOPTIONS", "")
        return psycopg.connect(self.conninfo, autocommit=True,
                               connect_timeout=max(2, math.ceil(timeout)),
                               options=f"{options} -c statement_timeout={statement_ms}".strip())

    def _watchdog_conn(self, timeout: float, statement_ms: Optional[int] = None
                       ) -> psycopg.Connection[TupleRow]:
        if self._wd is None or self._wd.closed or self._wd.broken:
            self._drop_watchdog_conn()
            conn = self._connect(timeout, self._renewal_ms() if statement_ms is None else statement_ms)
            if self._lost.is_set() or self._stop.is_set():
                conn.close()  # an abandoned reconnect that succeeded late
                raise LeaseLost(self.lost_reason or "the lease ended")
            self._wd = conn
        return self._wd

    def _drop_watchdog_conn(self) -> None:
        conn, self._wd = self._wd, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    @property
    def conn(self) -> psycopg.Connection[TupleRow]:
        """The work's autocommit connection, reopened when it broke (a restart, a failover)."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.close()
            self._conn = psycopg.connect(self.conninfo, autocommit=True)
        return self._conn

    # -- acquire, renew, release -------------------------------------------------------------
    def __enter__(self) -> "Lease":
        self.acquire()
        return self

    def acquire(self) -> int:
        """Take the lease (Busy when another owner holds it) and start the watchdog.

        A connection lost before the reply (the grant may have happened) is reopened and the
        acquire retried with the same owner token, which gets the same fence, for up to
        wait + ttl seconds.
        """
        give_up = time.monotonic() + self.wait + self.ttl
        while True:
            sent = time.monotonic()
            try:
                # No statement_timeout for the acquire: it may wait (the wait is its bound).
                conn = self._watchdog_conn(give_up - sent, statement_ms=0)
                fence = conn.execute(
                    "SELECT fencelock.acquire(%s, %s, %s::interval, %s::interval)",
                    [self.resource, self.owner, f"{self.ttl} s", f"{self.wait} s"]).fetchone()
                break
            except psycopg.OperationalError:
                self._drop_watchdog_conn()
                if time.monotonic() + 0.2 >= give_up:
                    raise
                time.sleep(0.2)
        if fence is None or fence[0] is None:
            raise Busy(f"{self.resource} is held by another owner")
        self.fence = fence[0]
        self._deadline = sent + self.ttl
        try:  # the renewals that follow on this connection; failing, the first one reconnects
            _bounded(self._deadline - self.margin - time.monotonic(),
                     lambda: conn.execute(f"SET statement_timeout = {self._renewal_ms()}"),
                     lambda: _shutdown(conn))
        except (_Timeout, psycopg.Error):
            self._drop_watchdog_conn()
        if time.monotonic() - sent > self.ttl / 3:
            sent = self._pin()
        self._thread = threading.Thread(target=self._watch, args=(sent,), name="fencelock-watchdog",
                                        daemon=True)
        self._thread.start()
        return self.fence

    def _pin(self) -> float:
        """After a grant that came late (a wait, a slow reply), renew at once: the deadline its
        request gives may be (nearly) spent, while the grant itself may be recent.  Returns
        when the renewal was sent; LeaseLost (the lease released) when it fails."""
        sent = time.monotonic()
        bound = self.ttl - self.margin
        try:
            ok = _bounded(bound, lambda: self._renew_once(bound), lambda: _shutdown(self._wd))
        except (_Timeout, psycopg.Error):
            ok = False
        if not ok:
            self._stop.set()
            self.release()
            raise LeaseLost("granted late, and not renewed at once")
        self._deadline = sent + self.ttl
        return sent

    def _renew_once(self, remaining: float) -> bool:
        row = self._watchdog_conn(remaining).execute(
            "SELECT fencelock.renew(%s, %s, %s::interval, %s)",
            [self.resource, self.owner, f"{self.ttl} s", self.fence]).fetchone()
        return bool(row and row[0])

    def _watch(self, sent: float) -> None:
        next_at = sent + self.ttl / 3
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            last_error = None
            while True:
                remaining = self._deadline - self.margin - time.monotonic()
                if remaining <= 0:
                    return self._lose("not renewed before its deadline"
                                      + (f" ({last_error})" if last_error else ""))
                sent = time.monotonic()
                try:
                    ok = _bounded(remaining, lambda: self._renew_once(remaining),
                                  lambda: _shutdown(self._wd))
                except _Timeout:
                    return self._lose("no reply to the renewal before the lease's deadline")
                except LeaseLost:
                    return
                except psycopg.Error as e:  # the connection broke, the server restarts: again
                    last_error = str(e).splitlines()[0] if str(e) else type(e).__name__
                    self._drop_watchdog_conn()
                    if self._stop.wait(min(0.2, max(0.0, remaining))):
                        return
                    continue
                if not ok:
                    return self._lose("the lease expired or was taken over")
                self._deadline = sent + self.ttl
                next_at = sent + self.ttl / 3
                break

    def _lose(self, why: str) -> None:
        self.lost_reason = why
        self._lost.set()
        _shutdown(self._conn)  # the statement the work is running, if any, fails at once

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        self.release()
        return False

    def release(self) -> Optional[bool]:
        """Stop the watchdog and release (released: false when the lease was no longer held or
        the release could not be done).  Never raises: the block's exception stays the one."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        # A lease lost by its deadline may be unreachable: one short try, then released: false.
        budget = 1.0 if self._lost.is_set() else max(1.0, min(5.0, self.ttl))
        try:
            self.released = _bounded(budget, self._release_once, lambda: _shutdown(self._wd))
        except (_Timeout, Exception):
            self.released = False
        finally:
            self._close()
        return self.released

    def _release_once(self) -> bool:
        conn = self._wd
        if conn is None or conn.closed or conn.broken:
            self._drop_watchdog_conn()
            conn = self._wd = self._connect(2, 2000)
        row = conn.execute("SELECT fencelock.release(%s, %s, %s)",
                           [self.resource, self.owner, self.fence]).fetchone()
        return bool(row and row[0])

    def _close(self) -> None:
        for conn in (self._conn, self._wd):
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()

    # -- the work's side ---------------------------------------------------------------------
    @property
    def lost(self) -> bool:
        """True once the lease is lost: stop the work."""
        return self._lost.is_set()

    def check(self) -> None:
        """Raise LeaseLost if the lease is lost."""
        if self._lost.is_set():
            raise LeaseLost(self.lost_reason)

    def sleep(self, seconds: float) -> None:
        """Wait (doing work elsewhere, or just pacing), waking at once when the lease is lost."""
        if self._lost.wait(seconds):
            raise LeaseLost(self.lost_reason)

    def execute(self, query: Any, params: Optional[Union[Sequence[Any], dict[str, Any]]] = None
                ) -> psycopg.Cursor[TupleRow]:
        """Run a statement on the work connection; carry self.fence in every fenced write.

        LeaseLost when the lease is lost, also when the loss interrupted this statement.  A
        connection that broke otherwise raises psycopg's error (whether the statement ran is
        unknown); the next call reopens it.
        """
        self.check()
        try:
            with translated():
                return self.conn.execute(query, params)
        except (pgerrors.QueryCanceled, psycopg.OperationalError) as e:
            if self._lost.is_set():
                raise LeaseLost(self.lost_reason) from e
            raise


def fenced_step(conninfo_or_conn: Union[str, psycopg.Connection[Any]], resource: str,
                fn: Callable[[psycopg.Connection[Any], int], T], ttl: float = 30.0,
                wait: float = 0.0, owner: Optional[str] = None) -> T:
    """Take the lease for one transaction (acquire_xact), run fn(conn, fence), commit.

    BEGIN; SET LOCAL idle_in_transaction_session_timeout = ttl; acquire_xact; fn's writes (carry
    the fence); COMMIT, which ends the lease.  The open transaction keeps the grant from every
    other owner until it ends (a try-once acquire answers NULL, a waiting one waits); grant and
    writes commit or vanish together.  A step idle in its transaction for longer than ttl
    seconds (a paused process) is ended by the server: its writes roll back and the step raises
    LeaseLost.  Busy when another owner holds the lease (after wait seconds); FL001/FL002 as
    StaleFence/Unfenced; on any error the transaction is rolled back.  Returns fn's result.

    conninfo_or_conn: a conninfo string (a connection is opened and closed), or a psycopg
    Connection not in a transaction (autocommit or not).  fn runs on that connection inside
    the transaction: it must not commit, roll back or open a pipeline of its own.
    """
    if isinstance(conninfo_or_conn, psycopg.Connection):
        return _step(conninfo_or_conn, resource, fn, ttl, wait, owner)
    with psycopg.connect(conninfo_or_conn, autocommit=True) as conn:
        return _step(conn, resource, fn, ttl, wait, owner)


def _step(conn: psycopg.Connection[Any], resource: str,
          fn: Callable[[psycopg.Connection[Any], int], T], ttl: float, wait: float,
          owner: Optional[str]) -> T:
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise psycopg.ProgrammingError("fenced_step needs a connection outside a transaction")
    owner = owner or f"{resource}:{uuid.uuid4()}"
    committing = False
    try:
        with translated():
            with conn.pipeline():  # BEGIN and the grant in one round trip
                if conn.autocommit:
                    conn.execute("BEGIN")  # READ COMMITTED unless the session says otherwise
                # The timeout only counts while the session is idle in the transaction, so it
                # can be set in the grant's statement.
                row = conn.execute(
                    "SELECT pg_catalog.set_config('idle_in_transaction_session_timeout', %s, true),"
                    " fencelock.acquire_xact(%s, %s, %s::interval)",
                    [str(max(1, round(ttl * 1000))), resource, owner, f"{wait} s"]).fetchone()
            fence = row[1] if row else None
            if fence is None:
                raise Busy(f"{resource} is held by another owner")
            result = fn(conn, fence)
            committing = True
            conn.execute("COMMIT") if conn.autocommit else conn.commit()
            return result
    except psycopg.Error as e:
        if conn.closed and not committing:
            # The server ended the session (idle past the TTL, or the connection broke)
            # before the COMMIT was sent: nothing of the step remains.
            raise LeaseLost("the session ended before the step committed: "
                            + str(e).splitlines()[0]) from e
        if not committing:
            _rollback(conn)
        raise  # lost during the COMMIT: whether it committed is unknown
    except BaseException:
        _rollback(conn)
        raise


def _rollback(conn: psycopg.Connection[Any]) -> None:
    if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        try:
            conn.execute("ROLLBACK") if conn.autocommit else conn.rollback()
        except psycopg.Error:
            pass
