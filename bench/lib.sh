# Shared by bench/run.sh and bench/callgrind.sh (doc/bench.md).  Source after scripts/lib.sh.

BENCH_PG_PORT=${BENCH_PG_PORT:-54370}   # another port lets several runs share a machine
NROWS=10000          # rows 1 and 2: rows / resources picked from at random

q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

# bench_load QUEUE: the databases and tables of every row, in the cluster named by PGHOST/PGPORT.
#   bench     rows 1, 2, 4 and 5: bench/setup.sql, bench/plpgsql_lease.sql, bench/claim_setup.sql
#   bench_1k  row 3: 1 000 lease rows (every 1000th key), and bench_floor with the same rows
#   bench_1m  row 3: the same keys among 1 000 000 lease rows, and bench_floor likewise
# Sets HAVE_WAIT and HAVE_CLAIM (0 or 1): whether the waiting acquire and claim exist yet.
bench_load() {
	local queue=$1 db
	q -c "CREATE DATABASE bench" -c "CREATE DATABASE bench_1k" -c "CREATE DATABASE bench_1m"
	for db in bench bench_1k bench_1m; do q -d $db -c "CREATE EXTENSION fencelock"; done
	q -d bench -f bench/plpgsql_lease.sql
	q -d bench -v nrows=$NROWS -f bench/setup.sql
	q -d bench -c "INSERT INTO fencelock.lease (resource, fence) VALUES ('hot', 1)"
	q -d bench_1k -c "INSERT INTO fencelock.lease (resource, fence, expires_at)
		SELECT i::text, 1, now() FROM generate_series(1000, 1000000, 1000) AS i"
	q -d bench_1m -c "INSERT INTO fencelock.lease (resource, fence, expires_at)
		SELECT i::text, 1, now() FROM generate_series(1, 1000000) AS i"
	# The floor's table beside them, with the same rows (bench/callgrind.sh compares the two).
	for db in bench_1k bench_1m; do
		q -d $db -c "CREATE TABLE bench_floor (LIKE fencelock.lease INCLUDING ALL) WITH (fillfactor = 70)" \
			-c "INSERT INTO bench_floor SELECT * FROM fencelock.lease" -c "VACUUM ANALYZE"
	done
	HAVE_WAIT=$(q -d bench -c "SELECT count(*) FROM pg_proc WHERE oid::regprocedure::text =
		'fencelock.acquire(text,text,interval,interval)'")
	HAVE_CLAIM=$(q -d bench -c "SELECT count(*) > 0 FROM pg_proc WHERE proname = 'claim'
		AND pronamespace = 'fencelock'::regnamespace" | sed 's/t/1/; s/f/0/')
	if [ "$HAVE_CLAIM" = 1 ]; then
		q -d bench -v queue="$queue" -f bench/claim_setup.sql
	fi
}

# Server CPU in clock ticks, for a delta around a run.  pg_ticks: the postmaster of the cluster in
# $dir/data, its live children and its reaped children (cutime/cstime).  proc_ticks PID: one
# process (all its threads: utime + stime).
pg_ticks() {
	local pm
	pm=$(head -1 "$dir/data/postmaster.pid")
	{ cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v pm="$pm" '{
		pid = $1; s = $0; sub(/^.*\) /, "", s); split(s, f, " ")
		if (pid == pm) t += f[12] + f[13] + f[14] + f[15]
		else if (f[2] == pm) t += f[12] + f[13]
	} END { print t + 0 }'
}
proc_ticks() { awk '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " "); print f[12] + f[13] }' "/proc/$1/stat"; }
