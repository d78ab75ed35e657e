#!/usr/bin/env bash
# Waiting claim vs polling (doc/bench.md, "Waiting claim"): the latency from a job's INSERT commit
# to its claim with CW_WORKERS (8) workers, and the server CPU per job, for claim(..., wait => ...),
# for a loop that claims and sleeps CW_POLL_MS (100) when it got nothing, and for workers that
# LISTEN and are woken by a NOTIFY from a statement trigger on the INSERT (graphile-worker's way).  Interleaved rounds
# (CW_ROUNDS, 3) of CW_JOBS (400) jobs inserted one by one every CW_INTERVAL_MS (25, jittered).
#
#   bash bench/claim_wait.sh            as root; a throwaway cluster on BENCH_PG_PORT (54371)
START=$(date +%s)
cd "$(dirname "$0")/.."
. scripts/lib.sh

PORT=${BENCH_PG_PORT:-54371}
. bench/lib.sh # pg_ticks (after PORT: lib.sh gives BENCH_PG_PORT its own default)
WORKERS=${CW_WORKERS:-8}
JOBS=${CW_JOBS:-400}
INTERVAL=${CW_INTERVAL_MS:-25}
POLL=${CW_POLL_MS:-100}
ROUNDS=${CW_ROUNDS:-3}
TICK=$(getconf CLK_TCK)

fl_build
dir=$(mktemp -d /var/tmp/fencelock-claimwait.XXXXXX)
chmod 755 "$dir"
trap 'fl_cluster_stop "$dir"; rm -rf "$dir"' EXIT
cc -O2 -Wall -I"$("$PG_BIN/pg_config" --includedir)" -o "$dir/claim_wait" bench/claim_wait.c \
	-L"$("$PG_BIN/pg_config" --libdir)" -lpq -lpthread || exit 1
fl_cluster_start "$dir" "$PORT" "max_connections = 50" "log_min_messages = warning"
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
q -c "CREATE EXTENSION fencelock" -c "CREATE TABLE lat_jobs (id int PRIMARY KEY,
	state text NOT NULL DEFAULT 'ready', lease_owner text, lease_until timestamptz,
	attempt int NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0)" \
	-c "SELECT fencelock.enable_tasks('lat_jobs')" \
	-c "CREATE FUNCTION lat_notify() RETURNS trigger LANGUAGE plpgsql AS
		\$\$ BEGIN NOTIFY fencelock_jobs; RETURN NULL; END \$\$" >/dev/null

echo "| round | mode | jobs | median ms | p90 ms | p99 ms | max ms | claims without a row | server CPU µs per job |"
echo "|---|---|---|---|---|---|---|---|---|"
for ((r = 1; r <= ROUNDS; r++)); do
	for mode in wait poll notify; do
		[ $mode != notify ] || q -c "CREATE TRIGGER lat_notify AFTER INSERT ON lat_jobs
			FOR EACH STATEMENT EXECUTE FUNCTION lat_notify()"
		t0=$(pg_ticks)
		out=$("$dir/claim_wait" -m $mode -w "$WORKERS" -n "$JOBS" -i "$INTERVAL" -p "$POLL") || exit 1
		t1=$(pg_ticks)
		[ $mode != notify ] || q -c "DROP TRIGGER lat_notify ON lat_jobs"
		done_rows=$(q -c "SELECT count(*) FROM lat_jobs WHERE state = 'done'")
		[ "$done_rows" = "$JOBS" ] || { echo "claim_wait: $done_rows of $JOBS jobs done" >&2; exit 1; }
		read -r jobs med p90 p99 max empty < <(sed 's/[a-z_0-9]*=//g' <<<"$out")
		cpu=$(awk -v d=$((t1 - t0)) -v n="$JOBS" -v hz="$TICK" 'BEGIN { printf "%.0f", d * 1e6 / hz / n }')
		case $mode in
		wait) label="claim(..., wait => '1 s')" ;;
		poll) label="claim, sleep ${POLL} ms when empty" ;;
		notify) label="LISTEN; claim, wait for a NOTIFY when empty" ;;
		esac
		echo "| $r | $label | $jobs | $med | $p90 | $p99 | $max | $empty | $cpu |"
	done
done
echo
echo "$WORKERS workers, a job every $INTERVAL ms (jittered ±50 %), $(($(date +%s) - START)) s, $(date -u '+%Y-%m-%d %H:%M UTC')."
