#!/usr/bin/env bash
# scenarios.sh LANG PORT OUTDIR HOLDER...: doc/clients.md's fault scenarios S1-S6 for one
# language's lease holder program (HOLDER... is its command line), through a fault proxy of its
# own on 127.0.0.1:PORT (commands on PORT+1).  Run by scripts/test-clients.sh, several languages
# side by side: each scenario holds a shared lock on OUTDIR/../restart.lock, S3 (the server
# restart) an exclusive one, so a restart never meets another language's scenario.
#
# Needs PGHOST (the cluster's socket directory), PGPORT, PGUSER (a superuser), PGDATABASE with
# the extension; PG_CTL_DATA: the data directory to restart (default $PGHOST/data); PY: a
# Python with psycopg.  Writes one line per scenario to OUTDIR/results: "STATUS<TAB>DESCRIPTION"
# (STATUS 0 passed), each scenario's outputs to OUTDIR/SN.*.
set -uo pipefail
lang=$1 port=$2 out=$3
shift 3
holder=("$@")
here=$(cd "$(dirname "$0")" && pwd)
cport=$((port + 1))
lock=$out/../restart.lock
PY=${PY:-/usr/bin/python3}
data=${PG_CTL_DATA:-$PGHOST/data}
mkdir -p "$out"
: >"$out/results"

now_ms() { echo "$(($(date +%s%N) / 1000000))"; }
q() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
fault() { bash "$here/fault.sh" "$cport" "$1" >/dev/null; }
wait_for() { # wait_for CONDITION [TENTHS]
	local i
	for ((i = 0; i < ${2:-50}; i++)); do
		eval "$1" && return 0
		sleep 0.1
	done
	return 1
}
finish() { # finish PID [TENTHS]: its exit status (killed after TENTHS, default 300)
	local i
	for ((i = 0; i < ${2:-300}; i++)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$1" 2>/dev/null && kill -KILL "$1"
	wait "$1"
}
report() { # report STATUS DESCRIPTION [FILE...]: the result, and the files when it failed
	local st=$1 desc=$2 f
	shift 2
	printf '%s\t%s\n' "$st" "$desc" >>"$out/results"
	if [ "$st" -ne 0 ]; then
		for f in "$@"; do [ -f "$f" ] && { echo "== $f"; tail -20 "$f"; }; done >>"$out/failures"
	fi
}
# The holder through the proxy, with its owner token as application_name.
hold_run() { # hold_run SN OWNER ARGS...: starts it in the background, its pid in $hp
	local sn=$1 owner=$2
	shift 2
	PGHOST=127.0.0.1 PGPORT=$port "${holder[@]}" --resource "fault:$lang:$sn" --owner "$owner" "$@" \
		>"$out/$sn.holder" 2>&1 &
	hp=$!
}
field() { sed -n "s/^$2 \(.*\)/\1/p" "$1" | head -1; } # field FILE PREFIX: the rest of the line
acquired_fence() { sed -n 's/^acquired .* with fence \([0-9]*\) at .*/\1/p' "$1" | head -1; }
lost_ms() { sed -n 's/^lost at \([0-9]*\): .*/\1/p' "$1" | head -1; }
lost_type() { sed -n 's/^lost at [0-9]*: \([A-Za-z.]*\).*/\1/p' "$1" | head -1; }
case $lang in
python) lost_name=LeaseLost ;;
node) lost_name=LeaseLost ;;
java) lost_name=LeaseLostException ;;
go) lost_name=ErrLeaseLost ;;
esac

# -- the proxy -----------------------------------------------------------------------------------
"$PY" "$here/faultproxy.py" --socket "$PGHOST/.s.PGSQL.$PGPORT" --listen "127.0.0.1:$port" \
	--control "127.0.0.1:$cport" >"$out/proxy.log" 2>&1 &
proxy=$!
trap 'kill $proxy 2>/dev/null; wait $proxy 2>/dev/null' EXIT
if ! wait_for 'grep -qs listening "$out/proxy.log"' 50; then
	report 1 "$lang: the fault proxy starts on 127.0.0.1:$port" "$out/proxy.log"
	exit 1
fi

exec 9>>"$lock"

