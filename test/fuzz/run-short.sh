#!/bin/sh
# The fuzzer's short run, the one scripts/test.sh runs on every major: about a minute (55 s of
# statements, FUZZ_SHORT_SECONDS changes it, then the end's audit) against the server named by
# PGHOST / PGPORT / PGDATABASE, connecting as a superuser; the database needs CREATE EXTENSION
# fencelock and the server max_prepared_transactions > 0 (scripts/lib.sh's clusters have 10).
# Builds the fuzzer if needed.  FUZZ_LOG names the server log to scan for crashes and failed
# assertions (default: server.log in PGHOST, where scripts/lib.sh's clusters keep it).  Extra
# arguments go to the fuzzer, e.g. -S SEED to replay a run.  The exit code is the fuzzer's: 0 no
# violation, 1 violations, 2 could not set up.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

make -s -C "$top" fuzz-build >/dev/null

log=${FUZZ_LOG:-}
if [ -z "$log" ] && [ -f "${PGHOST:-/nonexistent}/server.log" ]; then
	log=$PGHOST/server.log
fi
if [ -n "$log" ]; then
	exec "$here/fuzz" -s "${FUZZ_SHORT_SECONDS:-55}" -l "$log" "$@"
fi
exec "$here/fuzz" -s "${FUZZ_SHORT_SECONDS:-55}" "$@"
