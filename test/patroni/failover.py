#!/usr/bin/python3
"""Patroni: fencelock under the high-availability manager users run PostgreSQL with.

Started by scripts/test-patroni.sh (as root; it installs patroni and etcd-server). A one-node
etcd and two Patroni-managed PostgreSQL nodes with fencelock preloaded, all on 127.0.0.1 with
ports of their own, in a temporary directory removed afterwards. Then:

  1. grants on the first primary, a fenced row written under one of them, a session-bound lease
     held by a connection to the primary, fencelock-run holding a lease through a multi-host
     connection string (target_session_attrs=read-write);
  2. `patronictl switchover`: every fence the new primary issues exceeds every fence before it
     (the timeline is in the fence's top bits); the old holder's write is refused with FL001 once a
     new holder took the lease over; fencelock-run reconnects and keeps its lease;
  3. kill -9 of the primary's Patroni and PostgreSQL (the node dies): the other node takes over
     after the leader key's ttl; fences grow again; the session-bound lease of the dead primary's
     session is free at once on the new one, though its ttl is an hour; fencelock-run reconnects
     and keeps its lease.

Prints "ok N - ..." / "not ok N - ..." per check and "patroni: N passed, M failed".
"""
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import psycopg

BIN = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")
BASE = int(os.environ.get("FENCELOCK_PATRONI_PORT", "56600"))
ETCD_CLIENT, ETCD_PEER = BASE, BASE + 1
NODES = {
    "node1": {"pg": BASE + 2, "rest": BASE + 4},
    "node2": {"pg": BASE + 3, "rest": BASE + 5},
}
TL_SHIFT = 48

passed = failed = 0
procs = {}
pg_user = pwd.getpwnam("postgres")


def check(ok, what, detail=""):
    global passed, failed
    n = passed + failed + 1
    if ok:
        passed += 1
        print(f"ok {n} - {what}", flush=True)
    else:
        failed += 1
        print(f"not ok {n} - {what}" + (f": {detail}" if detail else ""), flush=True)
    return ok


def as_postgres():
    os.setgid(pg_user.pw_gid)
    os.setuid(pg_user.pw_uid)
    os.setsid()


def spawn(name, argv, log):
    out = open(log, "ab")
    procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, preexec_fn=as_postgres)
    return procs[name]


def node_yaml(d, name):
    n = NODES[name]
    return f"""scope: fencelock-ha
name: {name}
restapi:
  listen: 127.0.0.1:{n['rest']}
  connect_address: 127.0.0.1:{n['rest']}
etcd3:
  hosts: 127.0.0.1:{ETCD_CLIENT}
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 16777216
    postgresql:
      use_pg_rewind: false
      parameters:
        shared_preload_libraries: fencelock
        wal_level: replica
        hot_standby: 'on'
        max_wal_senders: 5
        max_replication_slots: 5
        wal_keep_size: 64MB
        fsync: 'off'
  initdb:
  - encoding: UTF8
  - auth: trust
postgresql:
  listen: 127.0.0.1:{n['pg']}
  connect_address: 127.0.0.1:{n['pg']}
  data_dir: {d}/{name}
  bin_dir: {BIN}
  pgpass: {d}/{name}.pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
  parameters:
    unix_socket_directories: '{d}'
  basebackup:
  - checkpoint: fast
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
"""


