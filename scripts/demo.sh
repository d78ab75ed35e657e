#!/usr/bin/env bash
# Set up and run the main job: install what is missing, build and install fencelock, start a
# throwaway PostgreSQL cluster, and walk through the paused-holder scenario (test/demo.sql).
cd "$(dirname "$0")/.."
. scripts/lib.sh

fl_deps
fl_build
dir=$(mktemp -d /tmp/fencelock-demo.XXXXXX)
chmod 755 "$dir"
trap 'fl_cluster_stop "$dir"; rm -rf "$dir"' EXIT
fl_cluster_start "$dir" "${FENCELOCK_DEMO_PORT:-54329}"
echo "== throwaway cluster in $dir (port $PGPORT); running test/demo.sql"
fl_as_pg psql -X -q -v ON_ERROR_STOP=1 -f test/demo.sql

echo "== fencelock-run: the same job started twice at once; the second finds the lease busy"
fencelock-run -r nightly-report -t 5s -- \
	sh -c 'echo "   job running under fence $FENCELOCK_FENCE"; sleep 2' &
sleep 1
status=0
fencelock-run -r nightly-report -t 5s -- echo "never printed" || status=$?
echo "   the second run exited $status (75: busy)"
wait
fl_as_pg psql -X -q -c "SELECT grants, takeovers, releases, releases_refused, stale_rejected
                          FROM fencelock.stats"
echo "== demo finished; the cluster is removed"
