#!/usr/bin/env bash
# The seed's workload (issue 28, doc/bench.md "The seed's workload"): lock a key, write its
# business row carrying the lock's token, release; fencelock against Redis, etcd and ZooKeeper,
# each paired with the same PostgreSQL.  bench/seed.c is the client of every contender.
#
#   make bench-seed                                  3 rounds of 10 s per cell (~25 minutes)
#   SEED_ROUNDS=1 SEED_SECONDS=2 make bench-seed     smoke run (~4 minutes)
#
# As root.  Installs what is missing (Debian 12: redis-server, etcd-server, zookeeper and the C
# client libraries), starts on loopback, with data directories in a temporary directory on disk:
# a PostgreSQL cluster (SEED_PORT, 55200), redis-server (+1), a single-member etcd (client +2,
# peer +3) and ZooKeeper (client +4, admin +5).  For each mode (durable, then CPU: the services
# are restarted with the mode's settings and fresh data) and each client count (SEED_CLIENTS,
# "2 8 32"), every contender runs once as warm-up, then SEED_ROUNDS interleaved rounds (A B C ...,
# A B C ...) of SEED_SECONDS.  After every run the business rows and the lock service are checked
# (bench/seed.c -V): rows updated = the client's cycles, no row's token above the service's latest
# token for its key, nothing left locked; a failed check ends the run.  Then the safety row.
#
# Environment: SEED_ROUNDS (3), SEED_SECONDS (10), SEED_WARMUP (seconds per contender before a
# cell's first round: 2, or 1 when SEED_SECONDS < 5), SEED_CLIENTS ("2 8 32"), SEED_MODES
# ("durable cpu"), SEED_CONTENDERS ("fl3 fl2 fl1 flx redis etcd zk"), SEED_KEYS (1000), SEED_PORT
# (55200: six ports from it), SEED_OUT (also write the report to this file), SEED_BUILD (1: build
# and install fencelock first, as bench/run.sh does; 0: use the installed one), SEED_SAFETY (1),
# BENCH_KEEP=1 (keep the temporary directory).
START=$(date +%s)
cd "$(dirname "$0")/.."
. scripts/lib.sh
. bench/lib.sh # q, pg_ticks, proc_ticks

ROUNDS=${SEED_ROUNDS:-3}
SECS=${SEED_SECONDS:-10}
if [ -z "${SEED_WARMUP:-}" ]; then
	if [ "$SECS" -lt 5 ]; then WARMUP=1; else WARMUP=2; fi
else
	WARMUP=$SEED_WARMUP
fi
CLIENT_COUNTS=${SEED_CLIENTS:-2 8 32}
MODES=${SEED_MODES:-durable cpu}
CONTENDERS=${SEED_CONTENDERS:-fl3 fl2 fl1 flx redis etcd zk}
KEYS=${SEED_KEYS:-1000}
BASE=${SEED_PORT:-55200}
PG_PORT=$BASE
REDIS_PORT=$((BASE + 1))
ETCD_PORT=$((BASE + 2))
ETCD_PEER=$((BASE + 3))
ZK_PORT=$((BASE + 4))
ZK_ADMIN=$((BASE + 5))
TICK=$(getconf CLK_TCK)
ZK_CP=/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-nop.jar

die() {
	echo "seed: $*" >&2
	exit 1
}

fl_deps libhiredis-dev redis-server redis-tools etcd-server etcd-client zookeeper \
	libzookeeper-mt-dev libcurl4-openssl-dev
if [ "${SEED_BUILD:-1}" = 1 ]; then
	fl_build
else
	[ -f "$PG_BIN/../lib/fencelock.so" ] || [ -f "$("$PG_BIN/pg_config" --pkglibdir)/fencelock.so" ] ||
		die "fencelock is not installed for $PG_BIN (SEED_BUILD=1 builds and installs it)"
fi

