#!/usr/bin/env bash
# Client libraries, examples and monitoring, against a running throwaway cluster: the Python and
# Node libraries installed from their packages (clients/python with pip into a venv, clients/node
# with npm pack into an empty project), the Java library installed with mvn install into a local
# repository and used by a separate project, the Go module imported by its path, the Python, Node, Java and Go programs of examples/ (a
# fenced job, a task-table worker, each frozen with SIGSTOP past its lease; doc/clients.md lists
# the scenarios), the lease contract's fault scenarios S1-S6 through test/clients/faultproxy.py
# (test/clients/scenarios.sh; the server is restarted there), and
# contrib/prometheus/fencelock-queries.yaml through prometheus-postgres-exporter.
#
# Needs PGHOST, PGPORT, PGUSER (a superuser), PGDATABASE of a cluster started with
# shared_preload_libraries = 'fencelock' and the extension installed; creates its own database
# fencelock_clients and role fencelock_exporter there; the fault proxies listen on PGPORT+2..+9.
# Installs python3-psycopg, python3-venv, python3-pip, python3-setuptools,
# prometheus-postgres-exporter, Java's and Go's Debian packages (apt-get, as root) when missing;
# installs clients/java and builds examples/java with Maven from /usr/share/maven-repo alone,
# builds examples/go in GOPATH mode (examples/go/build.sh), both in the background while Python and Node run.  Prints "ok N - ..." / "not ok N - ..." per check, then "clients: N passed, M failed";
# exit status 0 only when every check passed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
: "${PGHOST:?PGHOST must name the cluster}" "${PGPORT:?}" "${PGUSER:?}" "${PGDATABASE:?}"

PY=${FENCELOCK_PYTHON:-/usr/bin/python3} # Debian's interpreter: python3-psycopg is for it
export PYTHONDONTWRITEBYTECODE=1
EXPORTER=/usr/bin/prometheus-postgres-exporter
DB=fencelock_clients

# -- dependencies ------------------------------------------------------------------------------
missing=()
# Java: Maven builds from Debian's repository (/usr/share/maven-repo) and nothing else; Go: pgx v4
# as GOPATH sources (/usr/share/gocode), Debian 12 has no pgx v5.
java_pkgs=(openjdk-17-jdk-headless maven libpostgresql-jdbc-java junit4 libmaven-compiler-plugin-java
	libmaven-resources-plugin-java libmaven-jar-plugin-java libsurefire-java libmaven-install-plugin-java unzip
	libspring-context-java)
