#!/usr/bin/env bash
# Server CPU per cycle at 2, 8 and 32 clients (doc/bench.md, "What scaled badly from 8 to 32
# clients"): fencelock's three-transaction cycle and its one-statement form beside two floors
# without fencelock (three bare transactions; one UPDATE), CPU mode (fsync and synchronous_commit
# off), pgbench -M prepared -j 2 over the socket, 1 000 keys; then pg_stat_activity's wait events
# sampled during the three-transaction cycle at 32 clients.  ~3 minutes.
#
#   make bench-scale     SCALE_SECONDS (5 per run), SCALE_ROUNDS (2), SCALE_CLIENTS ("2 8 32")
START=$(date +%s)
cd "$(dirname "$0")/.."
. scripts/lib.sh
BENCH_PG_PORT=${BENCH_PG_PORT:-54373}
. bench/lib.sh # q, pg_ticks

SECS=${SCALE_SECONDS:-5}
ROUNDS=${SCALE_ROUNDS:-2}
CLIENT_COUNTS=${SCALE_CLIENTS:-2 8 32}
TICK=$(getconf CLK_TCK)

fl_deps
[ "${SCALE_BUILD:-1}" = 1 ] && fl_build
dir=$(mktemp -d /var/tmp/fencelock-scale.XXXXXX)
chmod 755 "$dir"
cleanup() { fl_cluster_stop "$dir"; rm -rf "$dir"; }
trap cleanup EXIT
fl_cluster_start "$dir" "$BENCH_PG_PORT" "shared_buffers = 1GB" "max_wal_size = 16GB" \
	"checkpoint_timeout = 1h" "max_connections = 100" "fsync = off" "synchronous_commit = off" \
	"log_min_messages = warning"
q -c "CREATE EXTENSION fencelock" -f bench/scale_setup.sql >/dev/null

# run SCRIPT CLIENTS: "cycles/s µs-per-cycle"
run() {
	local t0 t1 n
	t0=$(pg_ticks)
	n=$(pgbench -n -M prepared -c "$2" -j 2 -T "$SECS" -f "bench/$1.sql" 2>&1 |
		sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p')
	t1=$(pg_ticks)
	[ -n "$n" ] && [ "$n" -gt 0 ] || { echo "scale: $1 at $2 clients did no cycle" >&2; exit 1; }
	awk -v n="$n" -v s="$SECS" -v d="$((t1 - t0))" -v tick="$TICK" \
		'BEGIN { printf "%.0f %.0f\n", n / s, d / tick * 1e6 / n }'
}

declare -A CPU RATE
for r in $(seq "$ROUNDS"); do
	for c in $CLIENT_COUNTS; do
		for s in scale_fl3 scale_flx scale_floor3 scale_update; do
			read -r rate cpu < <(run "$s" "$c")
			RATE[$s/$c]+="$rate "
			CPU[$s/$c]+="$cpu "
		done
	done
done
echo "| clients | fencelock, 3 transactions | fencelock, one statement (acquire_xact) | floor: 3 bare transactions | floor: 1 UPDATE |"
echo "|---|---|---|---|---|"
for c in $CLIENT_COUNTS; do
	line="| $c |"
	for s in scale_fl3 scale_flx scale_floor3 scale_update; do
		line+=" $(tr ' ' '\n' <<<"${CPU[$s/$c]}" | grep . | tr '\n' '/' | sed 's,/$,,') µs ($(tr ' ' '\n' <<<"${RATE[$s/$c]}" | grep . | tr '\n' '/' | sed 's,/$,,')/s) |"
	done
	echo "$line"
done
echo
echo "Server CPU per cycle in µs, each round (cycles per second in brackets)."
echo
# Wait events of the client backends while the three-transaction cycle runs at 32 clients.
pgbench -n -M prepared -c 32 -j 2 -T 8 -f bench/scale_fl3.sql >/dev/null 2>&1 &
pb=$!
sleep 1
for _ in $(seq 200); do
	q -c "SELECT coalesce(wait_event_type, 'CPU') || ':' || coalesce(wait_event, '-') || ':' || state
		FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
	sleep 0.03
done | sort | uniq -c | sort -rn | awk 'BEGIN { print "Wait events at 32 clients (samples):" } { print "    " $0 }'
wait "$pb" || true
echo "scale: done in $(($(date +%s) - START)) s" >&2