# On disk, not tmpfs: the durable mode must pay for real fsyncs.
dir=$(mktemp -d /var/tmp/fencelock-seed.XXXXXX)
chmod 755 "$dir"
REDIS_PID= ETCD_PID= ZK_PID=
services_stop() {
	local p
	for p in "$REDIS_PID" "$ETCD_PID" "$ZK_PID"; do
		[ -z "$p" ] || { kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; }
	done
	REDIS_PID= ETCD_PID= ZK_PID=
}
cleanup() {
	services_stop
	fl_cluster_stop "$dir"
	[ "${BENCH_KEEP:-0}" = 1 ] && echo "== kept $dir" >&2 || rm -rf "$dir"
}
trap cleanup EXIT

cc -O2 -Wall -o "$dir/seed" bench/seed.c -I"$(pg_config --includedir)" -lpq -lhiredis -lcurl \
	-lzookeeper_mt -lpthread || die "cannot build bench/seed.c"
SEED_ARGS=(-n "$KEYS" -r "$REDIS_PORT" -e "http://127.0.0.1:$ETCD_PORT" -z "127.0.0.1:$ZK_PORT")
# The contenders reach PostgreSQL over loopback TCP too, as they reach the lock services.
seed() { PGHOST=127.0.0.1 PGDATABASE=seed "$dir/seed" "${SEED_ARGS[@]}" "$@"; }

fl_cluster_start "$dir" "$PG_PORT" \
	"listen_addresses = '127.0.0.1'" \
	"shared_buffers = 1GB" \
	"max_wal_size = 16GB" \
	"checkpoint_timeout = 1h" \
	"max_connections = 100" \
	"log_min_messages = warning"
q -c "CREATE DATABASE seed"
q -d seed -c "CREATE EXTENSION fencelock"

# Business tables, one per contender (each lock service's tokens are its own), rows 0 .. KEYS
# (row 0: the safety row's).  fencelock's forms: fence_trigger on last_fence; the others: none
# (their UPDATE carries the token condition).  Recreated for every mode: a restarted lock service
# starts its tokens again.
tables_reset() {
	local c
	for c in $CONTENDERS; do
		q -d seed -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS seed_$c" \
			-c "CREATE TABLE seed_$c (id int PRIMARY KEY, last_fence bigint NOT NULL DEFAULT 0,
				writes bigint NOT NULL DEFAULT 0, status text) WITH (fillfactor = 70)" \
			-c "INSERT INTO seed_$c (id) SELECT generate_series(0, $KEYS)"
		case $c in
		fl*) q -d seed -c "CREATE TRIGGER fence BEFORE UPDATE ON seed_$c FOR EACH ROW
			EXECUTE FUNCTION fencelock.fence_trigger('last_fence')" ;;
		esac
		WRITES[$c]=0
	done
	q -d seed -c "VACUUM ANALYZE" -c "CHECKPOINT"
}

wait_for() { # wait_for WHAT LOG COMMAND...: up to 30 s
	local what=$1 log=$2
	shift 2
	for _ in $(seq 150); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
	tail -20 "$log" >&2
	die "$what did not start (see $log)"
}

