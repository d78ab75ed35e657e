#!/usr/bin/env bash
# Run the whole test suite on every supported PostgreSQL major: regression (pg_regress),
# concurrency (isolation tester), crash, failover, dump/restore, pgbouncer and tool tests (TAP),
# a short chaos run and a short run of the SQL fuzzer (TAP for 18 in the 18-debug column).
# Installs what it needs, provides each major (scripts/pg.sh: Debian's 15, Debian's binary
# packages of 17 and 18 in cached Debian roots, and 18-debug: 18's source built with assertions
# on), builds fencelock with -Werror against each, and starts a throwaway cluster
# per major as the postgres user (17 and 18: all of it chrooted into their root, scripts/pg.sh's
# fl_root_exec).  Exit status 0 only when every suite passed.
#
#   bash scripts/test.sh                  the matrix: 15, 17, 18 and 18-debug, every suite
#   bash scripts/test.sh --pg 18          one major (all its suites); --pg 15,18 for several;
#                                         --pg all the matrix (also with PG_BIN)
#   bash scripts/test.sh --suites regress,isolation [--pg ...]   only these suites
#   PG_BIN=/path/bin bash scripts/test.sh   that installation as it is (its own major) alone; with
#                                         --pg, it stands in for its major
#
# The majors run at the same time, each in its own copy of the tree, its own cluster (port
# FENCELOCK_TEST_PORT + 0, 1, ... in matrix order; default 54321) and its own temporary directory.
# TAP files run FENCELOCK_PROVE_JOBS at a time (default 2).  "-- " lines report progress as parts
# finish; then every major's full log follows.  A line per part and per major says how
# it went and how long it took; the closing line sums every major: "fencelock: N passed, M failed".
cd "$(dirname "$0")/.."
. scripts/lib.sh

usage() {
	sed -n '11,17p' "$0" | sed 's/^# //' >&2
	exit 2
}

# The suites each major runs.
fl_suites_of() {
	case $1 in
	15) echo "regress isolation tap chaos fuzz clients patroni docs package" ;;
	# 18's TAP files run in the 18-debug column (the same major's source, assertions on): twice
	# on one major was a quarter of the suite's time on two cores, and proved nothing more.
	18) echo "regress isolation chaos fuzz" ;;
	# make installcheck as a packager runs it: its own temporary preloaded instance (a few tests;
	# the full suites run against this script's cluster above).  In 17's column, which is not the
	# longest.
	17) echo "regress isolation tap chaos fuzz installcheck" ;;
	*) echo "regress isolation tap chaos fuzz" ;;
	esac
}

majors=()
only_suites=
while [ $# -gt 0 ]; do
	case $1 in
	--pg) [ $# -ge 2 ] || usage; IFS=, read -ra m <<<"$2"; majors+=("${m[@]}"); shift 2 ;;
	--pg=*) IFS=, read -ra m <<<"${1#--pg=}"; majors+=("${m[@]}"); shift ;;
	--suites) [ $# -ge 2 ] || usage; only_suites=${2//,/ }; shift 2 ;;
	--suites=*) only_suites=${1#--suites=}; only_suites=${only_suites//,/ }; shift ;;
	*) usage ;;
	esac
done
explicit=${majors[*]:+1}
all=
if [ "${majors[*]}" = all ]; then # the default matrix, also with PG_BIN
	majors=()
	explicit=
	all=1
fi
given_major=
if [ -n "$FL_PG_BIN_GIVEN" ]; then
	given_major=$("$PG_BIN/pg_config" --version | sed -n 's/^PostgreSQL \([0-9]*\).*/\1/p')
	[ -n "$explicit" ] || [ -n "$all" ] || majors=("$given_major")
