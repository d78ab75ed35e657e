"""fencelock from Python (psycopg 3): a lease with a watchdog, and typed fencing errors.

    with fencelock.Lease(conninfo, "report:daily", ttl=30) as lease:
        for part in parts:
            work(part)                            # between calls: lease.check() or lease.lost
            lease.execute("UPDATE reports SET done = %s, last_fence = %s WHERE id = 1",
                          [part, lease.fence])    # StaleFence (FL001) after a takeover;
                                                  # LeaseLost once the watchdog lost the lease

Lease takes the lease on entry (Busy when another owner holds it), renews it every ttl/3 from a
thread on its own connection, and when a renewal fails or finds the lease gone it cancels the
statement the work is running and makes the next lease call raise LeaseLost.  It releases the
lease on exit.  Errors of the fencelock API come back as the classes below, not as SQLSTATEs to
compare by hand.

A one-step job (take the lock, write rows carrying the fence, release) needs no watchdog:
fenced_step runs it as one transaction on one connection.

    total = fencelock.fenced_step(conninfo, "report:daily", lambda conn, fence: conn.execute(
        "UPDATE reports SET total = total + 1, last_fence = %s WHERE id = 1 RETURNING total",
        [fence]).fetchone()[0], ttl=30)
"""

import contextlib
import threading
import uuid

import psycopg
from psycopg import errors as pgerrors

__all__ = ["FencelockError", "StaleFence", "Unfenced", "Busy", "LeaseLost", "Lease", "fenced_step",
           "translated"]


class FencelockError(Exception):
    """Base class; sqlstate is set when the server raised it."""

    sqlstate = None


class StaleFence(FencelockError):
    """FL001: a newer holder exists.  Roll back and stop; never retry with the same fence."""

    sqlstate = "FL001"


class Unfenced(FencelockError):
    """FL002: the write did not carry a fence (a bug in the caller)."""

    sqlstate = "FL002"


class Busy(FencelockError):
    """acquire returned NULL: another owner holds a live lease."""


class LeaseLost(FencelockError):
    """The watchdog could not renew the lease: stop the work."""


_BY_SQLSTATE = {cls.sqlstate: cls for cls in (StaleFence, Unfenced)}


@contextlib.contextmanager
def translated():
    """Re-raise FL001/FL002 from psycopg as StaleFence/Unfenced (the original as __cause__)."""
    try:
        yield
    except psycopg.Error as e:
        cls = _BY_SQLSTATE.get(e.sqlstate)
        if cls is None:
            raise
        raise cls(e.diag.message_primary or str(e)) from e