# services_start MODE: PostgreSQL's settings, then redis-server, etcd and ZooKeeper with fresh
# data directories.
services_start() {
	local mode=$1 d=$dir/$1
	mkdir -p "$d/redis" "$d/etcd" "$d/zk"
	if [ "$mode" = cpu ]; then
		q -c "ALTER SYSTEM SET fsync = off" -c "ALTER SYSTEM SET synchronous_commit = off"
	else
		q -c "ALTER SYSTEM SET fsync = on" -c "ALTER SYSTEM SET synchronous_commit = on"
	fi
	fl_as_pg pg_ctl -D "$dir/data" -l "$dir/server.log" -w restart >/dev/null

	local aof=(--appendonly yes --appendfsync always)
	[ "$mode" = durable ] || aof=(--appendonly no)
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$d/redis" --save '' \
		--logfile "$d/redis.log" --daemonize no "${aof[@]}" &
	REDIS_PID=$!
	wait_for redis-server "$d/redis.log" redis-cli -p "$REDIS_PORT" PING

	# etcd 3.4 fsyncs its WAL in both modes: --unsafe-no-fsync arrived in 3.5.
	etcd --name seed --data-dir "$d/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER" \
		--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
		--initial-cluster "seed=http://127.0.0.1:$ETCD_PEER" >"$d/etcd.log" 2>&1 &
	ETCD_PID=$!
	wait_for etcd "$d/etcd.log" env ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:$ETCD_PORT" endpoint health

	# tickTime 200 ms: sessions may be as short as 400 ms (2 ticks), for the safety row's paused
	# holder; the benchmark's clients ask for 30 s and get the maximum, 20 ticks (4 s).
	{
		echo "tickTime=200"
		echo "dataDir=$d/zk"
		echo "clientPort=$ZK_PORT"
		echo "clientPortAddress=127.0.0.1"
		echo "admin.serverAddress=127.0.0.1"
		echo "admin.serverPort=$ZK_ADMIN"
		echo "maxClientCnxns=0"
		[ "$mode" = durable ] || echo "forceSync=no"
	} >"$d/zoo.cfg"
	java -Xmx512m -cp "$ZK_CP" org.apache.zookeeper.server.ZooKeeperServerMain "$d/zoo.cfg" \
		>"$d/zk.log" 2>&1 &
	ZK_PID=$!
	wait_for ZooKeeper "$d/zk.log" seed -C zk -I
	tables_reset
}

# ---------------------------------------------------------------------------------------------
# Results: RATE[mode/clients/contender] and CPU_PG, CPU_SVC: one value per round, space-separated.
declare -A RATE CPU_PG CPU_SVC WRITES SAFETY

svc_pid() {
	case $1 in
	redis) echo "$REDIS_PID" ;;
	etcd) echo "$ETCD_PID" ;;
	zk) echo "$ZK_PID" ;;
	esac
}

check() { # check WHAT CONDITION-TEXT: dies unless the awk condition holds
	awk "BEGIN { exit !($2) }" || die "check failed for $1: $2"
}

# one CONTENDER CLIENTS SECONDS: one verified run; sets R (cycles/s), P and S (µs of PostgreSQL's
# and of the lock service's CPU per cycle; S is "-" for fencelock).
one() {
	local c=$1 n=$2 secs=$3 out v pid p0 p1 s0=0 s1=0 cycles busy writes seconds vwrites viol held
	pid=$(svc_pid "$c")
	p0=$(pg_ticks)
	[ -z "$pid" ] || s0=$(proc_ticks "$pid")
	out=$(seed -C "$c" -c "$n" -T "$secs") || die "seed -C $c -c $n failed: $out"
	p1=$(pg_ticks)
	[ -z "$pid" ] || s1=$(proc_ticks "$pid")
	read -r cycles busy writes seconds < <(sed 's/[a-z]*=//g' <<<"$out")
	v=$(seed -C "$c" -V) || die "seed -C $c -V failed: $v"
	read -r vwrites viol held _ < <(sed 's/[a-z]*=//g' <<<"$v")
	check "$c: writes reported = cycles ($out)" "$writes == $cycles && $cycles > 0"
	check "$c: rows updated = cycles ($v, before ${WRITES[$c]})" "$vwrites - ${WRITES[$c]} == $cycles"
	check "$c: no token above the service's ($v)" "$viol == 0"
	check "$c: nothing left locked ($v)" "$held == 0"
	WRITES[$c]=$vwrites
	R=$(awk -v n="$cycles" -v s="$seconds" 'BEGIN { printf "%.1f", n / s }')
	P=$(awk -v d=$((p1 - p0)) -v n="$cycles" -v hz="$TICK" 'BEGIN { printf "%.1f", d * 1e6 / hz / n }')
	if [ -n "$pid" ]; then
		S=$(awk -v d=$((s1 - s0)) -v n="$cycles" -v hz="$TICK" 'BEGIN { printf "%.1f", d * 1e6 / hz / n }')
	else
		S=-
	fi
	B=$busy
}