go_pkgs=(golang-go golang-github-jackc-pgx-v4-dev)
for p in python3-psycopg python3-celery python3-venv python3-pip python3-setuptools prometheus-postgres-exporter nodejs npm "${java_pkgs[@]}" "${go_pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# node and npm may come from elsewhere than Debian's packages: only install what is not there.
command -v node >/dev/null && missing=("${missing[@]/nodejs/}")
command -v npm >/dev/null && missing=("${missing[@]/npm/}")
read -ra missing <<<"${missing[*]}"
if [ ${#missing[@]} -gt 0 ]; then
	[ "$(id -u)" -eq 0 ] || { echo "run as root to install ${missing[*]}" >&2; exit 1; }
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
		{ echo "apt-get install ${missing[*]} failed" >&2; exit 1; }
fi

# -- harness -----------------------------------------------------------------------------------
work=$(mktemp -d /tmp/fencelock-clients.XXXXXX)
chmod 755 "$work"
exporter_pid= build_pid=
cleanup() {
	[ -z "$exporter_pid" ] || { kill "$exporter_pid" 2>/dev/null; wait "$exporter_pid" 2>/dev/null; }
	[ -z "$build_pid" ] || { kill "$build_pid" 2>/dev/null; wait "$build_pid" 2>/dev/null; }
	[ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

n=0 passed=0 failed=0
# result DESCRIPTION STATUS [FILE...]: one TAP-style line; on failure the files, commented.
result() {
	local desc=$1 status=$2
	shift 2
	n=$((n + 1))
	if [ "$status" -eq 0 ]; then
		passed=$((passed + 1))
		echo "ok $n - $desc"
	else
		failed=$((failed + 1))
		echo "not ok $n - $desc"
		for f in "$@"; do [ -f "$f" ] && sed 's/^/#   /' "$f" | tail -20; done
	fi
}
expect() { # expect DESCRIPTION CONDITION-STRING [FILE...]: evaluates the condition
	local desc=$1 cond=$2
	shift 2
	eval "$cond"
	result "$desc" $? "$@"
}
q() { PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 -At -d "$DB" "$@"; }
# wait_for CONDITION [TENTHS]: poll a shell condition every 0.1 s, at most TENTHS times (50).
wait_for() {
	local i
	for ((i = 0; i < ${2:-50}; i++)); do
		eval "$1" && return 0
		sleep 0.1
	done
	return 1
}
# finish PID [TENTHS]: wait for a background program (killed after TENTHS, default 300); its status.
finish() {
	local i
	for ((i = 0; i < ${2:-300}; i++)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$1" 2>/dev/null && { kill -CONT "$1"; kill -KILL "$1"; }
	wait "$1"
}
elapsed() { echo "$(($(date +%s%N) / 1000000 - $1))"; } # ms since $1 (ms)
now_ms() { echo "$(($(date +%s%N) / 1000000))"; }

q -d "$PGDATABASE" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" ||
	{ echo "cannot create database $DB" >&2; exit 1; }
q <<'SQL' || { echo "cannot set up database fencelock_clients" >&2; exit 1; }
CREATE EXTENSION fencelock;
CREATE TABLE report_runs (resource text PRIMARY KEY, step integer, written_by text, last_fence bigint);
CREATE TRIGGER fence BEFORE UPDATE ON report_runs FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
INSERT INTO report_runs (resource) VALUES ('report:py'), ('report:node'), ('report:java'), ('report:go'),
    ('report:metrics'), ('report:celery'), ('report:cron'), ('report:spring');
SQL
export PGDATABASE=$DB

# -- the Python and Node libraries, installed from their packages ------------------------------
# The examples run from what was installed: Python's with the venv's interpreter (Debian's
# psycopg through --system-site-packages), Node's copied into the project the tarball went into.
version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" fencelock.control)
cp -r clients/python "$work/python-src" # pip builds in the tree it is given
"$PY" -m venv --system-site-packages "$work/venv" >"$work/pip.log" 2>&1 &&
	"$work/venv/bin/pip" install --no-build-isolation --no-index "$work/python-src" >>"$work/pip.log" 2>&1 &&
	(cd "$work" && "$work/venv/bin/python" -c 'import fencelock, importlib.resources as r, sys
print(fencelock.__version__, fencelock.__file__, r.files("fencelock").joinpath("py.typed").is_file())
sys.exit(fencelock.__version__ != sys.argv[1] or "site-packages" not in fencelock.__file__
         or not r.files("fencelock").joinpath("py.typed").is_file())' "$version") >>"$work/pip.log" 2>&1
result "python: pip install --no-index clients/python into a venv: import fencelock $version from site-packages, typed (py.typed)" $? "$work/pip.log"
VPY=$work/venv/bin/python

app=$work/node-app
mkdir -p "$app"
echo '{ "name": "fencelock-app", "private": true, "type": "module" }' >"$app/package.json"
(cd clients/node && npm pack --silent --pack-destination "$work") >"$work/npm.log" 2>&1 &&
	(cd "$app" && npm install --prefer-offline --no-audit --no-fund --silent "$work/fencelock-$version.tgz") >>"$work/npm.log" 2>&1 &&
	cp examples/node/*.mjs "$app/" &&
	(cd "$app" && node --input-type=module -e '
		import * as f from "fencelock";
		import { readFileSync } from "node:fs";
		const pkg = JSON.parse(readFileSync("node_modules/fencelock/package.json"));
		const types = readFileSync("node_modules/fencelock/index.d.ts", "utf8");
		const names = ["Lease", "withLease", "fencedStep", "query", "translate", "LeaseLost", "StaleFence", "Unfenced", "Busy"];
		const missing = names.filter((n) => !f[n] || !types.includes(n));
		console.log(pkg.version, Object.keys(f).join(","), missing);
		process.exitCode = pkg.version === process.argv[1] && missing.length === 0 ? 0 : 1;' "$version") >>"$work/npm.log" 2>&1 &&
	tar -tzf "$work/fencelock-$version.tgz" | sort | tr '\n' ' ' | tee -a "$work/npm.log" | grep -qx 'package/README.md package/index.d.ts package/index.mjs package/package.json '
result "node: npm pack clients/node, the tarball installed into an empty project: import from \"fencelock\" $version, every export typed in index.d.ts" $? "$work/npm.log"

# One walkthrough table (doc/claim.md) and one jobs table (with fail()'s columns) per language.
make_tables() { # make_tables SUFFIX
	q <<SQL
CREATE TABLE tasks_$1 (id text PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                    lease_until timestamptz, attempt_id integer NOT NULL DEFAULT 0,
                    fence bigint NOT NULL DEFAULT 0, checkpoint text, result text);
SELECT fencelock.enable_tasks('tasks_$1', attempt_col => 'attempt_id');
INSERT INTO tasks_$1 (id) VALUES ('task-91');
CREATE TABLE jobs_$1 (id text PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                   lease_until timestamptz, attempt integer NOT NULL DEFAULT 0,
                   fence bigint NOT NULL DEFAULT 0, max_attempts integer DEFAULT 2,
                   last_error text, checkpoint text, result text);
SELECT fencelock.enable_tasks('jobs_$1');
INSERT INTO jobs_$1 (id) VALUES ('job-1'), ('bad-2'), ('job-3'), ('job-4');
SQL
}

# -- the scenarios, per language ---------------------------------------------------------------
# run_lang LANG JOB WORKER: JOB and WORKER are the command words of the two programs.
run_lang() {
	local lang=$1 job=$2 worker=$3 res="report:$1" out=$work/$1 pa t0 ms fa= fb= st
	mkdir -p "$out"
	make_tables "$lang" >/dev/null || { result "$lang: set up tables" 1; return; }

	timeout 30 $job --resource "$res" --name solo --ttl 3 --steps 3 --work 0.05 >"$out/solo" 2>&1
	st=$?
	expect "$lang: fenced job writes each step with its fence and releases at the end" \
		'[ $st -eq 0 ] && grep -q "solo: done; released: [Tt]rue" "$out/solo" &&
		 [ "$(q -c "SELECT step || written_by FROM report_runs WHERE resource = '"'$res'"'")" = 3solo ]' "$out/solo"

	q -c "SELECT fencelock.acquire('$res', 'someone-else', '30 s')" >/dev/null
	timeout 30 $job --resource "$res" --name late --ttl 3 --steps 1 --work 0 >"$out/busy" 2>&1
	st=$?
	expect "$lang: fenced job exits busy (2) while another owner holds the lease" \
		'[ $st -eq 2 ] && grep -q "late: busy" "$out/busy"' "$out/busy"
	q -c "SELECT fencelock.release('$res', 'someone-else')" >/dev/null

	# Frozen job: worker-a writes step 1, is stopped during its 10-second work, its 1-second
	# lease expires, worker-b takes over; worker-a's watchdog must stop the work on resuming.
	$job --resource "$res" --name worker-a --ttl 1 --steps 2 --work 10 >"$out/frozen-a" 2>&1 &
	pa=$!
	wait_for 'grep -qs "step 1 written" "$out/frozen-a"' 100
	kill -STOP "$pa"
	wait_for '[ "$(q -c "SELECT state FROM fencelock.leases WHERE resource = '"'$res'"'")" = expired ]'
	timeout 30 $job --resource "$res" --name worker-b --ttl 5 --steps 1 --work 0 >"$out/frozen-b" 2>&1
	st=$?
	expect "$lang: frozen job: worker-b takes the expired lease over with a higher fence" \
		'[ $st -eq 0 ] && fa=$(sed -n "s/.*acquired .* with fence \([0-9]*\)/\1/p" "$out/frozen-a") &&
		 fb=$(sed -n "s/.*acquired .* with fence \([0-9]*\)/\1/p" "$out/frozen-b") && [ "$fb" -gt "$fa" ]' \
		"$out/frozen-a" "$out/frozen-b"
	t0=$(now_ms)
	kill -CONT "$pa"
	finish "$pa"
	st=$?
	ms=$(elapsed "$t0")
	expect "$lang: frozen job: on resuming, the watchdog stops worker-a's work at once (exit 3 after ${ms} ms; release refused)" \
		'[ $st -eq 3 ] && [ "$ms" -lt 3000 ] &&
		 grep -Eq "worker-a: lease lost, work stopped: (the lease expired or was taken over|not renewed before its deadline.*); released: [Ff]alse" "$out/frozen-a" &&
		 ! grep -q "step 2 written" "$out/frozen-a"' "$out/frozen-a"
	expect "$lang: frozen job: the row holds worker-b's write, none of worker-a's after the takeover" \
		'[ "$(q -c "SELECT written_by || last_fence FROM report_runs WHERE resource = '"'$res'"'")" = "worker-b$fb" ]'

	# Revoke: an operator frees the lease while the job works; the watchdog's next renewal (at
	# most ttl/3 = 1 s later) is refused and stops the work; up to a second more to release and
	# exit (the work alone would last 30 s, the lease 3 s).
	$job --resource "$res" --name revoked --ttl 3 --steps 2 --work 30 >"$out/revoke" 2>&1 &
	pa=$!
	wait_for 'grep -qs "step 1 written" "$out/revoke"' 100
	t0=$(now_ms)
	q -c "SELECT fencelock.revoke('$res')" >/dev/null
	finish "$pa"
	st=$?
	ms=$(elapsed "$t0")
	expect "$lang: revoke: the watchdog stops the running work within ttl/3 (exit 3 ${ms} ms after the revoke; ttl/3 = 1000 ms; release refused)" \
		'[ $st -eq 3 ] && [ "$ms" -lt 2000 ] &&
		 grep -q "revoked: lease lost, work stopped: the lease expired or was taken over; released: [Ff]alse" "$out/revoke" &&
		 ! grep -q "step 2 written" "$out/revoke"' "$out/revoke"

	# Two workers, jobs longer than the ttl: heartbeats keep each job with its worker.
	$worker --table "jobs_$lang" --name w1 --ttl 2 --steps 4 --step-time 0.7 --exit-when-idle >"$out/w1" 2>&1 &
	pa=$!
	timeout 60 $worker --table "jobs_$lang" --name w2 --ttl 2 --steps 4 --step-time 0.7 --exit-when-idle >"$out/w2" 2>&1
	fb=$?
	finish "$pa"
	st=$?
	expect "$lang: two workers: every job done once (heartbeats kept jobs longer than the ttl), bad-2 failed twice and is dead" \
		'[ $st -eq 0 ] && [ $fb -eq 0 ] &&
		 [ "$(q -c "SELECT string_agg(id || '"':'"' || state || '"':'"' || attempt, '"' '"' ORDER BY id) FROM jobs_$lang")" = \
		   "bad-2:dead:2 job-1:done:1 job-3:done:1 job-4:done:1" ] &&
		 [ "$(q -c "SELECT last_error FROM jobs_$lang WHERE id = '"'bad-2'"'")" = "cannot process bad-2" ] &&
		 [ "$(q -c "SELECT count(*) FROM jobs_$lang WHERE result IN ('"'w1''s result'"', '"'w2''s result'"')")" = 3 ] &&
		 [ "$(cat "$out/w1" "$out/w2" | grep -c ": completed job-")" = 3 ] &&
		 ! grep -q dropped "$out/w1" "$out/w2"' "$out/w1" "$out/w2"

	# doc/claim.md's walkthrough: worker-a claims task-91 and is frozen after step-3; worker-b
	# claims it (fence 2) and finishes; worker-a's late checkpoint is refused with FL001.
	$worker --table "tasks_$lang" --name worker-a --ttl 1 --steps 12 --step-time 0.2 --exit-when-idle >"$out/task-a" 2>&1 &
	pa=$!
	wait_for 'grep -qs "checkpoint step-3" "$out/task-a"' 100
	kill -STOP "$pa"
	wait_for '[ "$(q -c "SELECT lease_until < clock_timestamp() FROM tasks_'$lang'")" = t ]'
	timeout 30 $worker --table "tasks_$lang" --name worker-b --ttl 5 --steps 12 --step-time 0.01 --exit-when-idle >"$out/task-b" 2>&1
	fb=$?
	kill -CONT "$pa"
	finish "$pa"
	st=$?
	expect "$lang: walkthrough: frozen worker-a's late write is refused with FL001, surfaced as StaleFence, and it drops the job" \
		'[ $st -eq 0 ] && [ $fb -eq 0 ] &&
		 grep -q "worker-a: dropped task-91: StaleFence[A-Za-z]*: fence 1 is older than the stored fence 2" "$out/task-a" &&
		 ! grep -q "worker-a: completed" "$out/task-a"' "$out/task-a" "$out/task-b"
	expect "$lang: walkthrough: task-91 ends done by worker-b, attempt 2, checkpoint step-12, worker-b's result" \
		'[ "$(q -F"|" -c "SELECT state, lease_owner, attempt_id, checkpoint, result FROM tasks_'$lang'")" = \
		   "done|worker-b|2|step-12|worker-b'"'"'s result" ]' "$out/task-a" "$out/task-b"
	expect "$lang: walkthrough: the refusal is counted in fencelock.table_stats" \
		'[ "$(q -c "SELECT stale_rejected FROM fencelock.table_stats WHERE \"table\" = '"'tasks_$lang'"'::regclass")" -ge 1 ]'

	one_step "$lang" "$job"
}

# one_step LANG JOB: the one-step form (fenced-job --one-step: grant, writes and release in one
# transaction, no watchdog).  The lease of report:LANG is free when it starts.
one_step() {
	local lang=$1 job=$2 res="report:$1" out=$work/$1 f1 f2 fp fn st st2 n1 n2 pa
	fence_of() { sed -n "s/.*acquired .* with fence \([0-9]*\)/\1/p" "$1"; }
	row() { q -c "SELECT step || ':' || written_by || ':' || last_fence FROM report_runs WHERE resource = '$res'"; }
	state() { q -c "SELECT state FROM fencelock.leases WHERE resource = '$res'"; }

	timeout 30 $job --resource "$res" --name step --ttl 5 --steps 2 --work 0 --one-step >"$out/step" 2>&1
	st=$?
	f1=$(fence_of "$out/step")
	st2=$(state)
	n1=$(q -c "SELECT fencelock.acquire('$res', 'after-step', '30 s')")
	q -c "SELECT fencelock.release('$res', 'after-step')" >/dev/null
	expect "$lang: one step: its writes land with the granted fence ($f1), afterwards the lease is $st2, the next grant's fence is higher ($n1)" \
		'[ $st -eq 0 ] && grep -q "step: done; released: [Tt]rue" "$out/step" && [ -n "$f1" ] &&
		 [ "$(row)" = "2:step:$f1" ] && [ "$st2" = free ] && [ "$n1" -gt "$f1" ]' "$out/step"

	# Paused past its TTL inside the transaction (the work sleeps 3 s, the TTL is 1 s): the
	# server ends the session (idle_in_transaction_session_timeout), nothing of it remains.
	timeout 30 $job --resource "$res" --name paused --ttl 1 --steps 2 --work 3 --one-step >"$out/paused" 2>&1
	st=$?
	fp=$(fence_of "$out/paused")
	st2=$(state)
	timeout 30 $job --resource "$res" --name after-pause --ttl 5 --steps 1 --work 0 --one-step >"$out/after-pause" 2>&1
	fn=$?
	expect "$lang: one step paused past its TTL: the server ends its session, the step raises lease lost (exit 3), its write is not in the table, the lease is free ($st2)" \
		'[ $st -eq 3 ] && [ -n "$fp" ] && grep -q "paused: step 1 written" "$out/paused" &&
		 grep -q "paused: lease lost, nothing committed: the session ended before the step committed" "$out/paused" &&
		 ! grep -q "step 2 written" "$out/paused" && [ "$st2" = free ]' "$out/paused"
	f2=$(fence_of "$out/after-pause")
	expect "$lang: one step paused past its TTL: the next grant ($f2, after $f1) writes" \
		'[ $fn -eq 0 ] && [ -n "$f2" ] && [ "$f2" -gt "$f1" ] && [ "$(row)" = "1:after-pause:$f2" ]' "$out/after-pause"

	# The job's function raises after its write: the step rolls back, grant and write alike.
	timeout 30 $job --resource "$res" --name failing --ttl 5 --steps 2 --work 0 --fail-at 1 --one-step >"$out/failing" 2>&1
	st=$?
	expect "$lang: one step whose function raises: nothing of it committed (the row keeps the last write), the lease is free" \
		'[ $st -eq 5 ] && grep -q "failing: step 1 written" "$out/failing" &&
		 grep -q "failing: failed, nothing committed: .*failed after step 1" "$out/failing" &&
		 [ "$(row)" = "1:after-pause:$f2" ] && [ "$(state)" = free ]' "$out/failing"

	# While a step's transaction is open (its function waits for a file, polling the server, so
	# the session is not idle), a try-once acquire gets NULL, also once the TTL (1 s) has passed.
	rm -f "$out/hold"
	$job --resource "$res" --name holder --ttl 1 --steps 1 --work 0 --one-step --hold-file "$out/hold" >"$out/holder" 2>&1 &
	pa=$!
	wait_for 'grep -qs "holder: step 1 written" "$out/holder"' 100
	n1=$(q -c "SELECT coalesce(fencelock.acquire('$res', 'intruder', '30 s')::text, 'NULL')")
	sleep 1.3 # the grant was before "step 1 written": its TTL has passed
	n2=$(q -c "SELECT coalesce(fencelock.acquire('$res', 'intruder', '30 s')::text, 'NULL')")
	touch "$out/hold"
	finish "$pa"
	st=$?
	fp=$(fence_of "$out/holder")
	fn=$(q -c "SELECT fencelock.acquire('$res', 'after-hold', '30 s')")
	q -c "SELECT fencelock.release('$res', 'after-hold')" >/dev/null
	expect "$lang: one step held open: another owner's try-once acquire gets NULL ($n1), also past the TTL ($n2); then the step commits its write and the next grant ($fn) is higher" \
		'[ "$n1" = NULL ] && [ "$n2" = NULL ] && [ $st -eq 0 ] && grep -q "holder: done" "$out/holder" &&
		 [ "$(row)" = "1:holder:$fp" ] && [ "$fn" -gt "$fp" ]' "$out/holder"
}

typed_errors_py() { # (from $work: the tree's fencelock.so is not a Python module)
	cd "$work" && "$VPY" - <<'PY'
import sys
import psycopg, fencelock
with psycopg.connect("", autocommit=True) as c:
    def outcome(query):
        try:
            with fencelock.translated():
                c.execute(query)
        except Exception as e:
            return type(e).__name__
    got = [outcome("UPDATE report_runs SET step = 0 WHERE resource = 'report:py'"),
           outcome("UPDATE report_runs SET last_fence = 0 WHERE resource = 'report:py'"),
           outcome("SELECT 1/0")]
print(got)
sys.exit(got != ["Unfenced", "StaleFence", "DivisionByZero"])
PY
}

typed_errors_node() {
	(cd "$app" && node --input-type=module -e '
		import pg from "pg";
		import { query } from "fencelock";
		const c = new pg.Client(); await c.connect();
		const outcome = (sql) => query(c, sql).then(() => "none", (e) => e.name + (e.code ? ":" + e.code : "") + (e.cause ? "<" + e.cause.code : ""));
		const got = [await outcome("UPDATE report_runs SET step = 0 WHERE resource = $$report:node$$"),
		             await outcome("UPDATE report_runs SET last_fence = 0 WHERE resource = $$report:node$$"),
		             await outcome("SELECT 1/0")];
		await c.end();
		console.log(JSON.stringify(got));
		process.exitCode = JSON.stringify(got) === JSON.stringify(["Unfenced<FL002", "StaleFence<FL001", "error:22012"]) ? 0 : 1;')
}

# -- Java and Go: built and unit-tested in the background while Python and Node run -------------
# Java: the library clients/java installed with mvn install into a local repository of this run
# (its JUnit tests run on the way), then examples/java, a separate project, built against the
# installed artifact; the programs run from the installed jar.  Go: examples/go/build.sh puts the
# module clients/go into a GOPATH at its module path and builds the programs, which import it by
# that path (go test of the module on the way).
m2=$work/maven-repo
JAVA_LIB=$m2/io/github/fencelock/fencelock/$version/fencelock-$version.jar
JAVA_CP=examples/java/target/fencelock-examples-$version.jar:$JAVA_LIB:/usr/share/java/postgresql.jar
go_env() { env GO111MODULE=off GOPATH="$work/gopath:/usr/share/gocode" GOFLAGS= \
	GOCACHE="${GOCACHE:-$work/gopath/cache}" FENCELOCK_GOPATH="$work/gopath" "$@"; }
build_java_go() { # each build's status and milliseconds into $work/BUILD.status
	local t
	t=$(now_ms)
	rm -rf clients/java/target examples/java/target
	# JUnit's failures are counted below; the library is installed for the programs all the same.
	(cd clients/java && mvn -B -q -Dstyle.color=never -s debian-settings.xml \
		-Dmaven.repo.local="$m2" -Dmaven.test.failure.ignore=true install) >"$work/java-build" 2>&1
	echo "$? $(elapsed "$t")" >"$work/java-build.status"
	t=$(now_ms)
	(cd examples/java && mvn -B -q -Dstyle.color=never -s ../../clients/java/debian-settings.xml \
		-Dmaven.repo.local="$m2" package) >"$work/java-examples-build" 2>&1
	echo "$? $(elapsed "$t")" >"$work/java-examples-build.status"
	t=$(now_ms)
	rm -rf examples/go/bin
	go_env sh examples/go/build.sh test -count=1 -v >"$work/go-build" 2>&1
	echo "$? $(elapsed "$t")" >"$work/go-build.status"
}

typed_errors_java() {
	cat >"$work/TypedErrors.java" <<'JAVA'
import io.github.fencelock.Fencelock;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;

public class TypedErrors {
    public static void main(String[] args) throws Exception {
        String[] queries = {"UPDATE report_runs SET step = 0 WHERE resource = 'report:java'",
            "UPDATE report_runs SET last_fence = 0 WHERE resource = 'report:java'", "SELECT 1/0"};
        StringBuilder got = new StringBuilder();
        try (Connection c = Fencelock.fromEnvironment().connect(); Statement s = c.createStatement()) {
            for (String q : queries) {
                String outcome = "none";
                try {
                    Fencelock.translated(() -> s.execute(q));
                } catch (SQLException e) {
                    outcome = e.getClass().getSimpleName() + ":" + e.getSQLState()
                        + (e.getCause() instanceof SQLException ? "<" + ((SQLException) e.getCause()).getSQLState() : "");
                }
                got.append(got.length() > 0 ? " " : "").append(outcome);
            }
        }
        System.out.println(got);
        System.exit(got.toString().equals(
            "UnfencedException:FL002<FL002 StaleFenceException:FL001<FL001 PSQLException:22012") ? 0 : 1);
    }
}
JAVA
	java -cp "$JAVA_CP" "$work/TypedErrors.java"
}

typed_errors_go() {
	cat >"$work/typed_errors.go" <<'GO'
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	fencelock "github.com/fencelock/fencelock/clients/go"
	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
)

func main() {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, "")
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	var got []string
	for _, q := range []string{"UPDATE report_runs SET step = 0 WHERE resource = 'report:go'",
		"UPDATE report_runs SET last_fence = 0 WHERE resource = 'report:go'", "SELECT 1/0"} {
		_, err := c.Exec(ctx, q)
		err = fencelock.Translate(err)
		var fe *fencelock.Error
		var pe *pgconn.PgError
		outcome := "none"
		switch {
		case errors.As(err, &fe) && errors.As(err, &pe):
			outcome = fmt.Sprintf("%s:%s<%s", fe.Kind, fe.SQLState, pe.Code)
		case errors.As(err, &pe):
			outcome = "PgError:" + pe.Code
		}
		if errors.Is(err, fencelock.ErrStaleFence) != (outcome == "StaleFence:FL001<FL001") {
			outcome += "(errors.Is is wrong)"
		}
		got = append(got, outcome)
	}
	fmt.Println(strings.Join(got, " "))
	if strings.Join(got, " ") != "Unfenced:FL002<FL002 StaleFence:FL001<FL001 PgError:22012" {
		os.Exit(1)
	}
}
GO
	go_env go run "$work/typed_errors.go"
}

build_status() { # build_status NAME: "STATUS MS" once the build has finished
	while [ ! -s "$work/$1.status" ] && kill -0 "$build_pid" 2>/dev/null; do sleep 0.2; done
	cat "$work/$1.status" 2>/dev/null || echo "1 0"
}

build_java_go &
build_pid=$!

t_start=$(now_ms)
run_lang py "$VPY examples/python/fenced_job.py" "$VPY examples/python/task_worker.py"
(typed_errors_py) >"$work/py/typed" 2>&1
result "py: FL002 raises Unfenced, FL001 StaleFence, other errors stay psycopg's" $? "$work/py/typed"
# fencelock.celery.fenced_task under a Celery worker (test/clients/celery_check.py: the checks).
mkdir -p "$work/celery" && : >"$work/celery/checks"
timeout 90 "$VPY" test/clients/celery_check.py "$work/celery" "$VPY" >"$work/celery/driver.log" 2>&1
while IFS=$'\t' read -r st desc; do result "$desc" "$st" "$work/celery/worker.log" "$work/celery/driver.log"; done <"$work/celery/checks"
[ "$(wc -l <"$work/celery/checks")" -eq 4 ] || result "python celery: every check ran" 1 "$work/celery/driver.log" "$work/celery/worker.log"
run_lang node "node $app/fenced-job.mjs" "node $app/task-worker.mjs"
typed_errors_node >"$work/node/typed" 2>&1
result "node: FL002 rejects with Unfenced, FL001 StaleFence (cause kept), other errors stay pg's" $? "$work/node/typed"
# fencedJob under croner from npm (test/clients/cron_job.mjs): two instances tick one job every
# second, only one runs it per tick; then a run whose lease is revoked has its signal aborted.
cron=$work/cron
mkdir -p "$cron"
(cd "$app" && npm install --prefer-offline --no-audit --no-fund --silent croner@9.1.0) >"$cron/npm.log" 2>&1 &&
	cp test/clients/cron_job.mjs "$app/"
result "node cron: croner 9.1.0 from npm installed beside the packed fencelock" $? "$cron/npm.log"
node "$app/cron_job.mjs" cron-a report:cron 3.5 400 >"$cron/a" 2>&1 &
pa=$!
node "$app/cron_job.mjs" cron-b report:cron 3.5 400 >"$cron/b" 2>&1
fb=$?
finish "$pa" 100
st=$?
runs=$(awk '$2 == "ran" { sub(":", "", $1); print $3, $1, $5 }' "$cron/a" "$cron/b" | sort -n) # SECOND NAME FENCE
nruns=$(grep -c . <<<"$runs")
dup=$(awk '{ print $1 }' <<<"$runs" | uniq -d | grep -c .)
both=$(awk '$2 == "ran" || $2 == "skipped" { print $3 }' "$cron/a" "$cron/b" | sort | uniq -d | grep -c .)
expect "node cron: two croner instances tick one fencedJob every second for 3.5 s: $nruns ticks ran, each in one instance only ($both ticks met the other instance skipping), fences rising, the last run's writes in the row" \
	'[ $st -eq 0 ] && [ $fb -eq 0 ] && [ "$nruns" -ge 3 ] && [ "$dup" -eq 0 ] && [ "$both" -ge 2 ] &&
	 awk "{ if (NR > 1 && \$3 <= prev) bad = 1; prev = \$3 } END { exit bad }" <<<"$runs" &&
	 [ "$(q -c "SELECT step || '"' '"' || written_by || '"' '"' || last_fence FROM report_runs WHERE resource = '"'report:cron'"'")" = \
	   "$(tail -1 <<<"$runs" | awk "{ print 2, \$2, \$3 }")" ]' "$cron/a" "$cron/b"
node "$app/cron_job.mjs" cron-long report:cron 1.5 10000 >"$cron/long" 2>&1 &
pa=$!
wait_for 'grep -qs "cron-long: started" "$cron/long"' 30
sleep 0.2 # step 1 written
t0=$(now_ms)
q -c "SELECT fencelock.revoke('report:cron')" >/dev/null
finish "$pa" 100
st=$?
ms=$(elapsed "$t0")
expect "node cron: a run whose lease is revoked: its AbortSignal aborts and the job rejects with LeaseLost (to onError), the process ends ${ms} ms after the revoke (ttl/3 = 1000 ms); step 2 never written" \
	'[ $st -eq 0 ] && [ "$ms" -lt 2500 ] &&
	 grep -Eq "cron-long: lost [0-9]+ LeaseLost: the lease expired or was taken over; [0-9]+ ms after the signal aborted" "$cron/long" &&
	 grep -q "cron-long: job failed: LeaseLost" "$cron/long" &&
	 [ "$(q -c "SELECT step || written_by FROM report_runs WHERE resource = '"'report:cron'"'")" = 1cron-long ]' "$cron/long"

read -r st ms < <(build_status java-build)
# JUnit's counts, summed over the test classes' reports: run, failed, errors, skipped.
read -r jn jf je js < <(cat clients/java/target/surefire-reports/*.txt 2>/dev/null | awk -F'[:,] *' '
	/^Tests run:/ { n += $2; f += $4; e += $6; s += $8; seen = 1 }
	END { print seen ? n " " f " " e " " s : "0 1 1 1" }')
expect "java: mvn install of clients/java offline from /usr/share/maven-repo into a local repository ($((ms / 1000)) s); JUnit: $jn tests, $((jf + je)) failed, $js skipped" \
	'[ "$st" = 0 ] && [ "$jn" -gt 0 ] && [ "$jf$je$js" = 000 ] && [ -f "$JAVA_LIB" ]' \
	"$work/java-build" clients/java/target/surefire-reports/io.github.fencelock.FencedLeaseTest.txt
# The installed artifact: its coordinates and version (the extension's), the library's classes
# and no example program.
pom=${JAVA_LIB%.jar}.pom
jar_classes=$(unzip -Z1 "$JAVA_LIB" 2>/dev/null | grep '\.class$' | sort | tr '\n' ' ')
echo "$jar_classes" >"$work/java-jar-classes"
expect "java: installed as io.github.fencelock:fencelock:$version (the extension's version), the library's classes only, no example program" \
	'[ -f "$pom" ] && grep -q "<groupId>io.github.fencelock</groupId>" "$pom" && grep -q "<artifactId>fencelock</artifactId>" "$pom" &&
	 grep -q "<version>$version</version>" "$pom" && [[ $jar_classes == *io/github/fencelock/FencedLease.class* ]] &&
	 [[ $jar_classes != *examples* ]]' "$work/java-jar-classes"
read -r st ms < <(build_status java-examples-build)
expect "java: examples/java, a separate project, builds against the installed artifact alone ($((ms / 1000)) s)" \
	'[ "$st" = 0 ] && [ -f examples/java/target/fencelock-examples-$version.jar ] &&
	 [ -z "$(unzip -Z1 examples/java/target/fencelock-examples-$version.jar | grep -v "^META-INF\|/examples/\|/$")" ]' \
	"$work/java-examples-build"
if [ -f examples/java/target/fencelock-examples-$version.jar ] && [ -f "$JAVA_LIB" ]; then
	run_lang java "java -cp $JAVA_CP io.github.fencelock.examples.FencedJob" "java -cp $JAVA_CP io.github.fencelock.examples.TaskWorker"
	typed_errors_java >"$work/java/typed" 2>&1
	result "java: FL002 throws UnfencedException, FL001 StaleFenceException (cause kept), other errors stay PgJDBC's" $? "$work/java/typed"
fi
# io.github.fencelock.spring.FencedTask under Spring 4.3's ThreadPoolTaskScheduler and CronTrigger
# (test/clients/SpringTask.java): two JVMs tick one task every second, only one runs it per tick;
# then a run whose lease is revoked is stopped and its late write refused.
sp=$work/spring spring=/usr/share/maven-repo/org/springframework sv=4.3.30.RELEASE
SPRING_CP=$JAVA_LIB:/usr/share/java/postgresql.jar:/usr/share/java/commons-logging.jar
for a in context core beans; do SPRING_CP+=:$spring/spring-$a/$sv/spring-$a-$sv.jar; done
mkdir -p "$sp/classes"
javac -Xlint:all,-path -Werror -cp "$SPRING_CP" -d "$sp/classes" test/clients/SpringTask.java >"$sp/javac.log" 2>&1
result "java spring: test/clients/SpringTask.java builds against the installed library and Debian's Spring $sv alone" $? "$sp/javac.log"
java -cp "$sp/classes:$SPRING_CP" SpringTask spring-a report:spring 4.5 400 >"$sp/a" 2>&1 &
pa=$!
java -cp "$sp/classes:$SPRING_CP" SpringTask spring-b report:spring 4.5 400 >"$sp/b" 2>&1
fb=$?
finish "$pa" 100
st=$?
runs=$(awk '$2 == "ran" { sub(":", "", $1); print $3, $1, $5 }' "$sp/a" "$sp/b" | sort -n) # SECOND NAME FENCE
nruns=$(grep -c . <<<"$runs")
dup=$(awk '{ print $1 }' <<<"$runs" | uniq -d | grep -c .)
both=$(awk '$2 == "ran" || $2 == "skipped" { print $3 }' "$sp/a" "$sp/b" | sort | uniq -d | grep -c .)
expect "java spring: two JVMs' ThreadPoolTaskSchedulers tick one FencedTask by CronTrigger every second for 4.5 s: $nruns ticks ran, each in one JVM only ($both ticks met the other skipping), fences rising, the last run's writes in the row" \
	'[ $st -eq 0 ] && [ $fb -eq 0 ] && [ "$nruns" -ge 3 ] && [ "$dup" -eq 0 ] && [ "$both" -ge 2 ] &&
	 awk "{ if (NR > 1 && \$3 <= prev) bad = 1; prev = \$3 } END { exit bad }" <<<"$runs" &&
	 [ "$(q -c "SELECT step || '"' '"' || written_by || '"' '"' || last_fence FROM report_runs WHERE resource = '"'report:spring'"'")" = \
	   "$(tail -1 <<<"$runs" | awk "{ print 2, \$2, \$3 }")" ]' "$sp/a" "$sp/b"
java -cp "$sp/classes:$SPRING_CP" SpringTask spring-long report:spring 1.5 10000 >"$sp/long" 2>&1 &
pa=$!
wait_for 'grep -qs "spring-long: started" "$sp/long"' 50
sleep 0.2 # step 1 written
t0=$(now_ms)
q -c "SELECT fencelock.revoke('report:spring')" >/dev/null
finish "$pa" 100
st=$?
ms=$(elapsed "$t0")
expect "java spring: a run whose lease is revoked: LeaseLostException in its body, its late write refused FL001, the exception to Spring's error handler, the JVM ends ${ms} ms after the revoke (ttl/3 = 1000 ms); step 2 never written" \
	'[ $st -eq 0 ] && [ "$ms" -lt 2500 ] &&
	 grep -q "spring-long: lost [0-9]* LeaseLostException: the lease expired or was taken over" "$sp/long" &&
	 grep -q "spring-long: late write refused FL001" "$sp/long" &&
	 grep -q "spring-long: task failed: io.github.fencelock.UncheckedSQLException: the lease expired or was taken over" "$sp/long" &&
	 [ "$(q -c "SELECT step || written_by FROM report_runs WHERE resource = '"'report:spring'"'")" = 1spring-long ]' "$sp/long"

read -r st ms < <(build_status go-build)
gopass=$(grep -c '^--- PASS' "$work/go-build" || true)
gofail=$(grep -c '^--- FAIL' "$work/go-build" || true)
goskip=$(grep -c '^--- SKIP' "$work/go-build" || true)
expect "go: build.sh (GOPATH mode, Debian's pgx v4) builds the programs importing github.com/fencelock/fencelock/clients/go ($((ms / 1000)) s); go test: $gopass passed, $gofail failed, $goskip skipped" \
	'[ "$st" = 0 ] && [ "$gopass" -gt 0 ] && [ "$gofail$goskip" = 00 ] &&
	 [ -x examples/go/bin/fenced-job ] && [ -x examples/go/bin/task-worker ] && [ -x examples/go/bin/lease-holder ]' "$work/go-build"
if [ -x examples/go/bin/fenced-job ] && [ -x examples/go/bin/task-worker ]; then
	run_lang go examples/go/bin/fenced-job examples/go/bin/task-worker
	typed_errors_go >"$work/go/typed" 2>&1
	result "go: a program of its own importing the module path builds; FL002 is ErrUnfenced, FL001 ErrStaleFence (errors.Is; the *pgconn.PgError kept), other errors stay pgx's" $? "$work/go/typed"
fi
wait "$build_pid"
build_pid=

# -- monitoring --------------------------------------------------------------------------------
scrape() { # scrape FILE: the exporter's /metrics into FILE
	"$PY" -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
		"http://127.0.0.1:$port/metrics" >"$1" 2>/dev/null
}
metric() { # metric FILE NAME [LABEL-MATCH]: the sample's value (0 when absent)
	awk -v name="$2" -v lab="${3:-}" '
		(index($1, name "{") == 1 || $1 == name) && index($1, lab) { v = $NF; found = 1 }
		END { print found ? v + 0 : 0 }' "$1"
}

q <<'SQL' >/dev/null
DO $$BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'fencelock_exporter') THEN
        CREATE ROLE fencelock_exporter LOGIN;
    END IF;
END$$;
GRANT pg_monitor TO fencelock_exporter;
SQL
port=
for p in ${FENCELOCK_EXPORTER_PORTS:-9187 9188 9189}; do
	(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { port=$p; break; }
done
if [ -z "$port" ]; then
	result "exporter: a free port among ${FENCELOCK_EXPORTER_PORTS:-9187 9188 9189}" 1
else
	DATA_SOURCE_NAME="host=$PGHOST port=$PGPORT user=fencelock_exporter dbname=$DB sslmode=disable" \
		"$EXPORTER" --web.listen-address="127.0.0.1:$port" \
		--extend.query-path="$root/contrib/prometheus/fencelock-queries.yaml" \
		--disable-settings-metrics --log.level=warn >"$work/exporter.log" 2>&1 &
	exporter_pid=$!
	wait_for 'scrape "$work/m0" && grep -q "^fencelock_grants_total" "$work/m0"' 50
	names=(grants takeovers reacquires busy renewals renewals_refused releases releases_refused
		stale_rejected unfenced_rejected waits wait_seconds wait_timeouts)
	bad=()
	for m in "${names[@]/%/_total}" table_stale_rejected_total table_unfenced_rejected_total; do
		grep -q "^# TYPE fencelock_$m counter" "$work/m0" && grep -q "^# HELP fencelock_$m [A-Z]" "$work/m0" || bad+=("$m")
	done
	for m in leases_held leases_expired leases_free leases_waiters leases_oldest_held_age_seconds stats_reset_timestamp_seconds; do
		grep -q "^# TYPE fencelock_$m gauge" "$work/m0" && grep -q "^# HELP fencelock_$m [A-Z]" "$work/m0" || bad+=("$m")
	done
	expect "exporter as fencelock_exporter (pg_monitor) on 127.0.0.1:$port: queries file loads, every fencelock metric has HELP and TYPE" \
		'[ "$(metric "$work/m0" pg_up)" = 1 ] && [ "$(metric "$work/m0" pg_exporter_user_queries_load_error)" = 0 ] &&
		 [ ${#bad[@]} -eq 0 ] || { echo "#   missing or mistyped: ${bad[*]}"; false; }' "$work/exporter.log"

	# A held lease and a waiter show in the gauges.
	q -c "SELECT fencelock.acquire('metrics:held', 'holder', '60 s')" >/dev/null
	q -c "SELECT fencelock.acquire('metrics:held', 'waiter', '60 s', '20 s')" >"$work/waiter.out" 2>&1 &
	wpid=$!
	wait_for '[ "$(q -c "SELECT fencelock.waiters('"'metrics:held'"')")" = 1 ]'
	sleep 0.2 # the oldest held lease's age is measurably above zero
	scrape "$work/m1"
	expect "exporter: fencelock_leases_held, _waiters and _oldest_held_age_seconds show a held lease and its waiter" \
		'[ "$(metric "$work/m1" fencelock_leases_held)" -ge 1 ] && [ "$(metric "$work/m1" fencelock_leases_waiters)" -ge 1 ] &&
		 awk "BEGIN { exit !($(metric "$work/m1" fencelock_leases_oldest_held_age_seconds) >= 0.2) }"' "$work/m1"
	# Issue 26: the same lease and waiter per resource (fencelock_resource_*, bounded series).
	bad=()
	for m in busy_total grants_total takeovers_total waits_total wait_seconds_total wait_timeouts_total \
		waiters_refused_total holds_total hold_seconds_total stale_rejected_total; do
		grep -q "^# TYPE fencelock_resource_$m counter" "$work/m1" || bad+=("$m")
	done
	for m in max_wait_seconds max_hold_seconds max_stale_seconds waiters; do
		grep -q "^# TYPE fencelock_resource_$m gauge" "$work/m1" || bad+=("$m")
	done
	rw=$(metric "$work/m1" fencelock_resource_waiters 'resource="metrics:held"')
	rb=$(metric "$work/m1" fencelock_resource_busy_total 'resource="metrics:held"')
	rn=$(grep -c "^fencelock_resource_busy_total{" "$work/m1")
	expect "exporter: fencelock_resource_waiters{resource=\"metrics:held\"} shows the waiter ($rw), _busy_total its tries ($rb); $rn resources (at most 60); every fencelock_resource metric typed" \
		'[ "$rw" -ge 1 ] && [ "$rb" -ge 1 ] && [ "$rn" -le 60 ] &&
		 [ ${#bad[@]} -eq 0 ] || { echo "#   missing or mistyped: ${bad[*]}"; false; }' "$work/m1"
	q -c "SELECT fencelock.release('metrics:held', 'holder')" >/dev/null
	wait "$wpid"
	q -c "SELECT fencelock.release('metrics:held', 'waiter')" >/dev/null
	scrape "$work/m1b"
	rh=$(metric "$work/m1b" fencelock_resource_max_hold_seconds 'resource="metrics:held"')
	rwt=$(metric "$work/m1b" fencelock_resource_waits_total 'resource="metrics:held"')
	expect "exporter: after the release, fencelock_resource_max_hold_seconds{resource=\"metrics:held\"} >= 0.2 ($rh), its wait counted ($rwt)" \
		'awk "BEGIN { exit !($rh >= 0.2) }" && [ "$rwt" -ge 1 ]' "$work/m1b"

	# A stale write refused moves the counters.
	q -c "SELECT fencelock.acquire('report:metrics', 'm-a', '60 s')" \
		-c "UPDATE report_runs SET step = 1, last_fence = 5 WHERE resource = 'report:metrics'" >/dev/null
	scrape "$work/m2"
	q -v VERBOSITY=verbose -c "UPDATE report_runs SET step = 2, last_fence = 4 WHERE resource = 'report:metrics'" \
		>/dev/null 2>"$work/stale.err"
	scrape "$work/m3"
	s2=$(metric "$work/m2" fencelock_stale_rejected_total)
	s3=$(metric "$work/m3" fencelock_stale_rejected_total)
	t2=$(metric "$work/m2" fencelock_table_stale_rejected_total 'table="report_runs"')
	t3=$(metric "$work/m3" fencelock_table_stale_rejected_total 'table="report_runs"')
	expect "exporter: a refused stale write raises fencelock_stale_rejected_total ($s2 -> $s3) and fencelock_table_stale_rejected_total{table=\"report_runs\"} ($t2 -> $t3)" \
		'grep -q "FL001: fence 4 is older than the stored fence 5" "$work/stale.err" && [ "$s3" -ge $((s2 + 1)) ] && [ "$t3" -eq $((t2 + 1)) ]' \
		"$work/stale.err"
	q -c "SELECT fencelock.release('report:metrics', 'm-a')" >/dev/null
fi

# -- the lease contract's fault scenarios S1-S6 (doc/clients.md) -------------------------------
# Each language's lease holder through a fault proxy of its own (ports PGPORT+2k and +2k+1; k = 1
# python, 2 node, 3 java, 4 go), the languages side by side; test/clients/scenarios.sh lets one
# server restart (S3) run at a time, while no other scenario runs.  Last: nothing else (JUnit,
# go test, the exporter's counters, which a restart resets) meets a restart.
mkdir -p "$work/fault"
scen_pids=() scen_langs=()
scenarios() { # scenarios LANG K HOLDER...
	local lang=$1 k=$2
	shift 2
	PY=$PY PG_CTL_DATA=${FENCELOCK_PGDATA:-$PGHOST/data} bash test/clients/scenarios.sh "$lang" \
		$((PGPORT + 2 * k)) "$work/fault/$lang" "$@" >"$work/fault/$lang.log" 2>&1 &
	scen_pids+=($!) scen_langs+=("$lang")
}
scenarios python 1 "$VPY" examples/python/lease_holder.py
scenarios node 2 node "$app/lease-holder.mjs"
# Java and Go hold the lease running a statement (--query): the loss must also stop it.
[ ! -f examples/java/target/fencelock-examples-$version.jar ] ||
	scenarios java 3 java -cp "$JAVA_CP" io.github.fencelock.examples.LeaseHolder --query
[ ! -x examples/go/bin/lease-holder ] || scenarios go 4 examples/go/bin/lease-holder --query
wait "${scen_pids[@]}"
for lang in "${scen_langs[@]}"; do
	if [ ! -s "$work/fault/$lang/results" ]; then
		result "$lang: the fault scenarios ran" 1 "$work/fault/$lang.log"
		continue
	fi
	while IFS=$'\t' read -r st desc; do result "$desc" "$st"; done <"$work/fault/$lang/results"
	[ ! -s "$work/fault/$lang/failures" ] || sed 's/^/#   /' "$work/fault/$lang/failures"
done

ms=$(elapsed "$t_start")
if [ "$failed" -gt 0 ]; then
	KEEP=1
	echo "# outputs kept in $work"
fi
echo "# took $((ms / 1000)).$((ms % 1000 / 100)) s"
echo "clients: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
