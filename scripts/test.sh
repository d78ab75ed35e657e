#!/usr/bin/env bash
# Run the whole test suite: regression (pg_regress), concurrency (isolation tester), crash,
# failover, dump/restore, pgbouncer and tool tests (TAP), and a short chaos run.  Installs what it
# needs, builds, and starts its own throwaway cluster as the postgres user.  Exit status 0 only
# when every suite passed.
cd "$(dirname "$0")/.."
. scripts/lib.sh

fl_deps
fl_build

work=$(mktemp -d /tmp/fencelock-test.XXXXXX)
chmod 755 "$work"
trap 'fl_cluster_stop "$work/pg"; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
# pg_regress and prove write into the tree: run from a copy the postgres user owns.
mkdir "$work/tree"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work/tree" 2>/dev/null ||
	cp -a . "$work/tree"
[ "$(id -u)" -ne 0 ] || chown -R postgres: "$work"
fl_cluster_start "$work/pg" "${FENCELOCK_TEST_PORT:-54321}"

passed=0
failed=0
failures=()
count() { # count SUITE LOG STATUS OKPATTERN FAILPATTERN
	local ok bad
	ok=$(grep -cE "$4" "$2" || true)
	bad=$(grep -cE "$5" "$2" || true)
	if [ "$3" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
	passed=$((passed + ok))
	failed=$((failed + bad))
	[ "$3" -eq 0 ] || failures+=("$1 (see $2)")
	echo "== $1: $ok passed, $bad failed"
}

suite() { # suite NAME OKPATTERN FAILPATTERN make-variable-overrides...
	local name=$1 okp=$2 badp=$3 status=0
	shift 3
	echo "== $name"
	fl_as_pg make -C "$work/tree" -s PG_CONFIG="$PG_BIN/pg_config" installcheck "$@" \
		>"$work/$name.log" 2>&1 || status=$?
	cat "$work/$name.log"
	for d in "$work/tree/regression.diffs" "$work/tree/output_iso/regression.diffs"; do
		[ "$status" -eq 0 ] || [ ! -s "$d" ] || { echo "---- $d"; head -200 "$d"; }
	done
	count "$name" "$work/$name.log" "$status" "$okp" "$badp"
}

suite regress '\.\.\. ok' '\.\.\. FAILED|failed \(ignored\)' ISOLATION= TAP_TESTS=
rm -f "$work/tree/regression.diffs"
suite isolation '\.\.\. ok' '\.\.\. FAILED' REGRESS= TAP_TESTS=
suite tap '\.\. ok$' '\.\. (Dubious|Failed)|^t.*\.pl \(Wstat' REGRESS= ISOLATION=

if [ -f test/chaos/run-short.sh ]; then
	echo "== chaos (short run)"
	if fl_as_pg bash -c "cd '$work/tree' && make -s PG_CONFIG='$PG_BIN/pg_config' chaos >/dev/null &&
		createdb chaos && psql -X -q -d chaos -c 'CREATE EXTENSION fencelock' &&
		PGDATABASE=chaos bash test/chaos/run-short.sh" >"$work/chaos.log" 2>&1; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		failures+=("chaos (see $work/chaos.log)")
	fi
	cat "$work/chaos.log"
fi

if [ ${#failures[@]} -gt 0 ]; then
	KEEP=1
	echo "== failed: ${failures[*]} (logs kept in $work)"
fi
echo "fencelock: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ ${#failures[@]} -eq 0 ]