for mode in $MODES; do
	echo "== [$(($(date +%s) - START)) s] mode $mode: starting the services (in $dir)" >&2
	services_stop
	services_start "$mode"
	for n in $CLIENT_COUNTS; do
		echo "== [$(($(date +%s) - START)) s] $mode, $n clients: $CONTENDERS (${ROUNDS} x ${SECS} s)" >&2
		if [ "$WARMUP" -gt 0 ]; then
			for c in $CONTENDERS; do one "$c" "$n" "$WARMUP"; done
		fi
		for ((r = 1; r <= ROUNDS; r++)); do
			for c in $CONTENDERS; do
				one "$c" "$n" "$SECS"
				k=$mode/$n/$c
				RATE[$k]+="$R "
				CPU_PG[$k]+="$P "
				CPU_SVC[$k]+="$S "
				echo "   round $r $c: $R/s ($B busy), CPU/cycle PostgreSQL $P us, service $S us" >&2
			done
		done
	done
done

# The safety row, in the last mode's services: fencelock once (its three forms share the lease and
# the trigger), then each lock service; with the token condition and without it.
if [ "${SEED_SAFETY:-1}" = 1 ]; then
	echo "== [$(($(date +%s) - START)) s] safety row" >&2
	for c in $CONTENDERS; do
		case $c in fl2 | fl1 | flx) continue ;; esac
		for form in cond naive; do
			ttl=1000
			[ "$c" != etcd ] || ttl=2000 # etcd's shortest lease (1.5 election timeouts, rounded up)
			out=$(seed -C "$c" -S "$form" -t "$ttl") || die "safety $c $form failed: $out"
			echo "   safety $c $form: $out" >&2
			SAFETY[$c/$form]=$(sed -n 's/^safety=\([a-z]*\) a=\([a-z-]*\).*/\1 (A'"'"'s write: \2)/p' <<<"$out" | tr - ' ')
		done
		v=$(seed -C "$c" -V) || die "seed -C $c -V failed: $v"
		read -r _ viol held _ < <(sed 's/[a-z]*=//g' <<<"$v")
		check "$c after the safety row: nothing left locked ($v)" "$viol == 0 && $held == 0"
	done
fi

# ---------------------------------------------------------------------------------------------
# The report.
median() { tr ' ' '\n' | grep -v '^-\?$' | sort -g | awk '{ a[NR] = $1 } END {
	if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2];
	else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
fmt() { awk -v x="$1" 'BEGIN { if (x == "nan" || x == "") print "—"; else if (x >= 100) printf "%.0f", x; else printf "%.3g", x }'; }
mode_label() { [ "$1" = cpu ] && echo CPU || echo "$1"; }
label() {
	case $1 in
	fl3) echo "fencelock, 3 transactions" ;;
	fl2) echo "fencelock, acquire then UPDATE+release in one" ;;
	fl1) echo "fencelock, the cycle in one transaction" ;;
	flx) echo "fencelock, the cycle in one statement (acquire_xact)" ;;
	redis) echo "Redis + PG" ;;
	etcd) echo "etcd + PG" ;;
	zk) echo "ZooKeeper + PG" ;;
	esac
}

