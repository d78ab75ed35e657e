#!/bin/sh
# Short chaos runs (about a minute and a half in all) against the server named by PGHOST / PGPORT /
# PGDATABASE (and the rest of the libpq environment); the database needs CREATE EXTENSION
# fencelock.  Builds the harness if needed.  One run per workload, in turn: exclusive (30 s of
# load), shared and permit (12 s each; CHAOS_SHORT_SECONDS and CHAOS_SHORT_GROUP_SECONDS change
# them, CHAOS_SHORT_MODES="shared permit" runs only those).  Extra arguments go to every run, e.g.
# -S SEED to replay one or -w 8 for more workers.  The first run that does not pass ends the
# series, so its tables are left to examine; the exit code is its: 1 fail, 2 setup error.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

make -s -C "$top" chaos >/dev/null

for mode in ${CHAOS_SHORT_MODES:-exclusive shared permit}; do
	case $mode in
	# 30 s of load, at most ~12 s of grace for the last round, then the audit.
	exclusive) "$here/chaos" -s "${CHAOS_SHORT_SECONDS:-30}" "$@" ;;
	# Readers and writers on two resources; permits: 6 workers after 2 permits of one resource.
	shared) "$here/chaos" -m shared -r 2 -s "${CHAOS_SHORT_GROUP_SECONDS:-12}" "$@" ;;
	permit) "$here/chaos" -m permit -r 1 -P 2 -s "${CHAOS_SHORT_GROUP_SECONDS:-12}" "$@" ;;
	*) echo "run-short.sh: unknown workload \"$mode\" in CHAOS_SHORT_MODES" >&2; exit 2 ;;
	esac
	echo
done
