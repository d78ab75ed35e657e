#!/usr/bin/env bash
# fencelock against what users would pick instead, measured in one run (doc/bench.md).
#
#   make bench                                   5 rounds of 8 s per contender (~14 minutes)
#   BENCH_ROUNDS=1 BENCH_SECONDS=2 make bench    smoke run (< 2 minutes)
#
# Starts a throwaway cluster (port 54370) and a loopback Redis (port 6390), runs each row's
# contenders interleaved (A B C, A B C, ...) for BENCH_ROUNDS rounds of BENCH_SECONDS seconds,
# checks after every run that the contender did the work it claims (rows changed, grants counted
# by the server), and prints a markdown table of medians and ratios.
#
# Environment: BENCH_ROUNDS (5), BENCH_SECONDS (8), BENCH_WARMUP (seconds per contender before the
# first round; 2, or 0 when BENCH_SECONDS < 5), BENCH_CLIENTS (nproc), BENCH_OUT (also write the
# report to this file), BENCH_KEEP=1 (keep the temporary directory).
START=$(date +%s)
cd "$(dirname "$0")/.."
. scripts/lib.sh
. bench/lib.sh

ROUNDS=${BENCH_ROUNDS:-5}
SECS=${BENCH_SECONDS:-8}
if [ -z "${BENCH_WARMUP:-}" ]; then
	if [ "$SECS" -lt 5 ]; then WARMUP=0; else WARMUP=2; fi
else
	WARMUP=$BENCH_WARMUP
fi
NCPU=$(nproc)
CLIENTS=${BENCH_CLIENTS:-$NCPU}
THREADS=$((CLIENTS < NCPU ? CLIENTS : NCPU))
PG_PORT=$BENCH_PG_PORT
REDIS_PORT=6390
HOT_CLIENTS=32       # row 4
HOT_HOLD_US=1000     # row 4: how long a holder keeps the hot lease before releasing it
POLL_MS=10           # row 4: the polling client's sleep after a refused acquire
TASK_QUEUE=$((SECS * 25000))   # row 5: ready tasks at the start of every run (> 2x what one run takes)
TICK=$(getconf CLK_TCK)

fl_deps libhiredis-dev redis-server redis-tools
fl_build

# On disk, not tmpfs: the durable rows must pay for real fsyncs.
dir=$(mktemp -d /var/tmp/fencelock-bench.XXXXXX)
chmod 755 "$dir"
REDIS_PID=
cleanup() {
	[ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null && wait "$REDIS_PID" 2>/dev/null
	fl_cluster_stop "$dir"
	[ "${BENCH_KEEP:-0}" = 1 ] && echo "== kept $dir" >&2 || rm -rf "$dir"
}
trap cleanup EXIT

die() {
	echo "bench: $*" >&2
	exit 1
}

cc -O2 -Wall -o "$dir/redis_lease" bench/redis_lease.c -lhiredis -lpthread ||
	die "cannot build bench/redis_lease.c"

fl_cluster_start "$dir" "$PG_PORT" \
	"shared_buffers = 1GB" \
	"max_wal_size = 16GB" \
	"checkpoint_timeout = 1h" \
	"max_connections = 100" \
	"log_min_messages = warning"

# ---------------------------------------------------------------------------------------------
# Server CPU: pg_ticks and proc_ticks (bench/lib.sh).
redis_ticks() { proc_ticks "$REDIS_PID"; }

# ---------------------------------------------------------------------------------------------
# Results: RATE[key] and CPU[key] hold one value per round, space-separated.
declare -A RATE CPU NOTE
median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END {
	if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2];
	else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
# Per-round ratios of key $1 to key $2, then their median, min and max.
ratios() {
	paste <(tr ' ' '\n' <<<"${RATE[$1]}" | grep .) <(tr ' ' '\n' <<<"${RATE[$2]}" | grep .) |
		awk '{ print $1 / $2 }'
}
ratio_stats() {
	ratios "$1" "$2" | sort -g | awk '{ a[NR] = $1 } END {
		m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
		printf "%.3f %.3f %.3f\n", m, a[1], a[NR] }'
}