def rest(name, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{NODES[name]['rest']}{path}", timeout=2) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, {}
    except Exception:
        return None, {}


def leader(timeout=60, exclude=None):
    """The name of the node whose PostgreSQL is a running primary out of recovery."""
    end = time.time() + timeout
    while time.time() < end:
        for name in NODES:
            if name == exclude:
                continue
            status, body = rest(name, "/primary")
            if status == 200 and body.get("state") == "running":
                try:
                    with psycopg.connect(host="127.0.0.1", port=NODES[name]["pg"], user="postgres",
                                         dbname="postgres", connect_timeout=3) as c:
                        if not c.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
                            return name
                except psycopg.Error:
                    pass
        time.sleep(0.3)
    return None


def connect(name, **kw):
    return psycopg.connect(host="127.0.0.1", port=NODES[name]["pg"], user="postgres",
                           dbname="app", autocommit=True, connect_timeout=5, **kw)


def one(conn, sql, *args):
    return conn.execute(sql, args).fetchone()[0]


def wait_replica_has(replica, fence, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with connect(replica) as c:
                got = one(c, "SELECT max(fence) FROM fencelock.lease")
                if got is not None and got >= fence:
                    return True
        except Exception:
            pass
        time.sleep(0.3)
    return False


def renewed_on(name, timeout=25):
    """Whether fencelock-run's lease on the node was renewed there (its deadline 20 s ahead)."""
    end = time.time() + timeout
    while time.time() < end:
        try:
            with connect(name) as c:
                if one(c, "SELECT expires_at > now() + interval '20 seconds' FROM fencelock.lease "
                          "WHERE resource = 'run-job' AND owner = 'runner'"):
                    return True
        except Exception:
            pass
        time.sleep(0.5)
    return False


def max_fence(conn):
    return one(conn, "SELECT coalesce(max(fence), 0) FROM fencelock.lease")


def patronictl(d, *args):
    return subprocess.run(["patronictl", "-c", f"{d}/node1.yml", *args], capture_output=True,
                          text=True, timeout=60, preexec_fn=as_postgres)


def main():
    d = tempfile.mkdtemp(prefix="fencelock-patroni.")
    os.chown(d, pg_user.pw_uid, pg_user.pw_gid)
    os.chmod(d, 0o755)
    keep = os.environ.get("KEEP")
    run = None
    try:
        spawn("etcd", ["etcd", "--name", "fl", "--data-dir", f"{d}/etcd",
                       "--listen-client-urls", f"http://127.0.0.1:{ETCD_CLIENT}",
                       "--advertise-client-urls", f"http://127.0.0.1:{ETCD_CLIENT}",
                       "--listen-peer-urls", f"http://127.0.0.1:{ETCD_PEER}",
                       "--initial-advertise-peer-urls", f"http://127.0.0.1:{ETCD_PEER}",
                       "--initial-cluster", f"fl=http://127.0.0.1:{ETCD_PEER}"], f"{d}/etcd.log")
        time.sleep(1)
        for name in NODES:
            with open(f"{d}/{name}.yml", "w") as f:
                f.write(node_yaml(d, name))
            os.chown(f"{d}/{name}.yml", pg_user.pw_uid, pg_user.pw_gid)
        spawn("patroni-node1", ["patroni", f"{d}/node1.yml"], f"{d}/node1.log")
        first = leader(90)
        if not check(first == "node1", "node1 bootstraps the cluster and leads it", str(first)):
            return
        spawn("patroni-node2", ["patroni", f"{d}/node2.yml"], f"{d}/node2.log")
        end = time.time() + 90
        while time.time() < end and rest("node2", "/replica")[0] != 200:
            time.sleep(0.3)
        if not check(rest("node2", "/replica")[0] == 200, "node2 joins as a streaming replica"):
            return

        with psycopg.connect(host="127.0.0.1", port=NODES[first]["pg"], user="postgres",
                             dbname="postgres", autocommit=True) as c:
            c.execute("CREATE DATABASE app")
        with connect(first) as c:
            c.execute("CREATE EXTENSION fencelock")
            c.execute("CREATE TABLE orders (id text PRIMARY KEY, state text, last_fence bigint "
                      "NOT NULL DEFAULT 0)")
            c.execute("CREATE TRIGGER fence BEFORE UPDATE ON orders FOR EACH ROW "
                      "EXECUTE FUNCTION fencelock.fence_trigger('last_fence')")
            c.execute("INSERT INTO orders VALUES ('o-1', 'new')")
            for i in range(20):
                one(c, "SELECT fencelock.acquire(%s, 'w', '1 hour')", f"r-{i}")
            old_fence = one(c, "SELECT fencelock.acquire('job', 'old-holder', '2 seconds')")
            c.execute("UPDATE orders SET state = 'old', last_fence = %s WHERE id = 'o-1'",
                      (old_fence,))
            before = max_fence(c)
        second = "node2" if first == "node1" else "node1"
        check(wait_replica_has(second, before), "the replica streams the lease rows")

        # fencelock-run through a multi-host connection string, holding a lease through both
        # failovers (ttl 30 s: a failover takes a ttl of the leader key, 10 s, at most).
        hosts = ",".join("127.0.0.1" for _ in NODES)
        ports = ",".join(str(n["pg"]) for n in NODES.values())
        conninfo = (f"host={hosts} port={ports} user=postgres dbname=app "
                    "target_session_attrs=read-write connect_timeout=3")
        run_log = open(f"{d}/run.log", "wb")
        run = subprocess.Popen(["fencelock-run", "-v", "-t", "30s", "-o", "runner", "-r", "run-job",
                                "-d", conninfo, "--", "sleep", "600"],
                               stdout=run_log, stderr=subprocess.STDOUT)
        time.sleep(2)
        with connect(first) as c:
            run_fence = one(c, "SELECT fence FROM fencelock.lease WHERE resource = 'run-job' "
                               "AND owner = 'runner'")
        check(run_fence is not None, "fencelock-run holds its lease on the first primary")

        # -- 2. switchover -------------------------------------------------------------------
        r = patronictl(d, "switchover", "--leader", first, "--candidate", second, "--force")
        new = leader(60, exclude=first)
        if not check(new == second, "patronictl switchover makes the other node primary",
                     r.stdout + r.stderr):
            return
        with connect(new) as c:
            tl = one(c, "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))"
                        "::bit(32)::int")
            f = one(c, "SELECT fencelock.acquire('after-switchover', 'w', '1 hour')")
            check(tl >= 2 and f > before and f > ((tl - 1) << TL_SHIFT),
                  "a fence after the switchover exceeds every fence before it",
                  f"{f} vs {before}, timeline {tl}")
            time.sleep(2.2)  # the old holder's 2 s lease expires
            new_fence = one(c, "SELECT fencelock.acquire('job', 'new-holder', '1 hour')")
            c.execute("UPDATE orders SET state = 'new', last_fence = %s WHERE id = 'o-1'",
                      (new_fence,))
            try:
                c.execute("UPDATE orders SET state = 'late', last_fence = %s WHERE id = 'o-1'",
                          (old_fence,))
                check(False, "the old holder's write is refused after the switchover", "accepted")
            except psycopg.Error as e:
                check(e.sqlstate == "FL001",
                      "the old holder's write is refused after the switchover (FL001)", str(e))
            check(one(c, "SELECT state FROM orders WHERE id = 'o-1'") == "new",
                  "the row holds the new holder's write")
            before = max_fence(c)
        check(renewed_on(new) and run.poll() is None,
              "fencelock-run reconnects to the new primary and keeps renewing its lease")

        # -- 3. the primary dies ------------------------------------------------------------
        holder = connect(new)
        sfence = one(holder, "SELECT fencelock.acquire('leader', 'node-a', '1 hour', wait => '0', "
                             "session => true)")
        check(sfence is not None, "a session-bound lease taken on the primary")
        check(wait_replica_has(first, max(sfence, before)), "the replica has it")
        pid = int(open(f"{d}/{new}/postmaster.pid").readline())
        for p in (procs[f"patroni-{new}"].pid, pid):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        subprocess.run(["pkill", "-9", "-f", f"{d}/{new}"], check=False)
        try:
            holder.close()
        except Exception:
            pass
        survivor = leader(60, exclude=new)
        if not check(survivor == first, "after kill -9 of the primary the other node takes over"):
            return
        with connect(survivor) as c:
            tl = one(c, "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))"
                        "::bit(32)::int")
            f = one(c, "SELECT fencelock.acquire('after-kill', 'w', '1 hour')")
            check(tl >= 3 and f > before and f > ((tl - 1) << TL_SHIFT),
                  "a fence after the failover exceeds every fence before it",
                  f"{f} vs {before}, timeline {tl}")
            g = one(c, "SELECT fencelock.acquire('leader', 'node-b', '1 hour')")
            check(g is not None and g > sfence,
                  "the dead primary's session-bound lease is free at once on the new primary",
                  f"{g} vs {sfence}")
        check(renewed_on(survivor) and run.poll() is None,
              "fencelock-run reconnects after the failover and keeps its lease")
        run.send_signal(signal.SIGTERM)
        run.wait(10)
    finally:
        if run is not None and run.poll() is None:
            run.kill()
        for name in ("patroni-node2", "patroni-node1", "etcd"):
            p = procs.get(name)
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
        subprocess.run(["pkill", "-9", "-f", d], check=False)
        if failed and not keep:
            for log in ("node1.log", "node2.log", "run.log"):
                path = os.path.join(d, log)
                if os.path.exists(path):
                    print(f"---- {log} (last lines)")
                    print("".join(open(path, errors="replace").readlines()[-15:]))
        if keep:
            print(f"== kept {d}")
        else:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # an unexpected error is a failed check, not a traceback alone
        check(False, "the test ran to its end", f"{type(e).__name__}: {e}")
    print(f"patroni: {passed} passed, {failed} failed")
    sys.exit(0 if failed == 0 and passed > 0 else 1)
