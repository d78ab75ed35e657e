#!/usr/bin/env bash
# Server instructions per operation, counted by callgrind on one backend (doc/bench.md).
#
#   make bench-callgrind          ~5 minutes, as root
#
# The wall-clock benchmark (bench/run.sh) shares its machine with everything else that runs
# there; instruction counts do not.  This starts the same throwaway cluster (port 54370) with the
# same data, restarts it under valgrind --tool=callgrind (autovacuum off, fsync off), and runs each
# contender's pgbench script on one connection twice, with a fixed random seed: CG_SHORT and
# CG_LONG transactions.  The difference of the two backends' instruction totals, divided by the
# difference in transactions, is the cost of one operation without connection start-up.
#
# Environment: CG_SHORT (200), CG_LONG (1200), CG_ONLY (the contenders to measure, e.g.
# "plain fenced leased"; default all), CG_VALGRIND_ARGS (more valgrind options, e.g. --cache-sim=yes to
# count simulated cache misses too), CG_SQL (SQL statements run in each database after loading,
# errors reported and ignored, to try a change, e.g. "ALTER TABLE fencelock.lease SET
# (fillfactor = 90); VACUUM FULL fencelock.lease;"), BENCH_KEEP=1 (keep the directory with the callgrind files, listed
# in cg/index, for callgrind_annotate), BENCH_OUT (also write the report to this file).
#
# Row 6 (keys tax_tpcb, tax_select): pgbench's built-in TPC-B and select-only scripts in database
# bench_tax (pgbench -i, scale 1, CREATE EXTENSION fencelock, never used), first with fencelock
# preloaded, then with the server restarted under callgrind without it (tax_tpcb_none,
# tax_select_none): what loading the library costs statements that never touch it.
cd "$(dirname "$0")/.."
. scripts/lib.sh
. bench/lib.sh

SHORT=${CG_SHORT:-200}
LONG=${CG_LONG:-1200}

fl_deps valgrind
fl_build

dir=$(mktemp -d /var/tmp/fencelock-callgrind.XXXXXX)
chmod 755 "$dir"
VG_PID=
cleanup() {
	fl_cluster_stop "$dir"
	[ -n "$VG_PID" ] && wait "$VG_PID" 2>/dev/null
	[ "${BENCH_KEEP:-0}" = 1 ] && echo "== kept $dir" >&2 || rm -rf "$dir"
}
trap cleanup EXIT
die() {
	echo "callgrind: $*" >&2
	exit 1
}

fl_cluster_start "$dir" "$BENCH_PG_PORT" "shared_buffers = 1GB" "max_wal_size = 16GB" \
	"checkpoint_timeout = 1h" "autovacuum = off" "fsync = off" "synchronous_commit = off" \
	"full_page_writes = off"