class Lease:
    """A fencelock lease held while the with-block runs, renewed by a watchdog thread."""

    def __init__(self, conninfo, resource, owner=None, ttl=30.0, wait=0.0):
        self.conninfo, self.resource, self.ttl, self.wait = conninfo, resource, ttl, wait
        self.owner = owner or f"{resource}:{uuid.uuid4()}"  # unguessable: it renews and releases
        self.fence = None
        self.released = None
        self.lost_reason = None
        self._lost = threading.Event()
        self._stop = threading.Event()

    def __enter__(self):
        self._wd = psycopg.connect(self.conninfo, autocommit=True)  # the watchdog's own
        with contextlib.ExitStack() as undo:  # on any error below, close what was opened
            undo.callback(self._wd.close)
            self.conn = psycopg.connect(self.conninfo, autocommit=True)  # the work's
            undo.callback(self.conn.close)
            # Autocommit: the fence is valid once the grant has committed.
            self.fence = self._wd.execute(
                "SELECT fencelock.acquire(%s, %s, %s::interval, %s::interval)",
                [self.resource, self.owner, f"{self.ttl} s", f"{self.wait} s"]).fetchone()[0]
            if self.fence is None:
                raise Busy(f"{self.resource} is held by another owner")
            undo.pop_all()
        self._thread = threading.Thread(target=self._watch, name="fencelock-watchdog", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        try:
            # Naming the grant (fence): a retry cannot free a newer lease of the same owner.
            self.released = self._wd.execute("SELECT fencelock.release(%s, %s, %s)",
                                              [self.resource, self.owner, self.fence]).fetchone()[0]
        finally:
            self._close()
        return False

    def _close(self):
        self.conn.close()
        self._wd.close()

    def _watch(self):
        while not self._stop.wait(self.ttl / 3):
            try:
                ok = self._wd.execute("SELECT fencelock.renew(%s, %s, %s::interval, %s)",
                                      [self.resource, self.owner, f"{self.ttl} s",
                                       self.fence]).fetchone()[0]
                why = None if ok else "the lease expired or was taken over"
            except psycopg.Error as e:
                why = f"renewal failed: {e}"
            if why:
                self.lost_reason = why
                self._lost.set()
                self.conn.cancel()  # interrupts the work's running statement, if any
                return

    @property
    def lost(self):
        return self._lost.is_set()

    def check(self):
        """Raise LeaseLost if the watchdog lost the lease."""
        if self._lost.is_set():
            raise LeaseLost(self.lost_reason)

    def sleep(self, seconds):
        """Wait (doing work elsewhere, or just pacing), waking at once when the lease is lost."""
        if self._lost.wait(seconds):
            raise LeaseLost(self.lost_reason)

    def execute(self, query, params=None):
        """Run a statement on the work connection; carry self.fence in every fenced write."""
        self.check()
        try:
            with translated():
                return self.conn.execute(query, params)
        except pgerrors.QueryCanceled:
            self.check()  # cancelled by the watchdog: LeaseLost
            raise


def fenced_step(conninfo_or_conn, resource, fn, ttl=30.0, wait=0.0, owner=None):
    """Take the lease, run fn(conn, fence), release: one transaction on one connection.

    BEGIN; SET LOCAL idle_in_transaction_session_timeout = ttl; acquire; fn's writes (carry the
    fence); release and COMMIT in one round trip.  The open transaction keeps the grant's row
    locked, so no other owner gets the lease before it ends (a try-once acquire answers NULL, a
    waiting one waits), also past the TTL; and grant, writes and release commit or vanish
    together.  A step idle in its transaction for longer than ttl seconds (a paused process)
    is ended by the server: its writes roll back, the lease is free again, and the step raises
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


def _step(conn, resource, fn, ttl, wait, owner):
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise psycopg.ProgrammingError("fenced_step needs a connection outside a transaction")
    owner = owner or f"{resource}:{uuid.uuid4()}"
    committing = False
    try:
        with translated():
            with conn.pipeline():  # BEGIN and the acquire in one round trip
                if conn.autocommit:
                    conn.execute("BEGIN")  # READ COMMITTED unless the session says otherwise
                # The timeout only counts while the session is idle in the transaction, so it
                # can be set in the acquire's statement.
                fence = conn.execute(
                    "SELECT pg_catalog.set_config('idle_in_transaction_session_timeout', %s, true),"
                    " fencelock.acquire(%s, %s, %s::interval, %s::interval)",
                    [str(max(1, round(ttl * 1000))), resource, owner, f"{ttl} s",
                     f"{wait} s"]).fetchone()[1]
            if fence is None:
                raise Busy(f"{resource} is held by another owner")
            result = fn(conn, fence)
            committing = True
            with conn.pipeline():  # the release and the COMMIT in one round trip
                conn.execute("SELECT fencelock.release(%s, %s, %s)", [resource, owner, fence])
                conn.execute("COMMIT")
            return result
    except psycopg.Error as e:
        if conn.closed and not committing:
            # The server ended the session (idle past the TTL, or the connection broke)
            # before the COMMIT was sent: nothing of the step remains.
            raise LeaseLost("the session ended before the step committed: "
                            + str(e).splitlines()[0]) from e
        raise  # lost during the COMMIT: whether it committed is unknown
    except BaseException:
        if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            try:
                conn.execute("ROLLBACK") if conn.autocommit else conn.rollback()
            except psycopg.Error:
                pass
        raise
