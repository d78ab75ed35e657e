#!/usr/bin/env bash
# The suites on PostgreSQL's debugging builds (scripts/pg.sh 18-debug: assertions, USE_VALGRIND),
# in the two ways CI has no time for (doc/testing.md says how long each takes):
#
#   bash scripts/debug-run.sh valgrind         the server under Valgrind's memcheck with
#                                              PostgreSQL's own suppressions, running the
#                                              regression and isolation suites; fails on any
#                                              memcheck error whose stack passes through fencelock
#   bash scripts/debug-run.sh discard-caches   the regression suite with debug_discard_caches = 1
#                                              (every cache entry thrown away at every chance)
#
# Extra arguments name the tests to run (default: all of the suite), e.g.
#   bash scripts/debug-run.sh valgrind 301_claim lease_paused_holder
# KEEP=1 keeps the work directory (logs, Valgrind's per-process logs) for inspection.
cd "$(dirname "$0")/.."
. scripts/lib.sh

mode=${1:-}
case $mode in
valgrind | discard-caches) shift ;;
*)
	sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac

fl_deps_common valgrind
fl_pg 18-debug
work=$(mktemp -d /tmp/fencelock-$mode.XXXXXX)
chmod 755 "$work"
# A copy of the installation of our own (a source build is relocatable, ~100 MB): these runs take
# long, and a library installed into the shared one meanwhile (scripts/test.sh, another run) would
# be loaded anew, a second copy, by this cluster's next backends.
cp -a "$PG_BIN/.." "$work/pgsql"
PG_BIN=$work/pgsql/bin
export PATH="$PG_BIN:$PATH"
dir=$work/pg
port=${FENCELOCK_TEST_PORT:-54391}
cleanup() {
	[ ! -f "$dir/data/postmaster.pid" ] || fl_as_pg pg_ctl -D "$dir/data" -m immediate -w stop >/dev/null || true
	[ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

# A copy of the tree of our own, built with warnings as errors against the debugging build.
tree=$work/tree
mkdir -p "$tree"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp -d --parents -t "$tree"
(cd "$tree" && FL_COPT=-Werror fl_build) >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
[ "$(id -u)" -ne 0 ] || chown -R postgres: "$work"

# The tests to run: the arguments sorted into regression tests and isolation specs, or the suites.
regress= isolation=
for t in "$@"; do
	if [ -f "$tree/test/specs/$t.spec" ]; then isolation+=" $t"
	elif [ -f "$tree/test/sql/$t.sql" ]; then regress+=" $t"
	else echo "no regression test or isolation spec named $t" >&2; exit 2
	fi
done
suites=(regress)
[ "$mode" = discard-caches ] || suites+=(isolation)
# With every cache thrown away at every chance a call costs ~100 times more; the two tests whose
# point is thousands of calls in one statement (plan choice, batch sizes) would take hours, and
# they keep no cache of their own that the others do not.  Named explicitly, they still run.
discard_skip="105_bulk_grant_uses_index 501_history_prune_batches"
if [ "$mode" = discard-caches ] && [ $# -eq 0 ]; then
	for t in $(cd "$tree/test/sql" && ls *.sql | sed 's/\.sql$//'); do # all apply to 18
		case " $discard_skip " in *" $t "*) ;; *) regress+=" $t" ;; esac
	done
	set -- $regress
fi

# %e: each line's SQLSTATE, so that an internal error (XX000) in the server's log is found.
fl_cluster_init "$dir" "$port" "log_line_prefix = '%m [%p] %e: '"

if [ "$mode" = valgrind ]; then
	# As PostgreSQL's developers run it (src/tools/valgrind.supp; the server's own client requests
	# tell memcheck where palloc's chunks begin and end).  Every process logs to its own file.
	mkdir -p "$work/vg"
	[ "$(id -u)" -ne 0 ] || chown postgres: "$work/vg"
	fl_as_pg valgrind --quiet --trace-children=yes --track-origins=yes --num-callers=30 --fullpath-after= \
		--leak-check=no --error-limit=no --gen-suppressions=all \
		--suppressions="$PG_BIN/../share/valgrind.supp" \
		--error-markers=VALGRINDERROR-BEGIN,VALGRINDERROR-END \
		--log-file="$work/vg/%p.log" \
		"$PG_BIN/postgres" -D "$dir/data" >"$dir/server.log" 2>&1 &
	for _ in $(seq 1 300); do
		pg_isready -q && break
		sleep 1
	done
	pg_isready -q || { cat "$dir/server.log"; echo "the server did not start under valgrind" >&2; exit 1; }
	# Each step waits longer under memcheck.
	export PGISOLATIONTIMEOUT=900
else
	fl_as_pg pg_ctl -D "$dir/data" -l "$dir/server.log" -w start >/dev/null
	export PGOPTIONS='-c debug_discard_caches=1'
fi

status=0
tests_failed=()
t0=$SECONDS
for s in "${suites[@]}"; do
	# make's own lists unless tests were named; then only the named ones of this suite.
	if [ $# -eq 0 ]; then
		args=()
	elif [ "$s" = regress ]; then
		[ -n "$regress" ] || continue
		args=(REGRESS="$regress")
	else
		[ -n "$isolation" ] || continue
		args=(ISOLATION="$isolation")
	fi
	[ "$s" = regress ] && args+=(ISOLATION=) || args+=(REGRESS=)
	echo "== 18-debug $mode: $s"
	fl_as_pg env PGOPTIONS="${PGOPTIONS:-}" PGISOLATIONTIMEOUT="${PGISOLATIONTIMEOUT:-}" \
		make -C "$tree" -s PG_CONFIG="$PG_BIN/pg_config" installcheck FL_USE_RUNNING=1 TAP_TESTS= "${args[@]}" \
		>"$work/$s.log" 2>&1 || tests_failed+=("$s")
	cat "$work/$s.log"
	for d in "$tree/regression.diffs" "$tree/output_iso/regression.diffs"; do
		[ ! -s "$d" ] || { echo "---- $d"; head -200 "$d"; }
		rm -f "$d"
	done
done
fl_as_pg pg_ctl -D "$dir/data" -m fast -w -t 600 stop >/dev/null || true

if [ "$mode" = valgrind ]; then
	# Every memcheck error, and those whose stack passes through fencelock's code (a frame in a
	# source file of our tree: --fullpath-after= prints whole paths).
	all=$(cat "$work"/vg/*.log | grep -c 'VALGRINDERROR-BEGIN' || true)
	awk '/VALGRINDERROR-BEGIN/ { b = ""; inb = 1 } inb { b = b $0 "\n" }
		/VALGRINDERROR-END/ { inb = 0; if (index(b, src)) printf "%s", b }' src="$tree/src/" "$work"/vg/*.log >"$work/ours.txt"
	ours=$(grep -c 'VALGRINDERROR-BEGIN' "$work/ours.txt" || true)
	[ "$ours" -eq 0 ] || { head -400 "$work/ours.txt"; KEEP=1; }
	echo "== valgrind: $all memcheck errors in all, $ours through fencelock's code ($(ls "$work"/vg | wc -l) processes)"
	[ "$ours" -eq 0 ] || status=1
fi
# Every process runs 30 (memcheck) to 100 (every cache discarded) times slower: a lease of a few
# seconds expires mid-test, a spec's steps race a waiter's 1-second recheck, and outputs differ.
# The same tests pass on this build at full speed in scripts/test.sh; here what decides is what
# these modes are for: memcheck's errors, and in the server's log no crash, no failed assertion
# and no internal error (XX000).
bad=$(grep -cE 'terminated by signal|TRAP:|PANIC:| XX000: (ERROR|FATAL)' "$dir/server.log" || true)
if [ "$bad" -gt 0 ]; then
	grep -E 'terminated by signal|TRAP:|PANIC:| XX000: (ERROR|FATAL)' "$dir/server.log" | head -40
	echo "== 18-debug $mode: $bad crashes, failed assertions or internal errors in the server's log"
	status=1
fi
[ ${#tests_failed[@]} -eq 0 ] ||
	echo "== 18-debug $mode: ${tests_failed[*]}: some outputs differed (above), as they may at this speed"
[ "$status" -eq 0 ] || { KEEP=1; echo "== logs kept in $work"; }
echo "== 18-debug $mode: $( [ "$status" -eq 0 ] && echo passed || echo FAILED ) in $((SECONDS - t0)) s"
exit "$status"