echo "== loading" >&2
bench_load 20000
# Resource privileges (issue 22): bench_1k's rows again, in a database with 1 000 prefixes of
# several lengths granted to a role (the bench's superuser passes as a member), some covering the
# cycle's names: the check's cost beside rows_1k (same rows, same script, no prefix).
HAVE_PRIVS=$(q -d bench -c "SELECT count(*) FROM pg_proc WHERE proname = 'grant_resources'
	AND pronamespace = 'fencelock'::regnamespace")
if [ "$HAVE_PRIVS" = 1 ]; then
	q -c "CREATE DATABASE bench_pfx"
	q -d bench_pfx -c "CREATE EXTENSION fencelock" -c "CREATE ROLE bench_tenant" \
		-c "INSERT INTO fencelock.lease (resource, fence, expires_at)
			SELECT i::text, 1, now() FROM generate_series(1000, 1000000, 1000) AS i" \
		-c "SELECT count(fencelock.grant_resources((i * 7919 % 100000)::text || repeat('-', i % 7),
			'bench_tenant')) FROM generate_series(1, 1000) AS i" \
		-c "CREATE TABLE bench_floor (LIKE fencelock.lease INCLUDING ALL)" -c "VACUUM ANALYZE" >/dev/null
fi
q -c "CREATE DATABASE bench_tax"
pgbench -q -i -s 1 bench_tax >/dev/null 2>&1 || die "pgbench -i bench_tax failed"
q -d bench_tax -c "CREATE EXTENSION fencelock"
if [ -n "${CG_SQL:-}" ]; then
	for db in bench bench_1k bench_1m; do psql -X -q -d "$db" <<<"$CG_SQL" 2>&1 | sed "s/^/   $db: /" >&2; done
fi

# start_cg [postgres options...]: the cluster, restarted under callgrind.
start_cg() {
	fl_as_pg pg_ctl -D "$dir/data" -m fast -w stop >/dev/null
	[ -n "$VG_PID" ] && wait "$VG_PID" 2>/dev/null
	mkdir -p "$dir/cg"
	chown postgres: "$dir/cg"
	runuser -u postgres -- valgrind --tool=callgrind --callgrind-out-file="$dir/cg/%p.out" ${CG_VALGRIND_ARGS:-} \
		"$PG_BIN/postgres" -D "$dir/data" -c log_disconnections=on -c "log_line_prefix=%p %a " "$@" \
		>>"$dir/valgrind.log" 2>&1 &
	VG_PID=$!
	for _ in $(seq 300); do q -c "SELECT 1" >/dev/null 2>&1 && break; sleep 1; done
	q -c "SELECT 1" >/dev/null || die "the server did not start under valgrind (see $dir/valgrind.log)"
	# The lease clock's lift (src/store/clock.c: one scan of fencelock.lease per database after a
	# start) is made here, so that no measured backend pays it (a version without it: nothing).
	for db in bench bench_1k bench_1m bench_pfx; do
		q -d "$db" -c "SELECT fencelock.lease_clock()" >/dev/null 2>&1 || true
	done
}
echo "== restarting the cluster under callgrind" >&2
start_cg

# total DB SCRIPT N: the instruction total of the backend that ran N transactions of SCRIPT.
# Backends log their pid and application name when they end; pgbench's are found there, and the
# largest of their callgrind files (pgbench opens one short connection before the run) is the one.
total() {
	local db=$1 script=$2 n=$3 from pids pid best=0 bestpid sum left
	from=$(wc -l <"$dir/valgrind.log")
	local how=(-f "bench/$script")
	[[ $script != builtin:* ]] || how=(-b "${script#builtin:}")
	pgbench -n -M prepared -t "$n" -c 1 --random-seed=42 -D nrows=$NROWS "${how[@]}" \
		"$db" >"$dir/pgbench.out" 2>&1 || { cat "$dir/pgbench.out" >&2; die "pgbench $script failed"; }
	for _ in $(seq 120); do
		left=$(q -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'")
		pids=$(tail -n +"$((from + 1))" "$dir/valgrind.log" |
			sed -n 's/^\([0-9]*\) pgbench LOG:  disconnection.*/\1/p')
		if [ "$left" = 0 ] && [ -n "$pids" ]; then
			for pid in $pids; do
				while kill -0 "$pid" 2>/dev/null; do sleep 0.5; done
			done
			break
		fi
		sleep 1
	done
	for pid in $pids; do
		sum=$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$dir/cg/$pid.out" 2>/dev/null)
		if [ -n "$sum" ] && [ "$sum" -gt "$best" ]; then
			best=$sum
			bestpid=$pid
		fi
	done
	[ "$best" -gt 0 ] || die "no callgrind output for $script"
	echo "$script $n $bestpid.out" >>"$dir/cg/index"
	echo "$best"
}

# Fresh state before each run, so that both runs of a contender start from the same pages.
reset() {
	case $1 in
	update_*)
		q -d bench -c "TRUNCATE bench_plain, bench_fenced, bench_plfenced, bench_nulltrig, bench_leased" \
			-c "INSERT INTO bench_plain SELECT i, 0, 1 FROM generate_series(1, $NROWS) AS i" \
			-c "INSERT INTO bench_fenced SELECT * FROM bench_plain" \
			-c "INSERT INTO bench_plfenced SELECT * FROM bench_plain" \
			-c "INSERT INTO bench_nulltrig SELECT * FROM bench_plain" \
			-c "INSERT INTO bench_leased SELECT * FROM bench_plain" \
			-c "VACUUM ANALYZE bench_plain, bench_fenced, bench_plfenced, bench_nulltrig, bench_leased" \
			-c "VACUUM fencelock.lease" ;;
	cycle_spread* | cycle_floor_spread*) q -d "$2" -c "VACUUM fencelock.lease, bench_floor" ;;
	cycle_*) q -d bench -c "VACUUM fencelock.lease, pllease.lease, bench_floor" ;;
	builtin:*)
		# Every page in shared buffers, as after the loading: the second server starts cold.
		q -d bench_tax -c "TRUNCATE pgbench_history" -c "VACUUM pgbench_accounts, pgbench_branches, pgbench_tellers" \
			-c "SET enable_seqscan = off" -c "SET enable_bitmapscan = off" \
			-c "SELECT count(*) FROM pgbench_accounts WHERE aid > 0" -c "RESET enable_seqscan" \
			-c "SELECT sum(abalance) FROM pgbench_accounts" ;;
	claim_*)
		q -d bench -c "SELECT bench_refill('tasks_sql_1k', 1000), bench_refill('tasks_fl_1k', 1000),
			bench_refill('tasks_fl_1m', 1000000), bench_refill('tasks_sql_10', 1000),
			bench_refill('tasks_fl_10', 1000)" \
			-c "VACUUM tasks_sql_1k, tasks_fl_1k, tasks_fl_1m, tasks_sql_10, tasks_fl_10" ;;
	esac >/dev/null
	q -c "CHECKPOINT"
}