report() {
	local pgv cpu mem mode n c k head sep row best_fl best_other bf bo cell
	pgv=$(q -c "SHOW server_version")
	cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
	mem=$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
	echo
	echo "## The seed's workload ($(date -u '+%Y-%m-%d %H:%M UTC'))"
	echo
	echo "Command: \`${SEED_CMD:-make bench-seed}\` (SEED_ROUNDS=$ROUNDS SEED_SECONDS=$SECS SEED_WARMUP=$WARMUP SEED_KEYS=$KEYS)"
	echo
	echo "Machine: nproc $(nproc), $cpu, $mem RAM, Linux $(uname -r), data on $(df -T "$dir" | awk 'NR == 2 { print $2 }');"
	echo "PostgreSQL $pgv; $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/Redis \1/p');"
	echo "etcd $(etcd --version | sed -n 's/^etcd Version: //p') (v3 JSON gateway, libcurl $(dpkg-query -W -f='${Version}' libcurl4-openssl-dev 2>/dev/null));"
	echo "ZooKeeper $(dpkg-query -W -f='${Version}' zookeeper 2>/dev/null) (C client libzookeeper_mt), $(java -version 2>&1 | head -1)."
	echo "Every run verified: rows updated = cycles, no token above the service's, nothing left locked."
	echo "Mode durable: fsync, synchronous_commit on; Redis appendfsync always; etcd, ZooKeeper fsync (defaults)."
	echo "Mode CPU: fsync, synchronous_commit off (a grant committed on its own still flushes, without fsync; one released in its own transaction does not);"
	echo "Redis without AOF; ZooKeeper forceSync=no; etcd 3.4 still fsyncs (no --unsafe-no-fsync before 3.5)."
	echo
	echo "Cycles per second (median of $ROUNDS rounds); ratio: the best fencelock form ÷ the best other contender."
	echo
	head="| mode | clients |"
	sep="|---|---|"
	for c in $CONTENDERS; do head+=" $(label "$c") |"; sep+="---|"; done
	echo "$head ratio |"
	echo "$sep---|"
	for mode in $MODES; do
		for n in $CLIENT_COUNTS; do
			row="| $(mode_label "$mode") | $n |"
			bf=0 bo=0 best_fl=- best_other=-
			for c in $CONTENDERS; do
				k=$mode/$n/$c
				m=$(median <<<"${RATE[$k]:-}")
				row+=" $(fmt "$m") |"
				case $c in
				fl*) if awk "BEGIN { exit !($m > $bf) }"; then bf=$m best_fl=$c; fi ;;
				*) if awk "BEGIN { exit !($m > $bo) }"; then bo=$m best_other=$c; fi ;;
				esac
			done
			if [ "$bo" != 0 ] && [ "$bf" != 0 ]; then
				row+=" $(awk -v f="$bf" -v o="$bo" 'BEGIN { printf "%.2f", f / o }')× ($best_fl ÷ $best_other) |"
			else
				row+=" — |"
			fi
			echo "$row"
		done
	done
	echo
	echo "Server CPU per cycle, µs (median of rounds): PostgreSQL (all its processes) + the lock service's process."
	echo
	echo "$head"
	echo "$sep"
	for mode in $MODES; do
		for n in $CLIENT_COUNTS; do
			row="| $(mode_label "$mode") | $n |"
			for c in $CONTENDERS; do
				k=$mode/$n/$c
				cell=$(fmt "$(median <<<"${CPU_PG[$k]:-}")")
				case $c in fl*) ;; *) cell+=" + $(fmt "$(median <<<"${CPU_SVC[$k]:-}")")" ;; esac
				row+=" $cell |"
			done
			echo "$row"
		done
	done
	if [ "${SEED_SAFETY:-1}" = 1 ]; then
		echo
		echo "Safety row: holder A takes key 0 (TTL 1 s; etcd 2 s), is SIGSTOPped past it, B takes over and"
		echo "writes its token, A is SIGCONTed and writes its old token. B's row:"
		echo
		echo "| contender | with the token condition | naive write (no condition) |"
		echo "|---|---|---|"
		for c in $CONTENDERS; do
			case $c in fl2 | fl1 | flx) continue ;; fl3) cell="fencelock (fence_trigger)" ;; *) cell=$(label "$c") ;; esac
			echo "| $cell | ${SAFETY[$c/cond]:-—} | ${SAFETY[$c/naive]:-—} |"
		done
	fi
}

echo "== [$(($(date +%s) - START)) s] done" >&2
report | tee ${SEED_OUT:+"$SEED_OUT"}