# S1: a partition; the holder must report the loss before another owner, connected directly and
# trying every 100 ms, gets the lease.
s1() {
	local st lost take margin
	hold_run s1 "$lang-s1" --ttl 3 --hold 12
	wait_for 'grep -qs "^acquired" "$out/s1.holder"' 100
	fault cut
	"$PY" - "fault:$lang:s1" >"$out/s1.taker" 2>&1 <<'PY' &
import sys, time, psycopg
with psycopg.connect("", autocommit=True) as c:
    end = time.monotonic() + 15
    while time.monotonic() < end:
        if c.execute("SELECT fencelock.acquire(%s, 'taker', '30 s')", [sys.argv[1]]).fetchone()[0]:
            print(f"taken at {int(time.time() * 1000)}", flush=True)
            sys.exit(0)
        time.sleep(0.1)
print("never taken")
PY
	local tp=$!
	# The partition lasts 9 s, or until the holder has reported (then nothing it does is late).
	wait_for '! kill -0 $hp 2>/dev/null' 90
	fault heal
	finish "$hp" 100
	st=$?
	wait "$tp"
	lost=$(lost_ms "$out/s1.holder")
	take=$(sed -n 's/^taken at //p' "$out/s1.taker")
	margin=$((${take:-0} - ${lost:-0}))
	[ -n "$lost" ] && [ -n "$take" ] && [ "$st" -eq 3 ] && [ "$margin" -gt 0 ] &&
		[ "$(lost_type "$out/s1.holder")" = "$lost_name" ]
	report $? "$lang S1 partition: loss $margin ms before takeover (ttl 3 s, a 9 s partition; exit $st)" \
		"$out/s1.holder" "$out/s1.taker"
	q -c "SELECT fencelock.release('fault:$lang:s1', 'taker')" >/dev/null
}

# S2: the holder's backends terminated: it reconnects, renews naming its fence, keeps the lease.
s2() {
	local st f fences
	hold_run s2 "$lang-s2" --ttl 3 --hold 8
	wait_for 'grep -qs "^acquired" "$out/s2.holder"' 100
	f=$(acquired_fence "$out/s2.holder")
	sleep 1
	q -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '$lang-s2'" \
		>"$out/s2.terminated"
	fences=
	for _ in 1 2 3 4; do # the lease row keeps the fence while the holder works
		sleep 1
		fences+=" $(q -c "SELECT coalesce(max(fence) FILTER (WHERE state = 'held'), 0) FROM fencelock.leases WHERE resource = 'fault:$lang:s2'")"
	done
	finish "$hp" 100
	st=$?
	[ "$st" -eq 0 ] && grep -q '^held; released: true' "$out/s2.holder" && [ "$(cat "$out/s2.terminated")" -ge 1 ] &&
		[ "$fences" = " $f $f $f $f" ]
	report $? "$lang S2 terminated backends ($(cat "$out/s2.terminated") ended): reconnected, renewed with fence $f, lease kept (held with fence:$fences; exit $st)" \
		"$out/s2.holder" "$out/s2.terminated"
}

# S3: the server restarts (no other scenario runs meanwhile): the process stays alive; the lease
# is kept when the restart fits in the ttl, else the loss is reported.
s3() {
	local st f t0 ms
	flock -x 9
	hold_run s3 "$lang-s3" --ttl 10 --hold 8
	wait_for 'grep -qs "^acquired" "$out/s3.holder"' 100
	f=$(acquired_fence "$out/s3.holder")
	sleep 1
	t0=$(now_ms)
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- env PATH="$PATH" pg_ctl -D "$data" -l "$data/../server.log" -m fast -w restart
	else
		pg_ctl -D "$data" -l "$data/../server.log" -m fast -w restart
	fi >"$out/s3.restart" 2>&1
	ms=$(($(now_ms) - t0))
	finish "$hp" 150
	st=$?
	flock -u 9
	if [ "$st" -eq 0 ]; then
		grep -q '^held; released: true' "$out/s3.holder"
	else
		[ "$st" -eq 3 ] && [ "$(lost_type "$out/s3.holder")" = "$lost_name" ] && [ "$ms" -ge 9000 ]
	fi
	report $? "$lang S3 server restart ($ms ms, ttl 10 s): process alive, $([ "$st" -eq 0 ] && echo "lease kept with fence $f" || echo "loss reported") (exit $st)" \
		"$out/s3.holder" "$out/s3.restart"
}