declare -A INSTR
measure() { # measure KEY DB SCRIPT
	local k=$1 db=$2 script=$3 a b
	[ -z "${CG_ONLY:-}" ] || [[ " $CG_ONLY " == *" $k "* ]] || return 0
	reset "$script" "$db"
	a=$(total "$db" "$script" "$SHORT")
	reset "$script" "$db"
	b=$(total "$db" "$script" "$LONG")
	INSTR[$k]=$(awk -v a="$a" -v b="$b" -v n=$((LONG - SHORT)) 'BEGIN { printf "%.0f", (b - a) / n }')
	echo "   $k: ${INSTR[$k]} instructions per operation" >&2
}

echo "== measuring ($SHORT and $LONG transactions per contender)" >&2
measure plain bench update_plain.sql
measure fenced bench update_fenced.sql
measure plfenced bench update_plfenced.sql
measure nulltrig bench update_nulltrig.sql
measure leased bench update_leased.sql
measure floor bench cycle_floor.sql
measure fencelock bench cycle_fencelock.sql
measure plpgsql bench cycle_plpgsql.sql
measure rows_1k bench_1k cycle_spread.sql
measure rows_1m bench_1m cycle_spread.sql
[ "$HAVE_PRIVS" != 1 ] || measure prefixes_1k bench_pfx cycle_spread.sql
measure floor_1k bench_1k cycle_floor_spread.sql
measure floor_1m bench_1m cycle_floor_spread.sql
# Issue 26: row 2 again without per-resource statistics (fencelock.max_resources = 0, a
# postmaster setting: the server restarts under callgrind), for their cost.
if [ -z "${CG_ONLY:-}" ] || [[ " $CG_ONLY " == *" fencelock_nores "* ]]; then
	start_cg -c fencelock.max_resources=0
	measure fencelock_nores bench cycle_fencelock.sql
	start_cg
fi
if [ "$HAVE_CLAIM" = 1 ]; then
	measure claim_sql_1k bench claim_sql_1k.sql
	measure claim_fl_1k bench claim_fl_1k.sql
	measure claim_fl_1m bench claim_fl_1m.sql
	measure claim_sql_10 bench claim_sql_10.sql
	measure claim_fl_10 bench claim_fl_10.sql
fi
measure tax_tpcb bench_tax builtin:tpcb-like
measure tax_select bench_tax builtin:select-only
if [ -n "${INSTR[tax_tpcb]:-}${INSTR[tax_select]:-}" ]; then
	echo "== restarting the cluster under callgrind without fencelock" >&2
	start_cg -c shared_preload_libraries=
	[ -z "${INSTR[tax_tpcb]:-}" ] || CG_ONLY="${CG_ONLY:+$CG_ONLY }tax_tpcb_none" measure tax_tpcb_none bench_tax builtin:tpcb-like
	[ -z "${INSTR[tax_select]:-}" ] || CG_ONLY="${CG_ONLY:+$CG_ONLY }tax_select_none" measure tax_select_none bench_tax builtin:select-only
fi

# line ROW LABEL KEY [BASE GOAL CONDITION-ON-r]: r = base's instructions ÷ this one's, i.e. the
# throughput ratio if the server's CPU were the only cost.
line() {
	local row=$1 label=$2 k=$3 base=${4:-} goal=${5:-} cond=${6:-} r="" met=""
	[ -n "${INSTR[$k]:-}" ] || return 0
	if [ -n "$base" ] && [ -n "${INSTR[$base]:-}" ]; then
		r=$(awk -v a="${INSTR[$base]}" -v b="${INSTR[$k]}" 'BEGIN { printf "%.3f", a / b }')
		[ -z "$cond" ] || met=$(awk "BEGIN { print (${cond//r/$r}) ? \"**met**\" : \"**missed**\" }")
	fi
	echo "| $row | $label | ${INSTR[$k]} | ${r:-1 (baseline)} | $goal | $met |"
}