# One pgbench run: pgb DB SCRIPT CLIENTS THREADS SECONDS.  Sets PROCESSED and TPS.
pgb() {
	local db=$1 script=$2 clients=$3 threads=$4 secs=$5 out="$dir/pgbench.out"
	if ! pgbench -n -M prepared -T "$secs" -c "$clients" -j "$threads" \
		-D nrows=$NROWS -D hold=$HOT_HOLD_US -D poll=$POLL_MS \
		-f "bench/$script" "$db" >"$out" 2>&1; then
		cat "$out" >&2
		die "pgbench $script failed"
	fi
	PROCESSED=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
	TPS=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$out")
	[ -n "$PROCESSED" ] && [ "$PROCESSED" -gt 0 ] || {
		cat "$out" >&2
		die "pgbench $script did nothing"
	}
}

check() { # check WHAT CONDITION-TEXT: dies unless the awk condition holds
	local what=$1 cond=$2
	awk "BEGIN { exit !($cond) }" || die "check failed for $what: $cond"
}

# ---------------------------------------------------------------------------------------------
# Contenders.  Each runs once for $1 seconds, checks its work, and sets R (rate) and C (server
# CPU in microseconds per unit of R).

# Row 1: UPDATE by primary key; the fence column's sum grows by one per row updated.
upd() { # upd TABLE SCRIPT SECONDS [COLUMN whose sum grows by one per row; last_fence]
	local t=$1 script=$2 secs=$3 col=${4:-last_fence} before after t0 t1
	before=$(q -d bench -c "SELECT sum($col) FROM $t")
	t0=$(pg_ticks)
	pgb bench "$script" "$CLIENTS" "$THREADS" "$secs"
	t1=$(pg_ticks)
	after=$(q -d bench -c "SELECT sum($col) FROM $t")
	check "$script" "$after - $before == $PROCESSED"
	R=$TPS
	C=$(awk -v d=$((t1 - t0)) -v n="$PROCESSED" -v hz="$TICK" 'BEGIN { printf "%.1f", d * 1e6 / hz / n }')
}
c_plain() { upd bench_plain update_plain.sql "$1"; }
c_fenced() { upd bench_fenced update_fenced.sql "$1"; }
c_plfenced() { upd bench_plfenced update_plfenced.sql "$1"; }
c_leased() { upd bench_leased update_leased.sql "$1" status; }

# Rows 2 and 3: acquire + release cycles.  Every grant adds one to its resource's fence, so the
# sum of fences counts grants; every grant is released, so no lease is held afterwards.
cycle() { # cycle DB TABLE SCRIPT SECONDS
	local db=$1 t=$2 script=$3 secs=$4 before after held t0 t1
	before=$(q -d "$db" -c "SELECT sum(fence) FROM $t")
	t0=$(pg_ticks)
	pgb "$db" "$script" "$CLIENTS" "$THREADS" "$secs"
	t1=$(pg_ticks)
	after=$(q -d "$db" -c "SELECT sum(fence) FROM $t")
	# The cycles' resources are numbers; row 1's lease-bound table holds bench-leased throughout.
	held=$(q -d "$db" -c "SELECT count(*) FROM $t WHERE owner IS NOT NULL AND resource ~ '^[0-9]+$'")
	# A grant is refused only when another client holds the same resource at that instant.
	check "$script grants" "$after - $before >= 0.99 * $PROCESSED && $after - $before <= $PROCESSED"
	check "$script releases" "$held == 0"
	R=$TPS
	C=$(awk -v d=$((t1 - t0)) -v n="$PROCESSED" -v hz="$TICK" 'BEGIN { printf "%.1f", d * 1e6 / hz / n }')
}
c_fencelock() { cycle bench fencelock.lease cycle_fencelock.sql "$1"; }
c_plpgsql() { cycle bench pllease.lease cycle_plpgsql.sql "$1"; }
c_floor() { cycle bench bench_floor cycle_floor.sql "$1"; }
# The durable row runs the same contenders under other names.
c_dfloor() { c_floor "$@"; }
c_dfencelock() { c_fencelock "$@"; }
c_dplpgsql() { c_plpgsql "$@"; }
c_rows_1k() { cycle bench_1k fencelock.lease cycle_spread.sql "$1"; }
c_rows_1m() { cycle bench_1m fencelock.lease cycle_spread.sql "$1"; }