fi
[ ${#majors[@]} -gt 0 ] || majors=($FL_PG_MAJORS $FL_PG_VARIANTS)
# check-house's self-test is the same on every major: once a run, in 18's column (the shortest),
# else the first major's (an inner run in a Debian root keeps the outer run's choice).
if [ -z "${FL_SELFTEST_MAJOR:-}" ]; then
	FL_SELFTEST_MAJOR=${majors[0]}
	for m in "${majors[@]}"; do [ "$m" != 18 ] || FL_SELFTEST_MAJOR=18; done
fi

fl_deps_common
START=$SECONDS
# (FENCELOCK_WORK_PARENT: where a run inside a Debian root keeps its work, a directory of the
# run outside that is bind-mounted into the root.)
work=$(mktemp -d "${FENCELOCK_WORK_PARENT:-/tmp}/fencelock-test.XXXXXX")
chmod 755 "$work"
pids=()
cleanup() {
	local m f
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	# A run inside a root: ending its namespace ends every process in it and every mount.
	for f in "$work"/pg*/ns.pid; do [ ! -f "$f" ] || kill "$(cat "$f")" 2>/dev/null || true; done
	for m in "${majors[@]}"; do fl_cluster_stop "$work/pg$m/pg"; done
	[ -n "${KEEP:-}" ] || rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# Durations as 1m05s.
fl_dur() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# Provide every major first (a source build takes both cores; the suites should not share them
# with it).  A major the archive does not serve is skipped when it came from the default matrix,
# loudly, and fails the run when it was asked for.
declare -A bin root
run=()
skipped=()
unprovided=()
for m in "${majors[@]}"; do
	t=$SECONDS
	if [ -n "$given_major" ] && [ "$m" = "$given_major" ]; then
		bin[$m]=$PG_BIN
	else
		status=0
		fl_pg "$m" || status=$?
		if [ "$status" -eq 3 ] && [ -z "$explicit" ]; then
			echo "== pg $m: SKIPPED: the Debian archive does not serve its source package (see above)"
			skipped+=("$m")
			continue
		fi
		if [ "$status" -ne 0 ]; then
			echo "== pg $m: FAILED: could not be provided (see above)"
			unprovided+=("$m")
			continue
		fi
		bin[$m]=$PG_BIN
		root[$m]=$FL_PG_ROOT
	fi
	run+=("$m")
	[ $((SECONDS - t)) -lt 5 ] || echo "== pg $m provided in $(fl_dur $((SECONDS - t)))"
done

# TAP tests of the majors on this machine (and of other runs on it) reserve ports in one place.  A
# major in a root gets a directory of its own (run_major_root): a reservation names a PID of its
# own PID namespace, and its root's postgres user may have another uid, so a file it left could
# not even be opened here ("Permission denied" when a host test picked the same port).  Ports in
# use are still seen by every namespace (they share the network): PostgreSQL::Test::Cluster
# binds a candidate port before it reserves it.
export PG_TEST_PORT_DIR=/tmp/fencelock-portlock
mkdir -p "$PG_TEST_PORT_DIR"
chmod 1777 "$PG_TEST_PORT_DIR" 2>/dev/null || true

# run_major MAJOR BIN PORT: build, start a cluster, run the suites; writes $work/pgMAJOR/result
# ("passed failed") and, per failure, a line to $work/pgMAJOR/failures.
run_major() {
	local major=$1 dir=$work/pg$1 port=$3 passed=0 failed=0 t0=$SECONDS t parts=() s
	local PG_BIN=$2
	local PATH="$PG_BIN:$PATH"
	local tree=$dir/tree
	: >"$dir/failures"
	# tally PART STATUS OK BAD SECONDS LOG: one part's counts, time and failures.
	tally() {
		passed=$((passed + $3))
		failed=$((failed + $4))
		[ "$2" -eq 0 ] || echo "pg $major $1 (see $6)" >>"$dir/failures"
		parts+=("$1 $(fl_dur "$5")")
		echo "== pg $major $1: $3 passed, $4 failed ($(fl_dur "$5"))"
		echo "-- pg $major $1: $3 passed, $4 failed ($(fl_dur "$5"))" >&3 # progress, live
	}
	suite() { # suite NAME OKPATTERN FAILPATTERN make-variable-overrides...
		local name=$1 okp=$2 badp=$3 status=0 t=$SECONDS d ok bad
		shift 3
		echo "== pg $major $name"
		# FL_USE_RUNNING=1: against the cluster started below (test/fencelock.conf's settings,
		# as make installcheck's own temporary instance has), which the other parts use too.
		fl_as_pg env PG_TEST_PORT_DIR="$PG_TEST_PORT_DIR" make -C "$tree" -s \
			PG_CONFIG="$PG_BIN/pg_config" installcheck FL_USE_RUNNING=1 "$@" >"$dir/$name.log" 2>&1 || status=$?
		cat "$dir/$name.log"
		for d in "$tree/regression.diffs" "$tree/output_iso/regression.diffs"; do
			[ "$status" -eq 0 ] || [ ! -s "$d" ] || { echo "---- $d"; head -200 "$d"; }
		done
		rm -f "$tree/regression.diffs"
		ok=$(grep -cE "$okp" "$dir/$name.log" || true)
		bad=$(grep -cE "$badp" "$dir/$name.log" || true)
		if [ "$status" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
		tally "$name" "$status" "$ok" "$bad" $((SECONDS - t)) "$dir/$name.log"
	}
	finish() {
		echo "$passed $failed $(fl_dur $((SECONDS - t0)))" >"$dir/result"
		local IFS=,
		echo "${parts[*]}" >"$dir/parts"
	}

	echo "== pg $major: $("$PG_BIN/pg_config" --version) ($PG_BIN); suites: $4"
	# Build in a copy of the tree of our own (objects are per major), warnings are errors.
	t=$SECONDS
	# (the path part below must see this run's link, not one an earlier run left)
	case $PG_BIN in /usr/lib/postgresql/*) rm -f /usr/local/bin/fencelock-run ;; esac
	mkdir -p "$tree"
	# (no git inside a Debian root: there the tree is a copy run_major_root made with git)
	{ command -v git >/dev/null && git ls-files -z --cached --others --exclude-standard |
		xargs -0 cp -d --parents -t "$tree"; } 2>/dev/null ||
		{ rm -rf "$tree" && cp -a . "$tree" && make -s -C "$tree" PG_CONFIG="$PG_BIN/pg_config" clean; }
	if (cd "$tree" && FL_COPT=-Werror fl_build) >"$dir/build.log" 2>&1; then
		parts+=("build $(fl_dur $((SECONDS - t)))")
	else
		cat "$dir/build.log"
		tally build 1 0 1 $((SECONDS - t)) "$dir/build.log"
		finish
		return
	fi
	# The structure doc/design.md describes: calls and includes go down the folder order, no
	# writable global shared, no call cycle between files, no file over 1000 lines, no needless
	# export, one owner of the shared-memory hooks (scripts/check-house.pl).
	t=$SECONDS
	local hs=0
	perl scripts/check-house.pl "$tree" >"$dir/house.log" 2>&1 || hs=$?
	cat "$dir/house.log"
	tally house "$hs" $((hs == 0)) $((hs != 0)) $((SECONDS - t)) "$dir/house.log"
	# Each of its rules seen failing on a planted violation (scripts/check-house-selftest.sh),
	# once a run (FL_SELFTEST_MAJOR).
	if [ "$major" = "$FL_SELFTEST_MAJOR" ]; then
		t=$SECONDS
		hs=0
		PG_CONFIG="$PG_BIN/pg_config" bash scripts/check-house-selftest.sh "$tree" >"$dir/house-selftest.log" 2>&1 || hs=$?
		cat "$dir/house-selftest.log"
		local hok hbad
		hok=$(grep -c '^ok ' "$dir/house-selftest.log" || true)
		hbad=$(grep -c '^not ok ' "$dir/house-selftest.log" || true)
		[ "$hs" -eq 0 ] || [ "$hbad" -gt 0 ] || hbad=1
		tally house-selftest "$hs" "$hok" "$hbad" $((SECONDS - t)) "$dir/house-selftest.log"
	fi
	# make install left fencelock-run and its man page where a login shell finds them (a
	# Debian-packaged server's bindir is on no login PATH: mk/fencelock-run.mk links them).
	case $PG_BIN in
	/usr/lib/postgresql/*)
		t=$SECONDS
		local ps=0 found
		found=$(fl_as_pg bash -lc 'command -v fencelock-run' 2>&1) || ps=1
		{
			echo "login shell finds: ${found:-nothing}"
			[ "$(readlink -f "$found")" = "$(readlink -f "$PG_BIN/fencelock-run")" ] || ps=1
			fl_as_pg bash -lc 'fencelock-run --version' || ps=1
			[ -e /usr/local/share/man/man1/fencelock-run.1 ] || { echo "no man page in /usr/local/share/man/man1"; ps=1; }
		} >"$dir/path.log" 2>&1
		cat "$dir/path.log"
		tally path "$ps" $((ps == 0)) $((ps != 0)) $((SECONDS - t)) "$dir/path.log"
		;;
	esac
	[ "$(id -u)" -ne 0 ] || chown -R postgres: "$dir"
	fl_cluster_start "$dir/pg" "$port"

	local ok_re='\.\.\. ok|^ok [0-9]+ ' bad_re='\.\.\. FAILED|failed \(ignored\)|^not ok [0-9]+ '
	# The Debian packages (make deb, installed into a fresh bookworm root: scripts/test-package.sh)
	# need no cluster of ours and mostly wait for dpkg and apt: they run beside the other parts.
	local package_pid= package_t=$SECONDS
	case " $4 " in
	*" package "*)
		echo "== pg $major package (beside the other parts)"
		(
			t=$SECONDS
			s=0
			(cd "$tree" && bash scripts/test-package.sh) >"$dir/package.log" 2>&1 || s=$?
			echo $((SECONDS - t)) >"$dir/package.time"
			exit "$s"
		) &
		package_pid=$!
		;;
	esac
	for s in $4; do
		case $s in
		# pg_regress: "test x ... ok" up to 15, "ok 1 - x" (TAP style) from 16
		regress) suite regress "$ok_re" "$bad_re" ISOLATION= TAP_TESTS= ;;
		isolation) suite isolation "$ok_re" "$bad_re" REGRESS= TAP_TESTS= ;;
		tap)
			suite tap '\.\. ok$' '\.\. (Dubious|Failed)|^t.*\.pl \(Wstat' REGRESS= ISOLATION= \
				PROVE_JOBS="${FENCELOCK_PROVE_JOBS:-2}"
			;;
		installcheck)
			# No FL_USE_RUNNING: pg_regress starts a server of its own with test/fencelock.conf
			# (503 needs the library preloaded), on a port of its own near this major's.
			echo "== pg $major installcheck (temporary instance)"
			local status=0 ok bad
			t=$SECONDS
			fl_as_pg make -C "$tree" -s PG_CONFIG="$PG_BIN/pg_config" installcheck \
				REGRESS="101_lease_api 503_resource_stats" ISOLATION=wait_release_wakes TAP_TESTS= \
				FL_TEMP_PORT=$((port + 100)) >"$dir/installcheck.log" 2>&1 || status=$?
			cat "$dir/installcheck.log"
			ok=$(grep -cE "$ok_re" "$dir/installcheck.log" || true)
			bad=$(grep -cE "$bad_re" "$dir/installcheck.log" || true)
			grep -q 'using temp instance' "$dir/installcheck.log" || { echo "no temporary instance"; bad=$((bad + 1)); }
			[ "$status" -eq 0 ] || [ "$bad" -gt 0 ] || bad=1
			tally installcheck "$status" "$ok" "$bad" $((SECONDS - t)) "$dir/installcheck.log"
			;;
		chaos)
			[ -f "$tree/test/chaos/run-short.sh" ] || continue
			echo "== pg $major chaos (short run)"
			local status=0
			t=$SECONDS
			fl_as_pg bash -c "cd '$tree' && make -s PG_CONFIG='$PG_BIN/pg_config' COPT=-Werror chaos >/dev/null &&
				createdb chaos && psql -X -q -d chaos -c 'CREATE EXTENSION fencelock' &&
				PGDATABASE=chaos bash test/chaos/run-short.sh" >"$dir/chaos.log" 2>&1 || status=$?
			cat "$dir/chaos.log"
			tally chaos "$status" $((status == 0)) $((status != 0)) $((SECONDS - t)) "$dir/chaos.log"
			;;
		fuzz)
			# The SQL fuzzer's short run (test/fuzz, doc/testing.md "The fuzzer"): one check.
			[ -f "$tree/test/fuzz/run-short.sh" ] || continue
			echo "== pg $major fuzz (short run)"
			local status=0
			t=$SECONDS
			fl_as_pg bash -c "cd '$tree' && make -s PG_CONFIG='$PG_BIN/pg_config' COPT=-Werror fuzz-build >/dev/null &&
				createdb fuzz && psql -X -q -d fuzz -c 'CREATE EXTENSION fencelock' &&
				PGDATABASE=fuzz FUZZ_LOG='$dir/pg/server.log' bash test/fuzz/run-short.sh" >"$dir/fuzz.log" 2>&1 || status=$?
			cat "$dir/fuzz.log"
			tally fuzz "$status" $((status == 0)) $((status != 0)) $((SECONDS - t)) "$dir/fuzz.log"
			;;
		patroni)
			# Two Patroni-managed nodes and an etcd (scripts/test-patroni.sh), as root: it installs
			# what it needs.  Counted check by check.
			echo "== pg $major patroni"
			local status=0 ok bad
			t=$SECONDS
			(cd "$tree" && PG_BIN="$PG_BIN" bash scripts/test-patroni.sh) >"$dir/patroni.log" 2>&1 || status=$?
			cat "$dir/patroni.log"
			ok=$(grep -cE '^ok [0-9]+ ' "$dir/patroni.log" || true)
			bad=$(grep -cE '^not ok [0-9]+ ' "$dir/patroni.log" || true)
			[ "$status" -eq 0 ] || [ "$bad" -gt 0 ] || bad=1
			tally patroni "$status" "$ok" "$bad" $((SECONDS - t)) "$dir/patroni.log"
			;;
		clients)
			# The Python, Node, Java and Go examples and the Prometheus exporter (scripts/test-clients.sh),
			# as root: it installs what it needs.  Counted check by check.
			echo "== pg $major clients"
			local status=0 ok bad
			t=$SECONDS
			(cd "$tree" && bash scripts/test-clients.sh) >"$dir/clients.log" 2>&1 || status=$?
			cat "$dir/clients.log"
			ok=$(grep -cE '^ok [0-9]+ ' "$dir/clients.log" || true)
			bad=$(grep -cE '^not ok [0-9]+ ' "$dir/clients.log" || true)
			[ "$status" -eq 0 ] || [ "$bad" -gt 0 ] || bad=1
			tally clients "$status" "$ok" "$bad" $((SECONDS - t)) "$dir/clients.log"
			;;
		docs)
			# Every ```sql block of README.md and doc/*.md against what the text states
			# (scripts/doc-test.pl; its conventions: doc/testing.md, "The doc-test").
			echo "== pg $major docs"
			local status=0 ok bad
			t=$SECONDS
			fl_as_pg perl "$tree/scripts/doc-test.pl" >"$dir/docs.log" 2>&1 || status=$?
			cat "$dir/docs.log"
			ok=$(grep -E '^ok [0-9]+ ' "$dir/docs.log" | grep -vc '# skip' || true)
			bad=$(grep -cE '^not ok [0-9]+ ' "$dir/docs.log" || true)
			[ "$status" -eq 0 ] || [ "$bad" -gt 0 ] || bad=1
			tally docs "$status" "$ok" "$bad" $((SECONDS - t)) "$dir/docs.log"
			;;
		esac
	done
	if [ -n "$package_pid" ]; then
		local status=0 ok bad
		wait "$package_pid" || status=$?
		cat "$dir/package.log"
		ok=$(grep -cE '^ok [0-9]+ ' "$dir/package.log" || true)
		bad=$(grep -cE '^not ok [0-9]+ ' "$dir/package.log" || true)
		[ "$status" -eq 0 ] || [ "$bad" -gt 0 ] || bad=1
		tally package "$status" "$ok" "$bad" "$(cat "$dir/package.time" 2>/dev/null || echo $((SECONDS - package_t)))" "$dir/package.log"
	fi
	fl_cluster_stop "$dir/pg"
	finish
}

# run_major_root MAJOR ROOT PORT SUITES: this script once more, inside the Debian root ROOT
# (chrooted, scripts/pg.sh's fl_root_exec) with the major's server there as PG_BIN, on a copy of
# the tree; the copy and the inner run's work live in $work/pgMAJOR, bind-mounted on /tmp/fl,
# and the inner run leaves result, parts and failures there as run_major does.
run_major_root() {
	local major=$1 rootdir=$2 port=$3 dir=$work/pg$1 status=0
	mkdir -p "$dir/src"
	git ls-files -z --cached --others --exclude-standard | xargs -0 cp -d --parents -t "$dir/src" ||
		{ rm -rf "$dir/src" && cp -a . "$dir/src" && rm -f "$dir/src/.fl-built-for"; }
	echo "== pg $major: inside $rootdir (Debian's postgresql-$major)"
	local portdir=$PG_TEST_PORT_DIR/root-$major
	mkdir -p "$portdir" && chmod 1777 "$portdir"
	FL_ROOT_PIDFILE=$dir/ns.pid fl_root_exec "$rootdir" "$dir:/tmp/fl" "$portdir:$PG_TEST_PORT_DIR" -- \
		env PG_BIN="/usr/lib/postgresql/$major/bin" FENCELOCK_TEST_PORT="$port" FL_SELFTEST_MAJOR="$FL_SELFTEST_MAJOR" \
		FENCELOCK_WORK_PARENT=/tmp/fl FENCELOCK_INNER_OUT=/tmp/fl PG_TEST_PORT_DIR="$PG_TEST_PORT_DIR" \
		${FENCELOCK_PROVE_JOBS:+FENCELOCK_PROVE_JOBS=$FENCELOCK_PROVE_JOBS} ${KEEP:+KEEP=1} \
		bash /tmp/fl/src/scripts/test.sh --suites "${4// /,}" 2>&1 || status=$?
	[ -f "$dir/result" ] || echo "0 1 ?" >"$dir/result"
	[ -f "$dir/failures" ] || echo "pg $major (inside $rootdir: no result; exit status $status)" >"$dir/failures"
	sed -i "s#/tmp/fl/#$dir/#g" "$dir/failures"
}

# Progress lines go to stdout; inside a root, to the outer run's progress (its fd 3, inherited).
progress_fd=1
[ -z "${FENCELOCK_INNER_OUT:-}" ] || ! { true >&3; } 2>/dev/null || progress_fd=3
i=0
for m in "${run[@]}"; do
	suites=${only_suites:-$(fl_suites_of "$m")}
	mkdir -p "$work/pg$m"
	[ -n "${FENCELOCK_INNER_OUT:-}" ] || echo "-- pg $m: running $suites"
	if [ -n "${root[$m]:-}" ]; then
		run_major_root "$m" "${root[$m]}" $((${FENCELOCK_TEST_PORT:-54321} + i)) "$suites" 3>&1 >"$work/pg$m/out" 2>&1 &
	else
		run_major "$m" "${bin[$m]}" $((${FENCELOCK_TEST_PORT:-54321} + i)) "$suites" 3>&"$progress_fd" >"$work/pg$m/out" 2>&1 &
	fi
	pids+=($!)
	i=$((i + 1))
done
wait "${pids[@]}" || true
pids=()
[ -n "${FENCELOCK_INNER_OUT:-}" ] || echo "-- every major finished; their logs in full:"

# Inside a Debian root (run_major_root): hand the counts to the run outside, which reports them.
if [ -n "${FENCELOCK_INNER_OUT:-}" ]; then
	for m in "${run[@]}"; do
		cat "$work/pg$m/out"
		for f in result parts failures; do
			[ ! -f "$work/pg$m/$f" ] || cp "$work/pg$m/$f" "$FENCELOCK_INNER_OUT/$f"
		done
		[ ! -s "$work/pg$m/failures" ] || KEEP=1
	done
	exit 0
fi

passed=0
failed=0
failures=()
summary=()
for m in "${run[@]}"; do
	cat "$work/pg$m/out"
	read -r p f took <"$work/pg$m/result" 2>/dev/null || { p=0 f=1 took=?; }
	parts=$(sed 's/,/, /g' "$work/pg$m/parts" 2>/dev/null || echo "no result")
	passed=$((passed + p))
	failed=$((failed + f))
	while IFS= read -r l; do failures+=("$l"); done <"$work/pg$m/failures"
	[ -f "$work/pg$m/result" ] || failures+=("pg $m (no result; see $work/pg$m/out)")
	summary+=("== pg $m: $p passed, $f failed in $took ($parts)")
done
for s in "${summary[@]}"; do echo "$s"; done
for m in "${skipped[@]}"; do echo "== pg $m: SKIPPED (source package not served by the archive)"; done
for m in "${unprovided[@]}"; do
	failed=$((failed + 1))
	failures+=("pg $m (could not be provided)")
done
# Every file, C identifier, SQL function and anchor a comment or document names exists.
if perl scripts/check-refs.pl; then
	passed=$((passed + 1))
else
	failed=$((failed + 1))
	failures+=("check-refs (dangling references above)")
fi
echo "== all majors: $(fl_dur $((SECONDS - START)))"
if [ ${#failures[@]} -gt 0 ]; then
	KEEP=1
	echo "== failed: ${failures[*]} (logs kept in $work)"
fi
echo "fencelock: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ ${#failures[@]} -eq 0 ]
