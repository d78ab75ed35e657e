#!/bin/sh
# Short chaos run (under a minute) against the server named by PGHOST / PGPORT / PGDATABASE
# (and the rest of the libpq environment); the database needs CREATE EXTENSION fencelock.
# Builds the harness if needed.  Extra arguments go to the harness, e.g. -S SEED to replay a
# run or -w 8 for more workers.  The exit code is the harness's: 0 pass, 1 fail, 2 setup error.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

make -s -C "$top" chaos >/dev/null

# 30 s of load, at most ~12 s of grace for the last round, then the audit.
exec "$here/chaos" -s "${CHAOS_SHORT_SECONDS:-30}" "$@"