# Redis: the client counts the replies; the server's command statistics must agree, and no lock
# key may be left behind.
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }
c_redis() {
	local secs=$1 out t0 t1 cycles grants releases seconds sets evals keys
	rcli CONFIG RESETSTAT >/dev/null
	t0=$(redis_ticks)
	out=$("$dir/redis_lease" -p "$REDIS_PORT" -c "$CLIENTS" -T "$secs" -n "$NROWS") ||
		die "redis_lease failed: $out"
	t1=$(redis_ticks)
	read -r cycles grants releases seconds < <(sed 's/[a-z]*=//g' <<<"$out")
	sets=$(rcli INFO commandstats | sed -n 's/^cmdstat_set:calls=\([0-9]*\),.*/\1/p')
	evals=$(rcli INFO commandstats | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p')
	keys=$(rcli DBSIZE)
	check "redis SET calls" "${sets:-0} == $cycles && ${evals:-0} == $cycles"
	check "redis grants" "$grants >= 0.99 * $cycles && $releases == $grants && $keys == 0"
	R=$(awk -v n="$cycles" -v s="$seconds" 'BEGIN { printf "%.1f", n / s }')
	C=$(awk -v d=$((t1 - t0)) -v n="$cycles" -v hz="$TICK" 'BEGIN { printf "%.1f", d * 1e6 / hz / n }')
}

c_dredis() { c_redis "$@"; }

# Row 4: one hot resource, HOT_CLIENTS clients.  Grants are counted by the hot resource's fence;
# R is grants per second and C server CPU per grant.
hot() { # hot SCRIPT SECONDS
	local script=$1 secs=$2 before after held t0 t1
	before=$(q -d bench -c "SELECT fence FROM fencelock.lease WHERE resource = 'hot'")
	t0=$(pg_ticks)
	pgb bench "$script" "$HOT_CLIENTS" "$NCPU" "$secs"
	t1=$(pg_ticks)
	after=$(q -d bench -c "SELECT fence FROM fencelock.lease WHERE resource = 'hot'")
	held=$(q -d bench -c "SELECT count(*) FROM fencelock.lease WHERE resource = 'hot' AND owner IS NOT NULL")
	check "$script" "$after > $before && $held == 0"
	R=$(awk -v n=$((after - before)) -v s="$secs" 'BEGIN { printf "%.1f", n / s }')
	C=$(awk -v d=$((t1 - t0)) -v n=$((after - before)) -v hz="$TICK" 'BEGIN { printf "%.1f", d * 1e6 / hz / n }')
	NOTE[$script]="$PROCESSED attempts for $((after - before)) grants"
}
c_hot_poll() { hot hot_poll.sql "$1"; }
c_hot_wait() { hot hot_wait.sql "$1"; }

# Row 5: claim + complete.  Every transaction claims one task and completes it; the number of
# tasks marked done grows by exactly the number of transactions, and none stays running.
claim() { # claim TABLE FINISHED SCRIPT SECONDS [ROWS per transaction, 1]
	local t=$1 finished=$2 script=$3 secs=$4 per=${5:-1} before after running t0 t1
	before=$(q -d bench -c "SELECT count(*) FROM $t WHERE state = 'done'")
	t0=$(pg_ticks)
	pgb bench "$script" "$CLIENTS" "$THREADS" "$secs"
	t1=$(pg_ticks)
	after=$(q -d bench -c "SELECT count(*) FROM $t WHERE state = 'done'")
	running=$(q -d bench -c "SELECT count(*) FROM $t WHERE state <> 'done' AND state <> 'ready'")
	check "$script" "$after - $before == $per * $PROCESSED && $running == 0"
	R=$TPS
	C=$(awk -v d=$((t1 - t0)) -v n="$PROCESSED" -v hz="$TICK" 'BEGIN { printf "%.1f", d * 1e6 / hz / n }')
	# Every run starts from the same table: the finished rows, and a full queue.
	q -d bench -c "SELECT bench_refill('$t', $finished)" -c "VACUUM $t" >/dev/null
}
c_claim_sql_1k() { claim tasks_sql_1k 1000 claim_sql_1k.sql "$1"; }
c_claim_fl_1k() { claim tasks_fl_1k 1000 claim_fl_1k.sql "$1"; }
c_claim_fl_1m() { claim tasks_fl_1m 1000000 claim_fl_1m.sql "$1"; }
c_claim_sql_10() { claim tasks_sql_10 1000 claim_sql_10.sql "$1" 10; }
c_claim_fl_10() { claim tasks_fl_10 1000 claim_fl_10.sql "$1" 10; }

# measure ROW KEY... : warm-up each contender once, then ROUNDS interleaved rounds.
measure() {
	local row=$1 k r
	shift
	echo "== [$(($(date +%s) - START)) s] row $row: $* (${ROUNDS} x ${SECS} s)" >&2
	if [ "$WARMUP" -gt 0 ]; then
		for k in "$@"; do "c_$k" "$WARMUP"; done
	fi
	for ((r = 1; r <= ROUNDS; r++)); do
		for k in "$@"; do
			"c_$k" "$SECS"
			RATE[$k]+="$R "
			CPU[$k]+="$C "
			echo "   round $r $k: $R/s, server CPU $C us" >&2
		done
	done
}

set_mode() { # set_mode cpu|durable
	if [ "$1" = cpu ]; then
		q -c "ALTER SYSTEM SET fsync = off" -c "ALTER SYSTEM SET synchronous_commit = off"
	else
		q -c "ALTER SYSTEM SET fsync = on" -c "ALTER SYSTEM SET synchronous_commit = on"
	fi
	q -c "SELECT pg_reload_conf()" >/dev/null
	sleep 0.5
	q -c "CHECKPOINT"
}

redis_start() { # redis_start NAME [redis-server options...]
	local name=$1
	shift
	mkdir -p "$dir/redis-$name"
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$dir/redis-$name" --save '' \
		--logfile "$dir/redis-$name.log" --daemonize no "$@" &
	REDIS_PID=$!
	for _ in $(seq 50); do rcli PING >/dev/null 2>&1 && return 0; sleep 0.1; done
	die "redis-server did not start (see $dir/redis-$name.log)"
}
redis_stop() {
	kill "$REDIS_PID"
	wait "$REDIS_PID" 2>/dev/null || true
	REDIS_PID=
}

# ---------------------------------------------------------------------------------------------
echo "== [$(($(date +%s) - START)) s] loading (throwaway cluster in $dir, port $PG_PORT)" >&2
bench_load "$TASK_QUEUE"

# ---------------------------------------------------------------------------------------------
# BENCH_ONLY="1 4" runs only those rows (2d is row 2, durable).
want() { [ -z "${BENCH_ONLY:-}" ] || [[ " $BENCH_ONLY " == *" $1 "* ]]; }

set_mode cpu
want 1 && measure 1 plain fenced plfenced leased
if want 2; then
	redis_start volatile --appendonly no
	measure 2 floor fencelock plpgsql redis
	redis_stop
fi
want 3 && measure 3 rows_1k rows_1m
if ! want 4; then
	:
elif [ "$HAVE_WAIT" -gt 0 ]; then
	measure 4 hot_poll hot_wait
else
	echo "== row 4: fencelock.acquire(text, text, interval, interval) does not exist: polling only" >&2
	measure 4 hot_poll
fi
if ! want 5; then
	:
elif [ "$HAVE_CLAIM" = 1 ]; then
	measure 5 claim_sql_1k claim_fl_1k claim_fl_1m
	measure 5 claim_sql_10 claim_fl_10
else
	echo "== row 5: fencelock.claim does not exist: skipped" >&2
fi

if want 2d; then
	set_mode durable
	redis_start durable --appendonly yes --appendfsync always
	measure 2d dfloor dfencelock dplpgsql dredis
	redis_stop
fi

# ---------------------------------------------------------------------------------------------
# The report.
med() { median <<<"${RATE[$1]}"; }
medcpu() { median <<<"${CPU[$1]}"; }
fmt() { awk -v x="$1" 'BEGIN { if (x == "nan") print "—"; else if (x >= 100) printf "%.0f", x; else printf "%.3g", x }'; }
yes_no() { awk "BEGIN { print ($1) ? \"**met**\" : \"**missed**\" }"; }
GOALS=()

# line ROW MODE LABEL KEY [BASE GOAL-TEXT GOAL-CONDITION-ON-r]
line() {
	local row=$1 mode=$2 label=$3 k=$4 base=${5:-} goal=${6:-} cond=${7:-} ratio="1 (baseline)"
	[ -n "${RATE[$k]:-}" ] || return 0 # a row left out by BENCH_ONLY
	local met="" m lo hi
	if [ -n "$base" ]; then
		read -r m lo hi < <(ratio_stats "$k" "$base")
		ratio="$m ($lo–$hi)"
		if [ -n "$cond" ]; then
			met=$(yes_no "${cond//r/$m}")
			GOALS+=("row $row ($mode): $label — goal $goal: $m, $met")
		fi
	fi
	echo "| $row | $mode | $label | $(fmt "$(med "$k")") | $(fmt "$(medcpu "$k")") | $ratio | $goal | $met |"
}

# Row 1's second goal: the C trigger's cost over a plain UPDATE as a share of the PL/pgSQL
# trigger's, from per-transaction wall time (1/tps, median of rounds) and from server CPU.
overhead_line() {
	local wall cpu met
	[ -n "${RATE[plain]:-}" ] || return 0
	wall=$(paste <(tr ' ' '\n' <<<"${RATE[plain]}" | grep .) \
		<(tr ' ' '\n' <<<"${RATE[fenced]}" | grep .) \
		<(tr ' ' '\n' <<<"${RATE[plfenced]}" | grep .) |
		awk '{ print (1 / $2 - 1 / $1) / (1 / $3 - 1 / $1) }' | median)
	wall=$(awk -v x="$wall" 'BEGIN { printf "%.3f", x }')
	cpu=$(awk -v p="$(medcpu plain)" -v f="$(medcpu fenced)" -v l="$(medcpu plfenced)" \
		'BEGIN { printf "%.3f", (f - p) / (l - p) }')
	met=$(yes_no "$wall <= 1/3")
	GOALS+=("row 1 (CPU): C trigger overhead ÷ PL/pgSQL trigger overhead — goal ≤ 0.33: $wall (server CPU: $cpu), $met")
	echo "| 1 | CPU | overhead of the C trigger ÷ overhead of the PL/pgSQL trigger | | | $wall (server CPU: $cpu) | ≤ 0.33 | $met |"
}

report() {
	local pgv redisv cpu mem
	pgv=$(q -c "SHOW server_version")
	redisv=$(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')
	cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
	mem=$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
	echo
	echo "## fencelock benchmark ($(date -u '+%Y-%m-%d %H:%M UTC'))"
	echo
	echo "Command: \`${BENCH_CMD:-make bench}\` (BENCH_ROUNDS=$ROUNDS BENCH_SECONDS=$SECS BENCH_WARMUP=$WARMUP BENCH_CLIENTS=$CLIENTS)"
	echo
	echo "Machine: nproc $NCPU, $cpu, $mem RAM, Linux $(uname -r); PostgreSQL $pgv; Redis $redisv"
	echo "(loopback TCP, hiredis $(dpkg-query -W -f='${Version}' libhiredis-dev 2>/dev/null))."
	echo "Cluster: shared_buffers = 1GB, max_wal_size = 16GB, checkpoint_timeout = 1h, otherwise"
	echo "defaults (autovacuum on); data directory on $(df -T "$dir" | awk 'NR == 2 { print $2 }')."
	echo "Clients: pgbench -M prepared -c $CLIENTS -j $THREADS (row 4: -c $HOT_CLIENTS -j $NCPU); redis_lease -c $CLIENTS."
	echo "Each contender ran $ROUNDS rounds of $SECS s, interleaved (A B C, A B C, ...), after one warm-up"
	echo "run of $WARMUP s; every run was checked against the server's own count of the work."
	echo "Mode CPU: fsync = off, synchronous_commit = off (acquire, and the floor's and PL/pgSQL's grants,"
	echo "still commit synchronously: a WAL write without fsync); Redis without persistence."
	echo "Mode durable: fsync = on, synchronous_commit = on; Redis appendonly yes, appendfsync always."
	echo
	echo "Rate: median over rounds, per second: UPDATEs (row 1), acquire + release cycles (rows 2-3),"
	echo "grants (row 4), tasks claimed and completed (row 5).  Server CPU: µs of CPU used by all"
	echo "PostgreSQL processes (or by redis-server) per unit of rate, median over rounds.  Ratio: median"
	echo "over rounds of rate ÷ the baseline's rate in the same round (min–max over rounds)."
	echo
	echo "| row | mode | contender | rate /s | server CPU µs | ratio | goal | met |"
	echo "|---|---|---|---|---|---|---|---|"
	line 1 CPU "UPDATE by primary key, no trigger" plain
	line 1 CPU "same UPDATE, C fence_trigger" fenced plain "≥ 0.97" "r >= 0.97"
	line 1 CPU "same UPDATE, PL/pgSQL trigger" plfenced plain
	line 1 CPU "same UPDATE, lease-bound C fence_trigger (lease=)" leased fenced "≥ 0.870 (cost ≤ 1.15× fenced)" "r >= 1 / 1.15"
	overhead_line
	line 2 CPU "floor: two bare UPDATEs by primary key" floor
	line 2 CPU "fencelock acquire + release" fencelock floor "≥ 0.95" "r >= 0.95"
	line 2 CPU "PL/pgSQL acquire + release" plpgsql floor
	line 2 CPU "Redis SET NX PX + EVALSHA compare-and-delete" redis floor
	line 2 durable "floor: two bare UPDATEs by primary key" dfloor
	line 2 durable "fencelock acquire + release" dfencelock dfloor "≥ 0.95" "r >= 0.95"
	line 2 durable "PL/pgSQL acquire + release" dplpgsql dfloor
	line 2 durable "Redis, appendfsync always" dredis dfloor
	line 3 CPU "fencelock cycle, 1 000 lease rows" rows_1k
	line 3 CPU "fencelock cycle, 1 000 000 lease rows" rows_1m rows_1k "≥ 0.833 (cost ≤ 1.2×)" "r >= 1 / 1.2"
	line 4 CPU "hot resource, $HOT_CLIENTS clients, polling every $POLL_MS ms" hot_poll
	if ! want 4; then
		:
	elif [ -n "${RATE[hot_wait]:-}" ]; then
		line 4 CPU "hot resource, $HOT_CLIENTS clients, waiting acquire" hot_wait hot_poll
	else
		echo "| 4 | CPU | hot resource, waiting acquire | skipped: \`fencelock.acquire(text, text, interval, interval)\` does not exist yet | | | | |"
	fi
	if ! want 5; then
		:
	elif [ -n "${RATE[claim_fl_1k]:-}" ]; then
		line 5 CPU "hand-written SKIP LOCKED claim + complete" claim_sql_1k
		line 5 CPU "fencelock.claim + complete" claim_fl_1k claim_sql_1k "≥ 0.95" "r >= 0.95"
		line 5 CPU "fencelock.claim, 1 000 000 finished rows" claim_fl_1m claim_fl_1k "≥ 0.833 (cost ≤ 1.2×)" "r >= 1 / 1.2"
		line 5 CPU "hand-written claim + complete, 10 rows per claim (rate: transactions)" claim_sql_10
		line 5 CPU "fencelock.claim + complete, 10 rows per claim" claim_fl_10 claim_sql_10 "≥ 0.95" "r >= 0.95"
	else
		echo "| 5 | CPU | claim + complete | skipped: \`fencelock.claim\` does not exist yet | | | | |"
	fi
	echo
	if [ -n "${RATE[fencelock]:-}" ] && [ -n "${RATE[dfencelock]:-}" ]; then
		echo "Also (median of per-round ratios): fencelock ÷ PL/pgSQL $(ratio_stats fencelock plpgsql | cut -d' ' -f1) (CPU),"
		echo "$(ratio_stats dfencelock dplpgsql | cut -d' ' -f1) (durable); fencelock ÷ Redis $(ratio_stats fencelock redis | cut -d' ' -f1) (CPU),"
		echo "$(ratio_stats dfencelock dredis | cut -d' ' -f1) (durable)."
	fi
	for k in hot_poll hot_wait; do
		[ -z "${NOTE[$k.sql]:-}" ] || echo "Row 4, $k (last round): ${NOTE[$k.sql]}."
	done
	echo
	echo "Goals:"
	printf -- '- %s\n' "${GOALS[@]}"
}

echo "== [$(($(date +%s) - START)) s] done" >&2
report | tee ${BENCH_OUT:+"$BENCH_OUT"}