# S4: the acquire's reply is lost (held, then the connection dropped): the retry with the same
# owner token gets the same fence.
s4() {
	local st f g
	q -c "SELECT fencelock.acquire('fault:$lang:s4', 'other', '30 s')" >/dev/null
	hold_run s4 "$lang-s4" --ttl 5 --wait 10 --hold 2
	# Its acquire waits behind the other owner's lease; then its reply is held while it is granted.
	wait_for '[ "$(q -c "SELECT fencelock.waiters('"'fault:$lang:s4'"')")" = 1 ]' 100
	fault hold
	q -c "SELECT fencelock.release('fault:$lang:s4', 'other')" >/dev/null
	wait_for '[ -n "$(q -c "SELECT fence FROM fencelock.leases WHERE resource = '"'fault:$lang:s4'"' AND owner = '"'$lang-s4'"' AND state = '"'held'"'")" ]' 50
	f=$(q -c "SELECT fence FROM fencelock.leases WHERE resource = 'fault:$lang:s4' AND owner = '$lang-s4' AND state = 'held'")
	sleep 0.3
	grep -q '^acquired' "$out/s4.holder" && echo "the reply was not held" >>"$out/s4.holder"
	fault drop
	fault heal
	finish "$hp" 150
	st=$?
	g=$(acquired_fence "$out/s4.holder")
	[ "$st" -eq 0 ] && [ -n "$f" ] && [ "$g" = "$f" ] && grep -q '^held; released: true' "$out/s4.holder" &&
		! grep -q 'not held' "$out/s4.holder"
	report $? "$lang S4 lost acquire reply: the retry with the same owner token got the same fence (granted $f, reported ${g:-none}; exit $st)" \
		"$out/s4.holder"
}

# S5: after a lost connection (cut, then dropped; reconnects hang) the block gets the library's
# lease-lost error, not the driver's, and the failing release does not replace it.
s5() {
	local st t0 lost type
	hold_run s5 "$lang-s5" --ttl 3 --hold 10
	wait_for 'grep -qs "^acquired" "$out/s5.holder"' 100
	t0=$(sed -n 's/^acquired .* at \([0-9]*\)$/\1/p' "$out/s5.holder")
	fault cut
	sleep 0.5
	fault drop
	finish "$hp" 80
	st=$?
	fault heal
	lost=$(lost_ms "$out/s5.holder")
	type=$(lost_type "$out/s5.holder")
	[ "$st" -eq 3 ] && [ "$type" = "$lost_name" ] && [ -n "$lost" ] && [ $((lost - t0)) -le 4000 ]
	report $? "$lang S5 lost connection: the block got ${type:-nothing} ($lost_name expected) $((${lost:-0} - ${t0:-0})) ms after the grant (ttl 3 s; exit $st)" \
		"$out/s5.holder"
}

# S6: granted after waiting longer than the ttl: the deadline the acquire's request gives is
# spent, the grant is recent; the lease is kept (a renewal at once pins a new deadline).
s6() {
	local st
	q -c "SELECT fencelock.acquire('fault:$lang:s6', 'other', '30 s')" >/dev/null
	hold_run s6 "$lang-s6" --ttl 3 --wait 10 --hold 4
	wait_for '[ "$(q -c "SELECT fencelock.waiters('"'fault:$lang:s6'"')")" = 1 ]' 100
	sleep 4
	q -c "SELECT fencelock.release('fault:$lang:s6', 'other')" >/dev/null
	finish "$hp" 150
	st=$?
	[ "$st" -eq 0 ] && grep -q '^acquired' "$out/s6.holder" && grep -q '^held; released: true' "$out/s6.holder"
	report $? "$lang S6 granted after a 4 s wait (ttl 3 s): the lease kept for 4 s and released (exit $st)" \
		"$out/s6.holder"
}

flock -s 9
s1
s2
s4
s5
s6
flock -u 9
s3
flock -u 9
