#!/usr/bin/env bash
# Patroni failover test (test/patroni/failover.py): a one-node etcd and two Patroni-managed
# PostgreSQL nodes of PG_BIN's major (default 15, Debian's) with fencelock preloaded, on 127.0.0.1,
# ports FENCELOCK_PATRONI_PORT .. +5 (default 56600); switchover, then kill -9 of the primary.
# fencelock must be installed into PG_BIN's installation.  As root: installs patroni,
# etcd-server and python3-psycopg (Debian 12's: Patroni 3.0.2, etcd 3.4) when missing.  KEEP=1
# keeps the directory with the nodes' logs.  About a minute.
set -uo pipefail
cd "$(dirname "$0")/.."
missing=()
for p in patroni etcd-server python3-psycopg; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	[ "$(id -u)" -eq 0 ] || { echo "run as root to install ${missing[*]}" >&2; exit 1; }
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
		{ echo "apt-get install ${missing[*]} failed" >&2; exit 1; }
fi
# The Debian packages start no service here (policy-rc.d); make sure none is left running.
export PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
exec /usr/bin/python3 test/patroni/failover.py