report() {
	local ov=
	echo
	echo "## fencelock instruction counts ($(date -u '+%Y-%m-%d %H:%M UTC'))"
	echo
	echo "Command: \`make bench-callgrind\` (CG_SHORT=$SHORT CG_LONG=$LONG); PostgreSQL $(q -c 'SHOW server_version'),"
	echo "valgrind $(valgrind --version | sed 's/valgrind-//'); fsync = off, synchronous_commit = off, autovacuum = off, full_page_writes = off;"
	echo "pgbench -M prepared -c 1 --random-seed=42.  Instructions: the server backend's, per operation"
	echo "(an UPDATE in row 1, an acquire + release cycle in rows 2-3, a claim + complete in row 5)."
	echo "Ratio: the baseline's instructions ÷ this contender's (the throughput ratio if server CPU were"
	echo "the only cost)."
	echo
	echo "| row | contender | instructions | ratio | goal | met |"
	echo "|---|---|---|---|---|---|"
	line 1 "UPDATE by primary key, no trigger" plain
	line 1 "same UPDATE, C fence_trigger" fenced plain "≥ 0.97" "r >= 0.97"
	line 1 "same UPDATE, PL/pgSQL trigger" plfenced plain
	line 1 "same UPDATE, PostgreSQL's own C trigger suppress_redundant_updates_trigger (what any BEFORE ROW trigger costs)" nulltrig plain
	line 1 "same UPDATE, lease-bound C fence_trigger (lease=): one lease row lock per transaction" leased fenced "≥ 0.870 (cost ≤ 1.15× fenced)" "r >= 1 / 1.15"
	[ -n "${INSTR[plain]:-}" ] && [ -n "${INSTR[fenced]:-}" ] && [ -n "${INSTR[plfenced]:-}" ] &&
		ov=$(awk -v p="${INSTR[plain]}" -v f="${INSTR[fenced]}" -v l="${INSTR[plfenced]}" \
		'BEGIN { printf "%.3f", (f - p) / (l - p) }')
	[ -z "${ov:-}" ] || echo "| 1 | C trigger's added instructions ÷ PL/pgSQL trigger's | | $ov | ≤ 0.33 | $(awk "BEGIN { print ($ov <= 1/3) ? \"**met**\" : \"**missed**\" }") |"
	line 2 "floor: two bare UPDATEs by primary key" floor
	line 2 "fencelock acquire + release" fencelock floor "≥ 0.95" "r >= 0.95"
	line 2 "PL/pgSQL acquire + release" plpgsql floor
	line 2 "fencelock acquire + release without per-resource statistics (max_resources = 0)" fencelock_nores
	line 2 "fencelock acquire + release: per-resource statistics' cost (without ÷ with)" fencelock fencelock_nores "≥ 0.971 (cost ≤ 1.03×)" "r >= 1 / 1.03"
	line 3 "fencelock cycle, 1 000 lease rows" rows_1k
	line 3 "fencelock cycle, 1 000 000 lease rows" rows_1m rows_1k "≥ 0.833 (cost ≤ 1.2×)" "r >= 1 / 1.2"
	line 3 "fencelock cycle, 1 000 lease rows, 1 000 resource prefixes (issue 22)" prefixes_1k rows_1k "≥ 0.99 (cost ≤ 1.01×)" "r >= 0.99"
	line 3 "floor cycle on the same keys, 1 000 rows" floor_1k
	line 3 "floor cycle on the same keys, 1 000 000 rows" floor_1m floor_1k
	if [ "$HAVE_CLAIM" = 1 ]; then
		line 5 "hand-written SKIP LOCKED claim + complete" claim_sql_1k
		line 5 "fencelock.claim + complete" claim_fl_1k claim_sql_1k "≥ 0.95" "r >= 0.95"
		line 5 "fencelock.claim, 1 000 000 finished rows" claim_fl_1m claim_fl_1k "≥ 0.833 (cost ≤ 1.2×)" "r >= 1 / 1.2"
		line 5 "hand-written claim + complete, 10 rows per claim" claim_sql_10
		line 5 "fencelock.claim + complete, 10 rows per claim" claim_fl_10 claim_sql_10 "≥ 0.95" "r >= 0.95"
	fi
	line 6 "pgbench TPC-B (built-in tpcb-like), server without fencelock" tax_tpcb_none
	line 6 "same, fencelock preloaded and created, unused" tax_tpcb tax_tpcb_none "≥ 0.995 (≤ 0.5 % more)" "r >= 0.995"
	line 6 "pgbench select-only (built-in), server without fencelock" tax_select_none
	line 6 "same, fencelock preloaded and created, unused" tax_select tax_select_none "≥ 0.995 (≤ 0.5 % more)" "r >= 0.995"
	[ "${BENCH_KEEP:-0}" = 1 ] && echo && echo "Callgrind files: $dir/cg, listed in $dir/cg/index (callgrind_annotate --inclusive=yes FILE)."
	return 0
}

report | tee ${BENCH_OUT:+"$BENCH_OUT"}
