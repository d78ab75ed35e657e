#!/usr/bin/env bash
# Hand-offs (doc/bench.md, "Hand-offs"): from a lease's end to its waiter's acquire returning, p50
# and p99 over HO_N (1000) hand-offs each: a release in autocommit, a release inside
# BEGIN ... COMMIT (both from the commit's acknowledgement to the waiter's return), and an expiry
# chain of HO_WAITERS (4) waiters with a ttl of HO_TTL_MS (50) that never release (from the
# previous lease's expires_at to the takeover's return, on the server's clock).
#
#   PG_BIN=... bash bench/handoff.sh     as root; a throwaway cluster on BENCH_PG_PORT (54372)
#   HO_MODES="xact expiry" HO_N=100 ...   some of the rows, fewer hand-offs
START=$(date +%s)
cd "$(dirname "$0")/.."
. scripts/lib.sh

PORT=${BENCH_PG_PORT:-54372}
N=${HO_N:-1000}
WAITERS=${HO_WAITERS:-4}
TTL=${HO_TTL_MS:-50}
MODES=${HO_MODES:-autocommit xact expiry}

fl_build
dir=$(mktemp -d /var/tmp/fencelock-handoff.XXXXXX)
chmod 755 "$dir"
trap 'fl_cluster_stop "$dir"; rm -rf "$dir"' EXIT
cc -O2 -Wall -I"$("$PG_BIN/pg_config" --includedir)" -o "$dir/handoff" bench/handoff.c \
	-L"$("$PG_BIN/pg_config" --libdir)" -lpq -lpthread || exit 1
fl_cluster_start "$dir" "$PORT" "max_connections = 50" "log_min_messages = warning"
psql -X -q -At -v ON_ERROR_STOP=1 -c "CREATE EXTENSION fencelock" >/dev/null

echo "| hand-off | hand-offs | p50 ms | p90 ms | p99 ms | max ms |"
echo "|---|---|---|---|---|---|"
for mode in $MODES; do
	out=$(LD_LIBRARY_PATH="$("$PG_BIN/pg_config" --libdir)" "$dir/handoff" -m $mode -n "$N" \
		-w "$WAITERS" -t "$TTL") || exit 1
	read -r n p50 p90 p99 max < <(sed 's/[a-z_0-9]*=//g' <<<"$out")
	case $mode in
	autocommit) label="release (autocommit) → waiter's acquire returned" ;;
	xact) label="release in BEGIN … COMMIT → waiter's acquire returned" ;;
	expiry) label="expiry chain, $WAITERS waiters, ttl $TTL ms: expires_at → takeover returned" ;;
	esac
	echo "| $label | $n | $p50 | $p90 | $p99 | $max |"
done
echo
echo "$(($(date +%s) - START)) s, $(date -u '+%Y-%m-%d %H:%M UTC'), $("$PG_BIN/postgres" --version)."
