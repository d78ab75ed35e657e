#!/usr/bin/env python3
"""A lease holder for the fault scenarios (doc/clients.md, "The lease holder program").

    python3 lease_holder.py --resource fault:py:s1 --owner py-s1 --ttl 3 --hold 12

Acquires RESOURCE as OWNER (connecting with application_name = OWNER and the PG* variables),
then waits --hold seconds in lease.sleep while the library renews, then releases.  Prints
"acquired R with fence N at EPOCH_MS", then "lost at EPOCH_MS: TYPE: MESSAGE" (exit 3) or
"held; released: true|false" (exit 0); "busy" (exit 2).
"""

import argparse
import sys
import time

from psycopg.conninfo import make_conninfo

import fencelock


def now_ms():
    return int(time.time() * 1000)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--resource", required=True)
    p.add_argument("--owner", required=True)
    p.add_argument("--ttl", type=float, default=3.0)
    p.add_argument("--wait", type=float, default=0.0)
    p.add_argument("--hold", type=float, default=10.0)
    a = p.parse_args()
    lease = fencelock.Lease(make_conninfo("", application_name=a.owner), a.resource,
                            owner=a.owner, ttl=a.ttl, wait=a.wait)
    def say_lost(e):
        first = str(e).splitlines()[0] if str(e) else ""
        print(f"lost at {now_ms()}: {type(e).__name__}: {first}", flush=True)

    got = None
    try:
        with lease:
            print(f"acquired {a.resource} with fence {lease.fence} at {now_ms()}", flush=True)
            end = time.monotonic() + a.hold
            try:
                while (left := end - time.monotonic()) > 0:
                    lease.sleep(min(left, 0.1))
            except Exception as e:  # what the block got (LeaseLost by the contract), and when
                got = e
                say_lost(e)
                raise
    except fencelock.Busy:
        print("busy", flush=True)
        return 2
    except Exception as e:
        if got is None:  # the acquire failed
            say_lost(e)
        elif e is not got:  # the release replaced the block's exception
            print(f"replaced by {type(e).__name__}: {e}", flush=True)
            return 1
        return 3
    print(f"held; released: {str(lease.released).lower()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
