#!/usr/bin/env bash
# Provide a PGXS tree (server, pg_config, headers, pg_regress, isolation tester, TAP modules) for
# one PostgreSQL major.
#
#   bash scripts/pg.sh MAJOR       provide it (installing or building when missing), print its bindir
#   . scripts/pg.sh; fl_pg MAJOR   the same from a script: sets PG_BIN (and FL_PG_ROOT) instead
#
# 15 is Debian 12's own packages (postgresql-15, postgresql-server-dev-15), installed when missing.
# 17 and 18 are Debian's own binary packages too, of the suite that has them (17: trixie, 18: sid),
# installed into a Debian root of that suite made with debootstrap under
# $FENCELOCK_PG_CACHE/root-SUITE (default /var/cache/fencelock/root-trixie, root-sid), once per
# machine: fl_pg sets FL_PG_ROOT to the root and PG_BIN to the bindir inside it
# (/usr/lib/postgresql/MAJOR/bin); fl_root_exec runs a command there.  bash scripts/pg.sh 17
# prints ROOT:BINDIR.  18-debug is 18's upstream source (inside sid's source package) built as
# PostgreSQL's developers test: assertions on (--enable-cassert: freed memory is clobbered,
# invariants checked), debug symbols, and -DUSE_VALGRIND (memcheck learns about palloc's chunks;
# `make valgrind` runs the server under it), into $FENCELOCK_PG_CACHE/pg-18-debug.
# A root or a build counts only when its stamp file exists; the stamp is written after the
# installed tree has been checked, so an interrupted or failed one is removed and redone, never
# used.  A lock (flock) makes concurrent runs wait for one build instead of building twice.
# Logs go to stderr (the full log to $FENCELOCK_PG_CACHE/pg-MAJOR.log or root-SUITE.log).

FENCELOCK_PG_CACHE=${FENCELOCK_PG_CACHE:-/var/cache/fencelock}
FL_PG_MAJORS="15 17 18"
FL_PG_VARIANTS="18-debug" # builds that are not a major of their own (fl_pg accepts them too)

# Which Debian suite serves a major newer than Debian 12's (its binary packages, and the source
# package of a source build).
fl_pg_suite() {
	case ${1%-debug} in
	17) echo trixie ;;
	18) echo sid ;;
	*) return 1 ;;
	esac
}

fl_pg_log() { echo "== pg $*" >&2; }

# fl_pg_apt_install PKG...: install the Debian packages that are missing (as root).
fl_pg_apt_install() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -gt 0 ] || return 0
	fl_pg_log "installing ${missing[*]}"
	[ "$(id -u)" -eq 0 ] || { echo "run as root to install ${missing[*]}" >&2; return 1; }
	# The test suite's parts run at the same time and may install at the same time: one at a time.
	(
		flock 8
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 \
			--no-install-recommends "${missing[@]}" >/dev/null
	) 8>/var/lock/fencelock-apt.lock
}

# The mirror this machine already uses for Debian itself (deb822 or one-line format).
fl_pg_mirror() {
	local m
	m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
		awk '/^URIs:/ { u = $2 } /^Suites:/ && / bookworm( |$)/ && u != "" { print u; exit }')
	[ -n "$m" ] || m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
		awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }')
	echo "${m:-http://deb.debian.org/debian}"
}

# Add deb-src entries for the suites serving 17 and 18 (only source indexes: nothing installable
# changes) and refresh the indexes.
fl_pg_sources() {
	local f=/etc/apt/sources.list.d/fencelock-pg-src.sources
	if [ ! -f "$f" ]; then
		fl_pg_log "adding deb-src trixie sid ($f)"
		cat >"$f" <<-EOF
			# Written by fencelock's scripts/pg.sh: source packages of newer PostgreSQL majors.
			Types: deb-src
			URIs: $(fl_pg_mirror)
			Suites: trixie sid
			Components: main
			Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
		EOF
	fi
	apt-get update -qq >&2
}

# The tree of a source build is complete: pg_config and postgres run and report this major, and
# everything PGXS installcheck needs for regression, isolation and TAP tests is installed.
fl_pg_verify() {
	local major=${1%-debug} prefix=$2 pgxs f
	"$prefix/bin/pg_config" --version | grep -q "^PostgreSQL $major\." || return 1
	"$prefix/bin/postgres" --version | grep -q "(PostgreSQL) $major\." || return 1
	pgxs=$(dirname "$(dirname "$("$prefix/bin/pg_config" --pgxs)")")/..
	for f in src/makefiles/pgxs.mk src/test/regress/pg_regress src/test/isolation/pg_isolation_regress \
		src/test/isolation/isolationtester src/test/perl/PostgreSQL/Test/Cluster.pm \
		src/test/perl/PostgreSQL/Test/Utils.pm; do
		[ -e "$pgxs/$f" ] || { echo "missing $pgxs/$f" >&2; return 1; }
	done
	for f in initdb pg_ctl psql pg_dump pg_basebackup; do
		[ -x "$prefix/bin/$f" ] || { echo "missing $prefix/bin/$f" >&2; return 1; }
	done
	[ -e "$("$prefix/bin/pg_config" --sharedir)/extension/dblink.control" ] ||
		{ echo "missing dblink in $prefix" >&2; return 1; }
	[ -e "$("$prefix/bin/pg_config" --sharedir)/extension/amcheck.control" ] ||
		{ echo "missing amcheck in $prefix" >&2; return 1; }
	if [ "$1" != "$major" ]; then
		"$prefix/bin/pg_config" --configure | grep -q -- --enable-cassert ||
			{ echo "$prefix is not assert-enabled" >&2; return 1; }
		[ -e "$prefix/share/valgrind.supp" ] || { echo "missing $prefix/share/valgrind.supp" >&2; return 1; }
	fi
}

# fl_pg_build MAJOR PREFIX: download, configure, build and install into PREFIX.
fl_pg_build() {
	local major=${1%-debug} variant=$1 prefix=$2 suite src tarball status opts=()
	suite=$(fl_pg_suite "$major")
	src=$FENCELOCK_PG_CACHE/src-$variant
	fl_pg_apt_install gcc make bison flex perl libipc-run-perl dpkg-dev
	if [ "$variant" != "$major" ]; then
		fl_pg_apt_install valgrind # memcheck.h for -DUSE_VALGRIND, and memcheck itself
		opts+=(--enable-cassert --enable-debug CPPFLAGS=-DUSE_VALGRIND)
	fi
	# ICU as Debian's own packages have it (nondeterministic collations need it).
	fl_pg_apt_install libicu-dev pkg-config
	# readline and zlib when Debian has them installed; without them otherwise.
	dpkg-query -W -f='${Status}' libreadline-dev 2>/dev/null | grep -q 'ok installed' ||
		opts+=(--without-readline)
	dpkg-query -W -f='${Status}' zlib1g-dev 2>/dev/null | grep -q 'ok installed' || opts+=(--without-zlib)
	grep -qs '^Types: deb-src' /etc/apt/sources.list.d/fencelock-pg-src.sources &&
		apt-cache showsrc "postgresql-$major" 2>/dev/null | grep -q '^Package:' ||
		fl_pg_sources
	rm -rf "$src" "$prefix"
	mkdir -p "$src"
	# apt fetches as _apt where it can write (without it: a warning, and an unsandboxed download).
	! id _apt >/dev/null 2>&1 || chown _apt "$src"
	fl_pg_log "$major: downloading postgresql-$major/$suite source"
	# Exit status 3: the archive answers 404 for this source (nothing to build; not a build
	# failure); any other download failure is one.
	if ! (cd "$src" && apt-get source -qq --download-only "postgresql-$major/$suite") \
		>"$src.apt.log" 2>&1; then
		cat "$src.apt.log" >&2
		if grep -q ' 404 ' "$src.apt.log"; then status=3; else status=1; fi
		rm -f "$src.apt.log"
		return "$status"
	fi
	rm -f "$src.apt.log"
	tarball=$(ls "$src"/postgresql-"$major"_*.orig.tar.* | head -1)
	[ -f "$tarball" ] || { echo "no upstream tarball in $src" >&2; return 1; }
	fl_pg_log "$variant: building $(basename "$tarball") into $prefix (log $FENCELOCK_PG_CACHE/pg-$variant.log)"
	tar -C "$src" -xf "$tarball" || return 1
	# (an && chain: set -e does not act inside a function called from a condition)
	(
		cd "$src"/postgresql-"$major".*/ &&
			./configure --prefix="$prefix" --enable-tap-tests "${opts[@]}" &&
			nice make -j"$(nproc)" &&
			make install &&
			make -C src/test/regress install &&
			make -C src/test/isolation install &&
			make -C src/test/perl install &&
			make -C contrib/dblink install && # the wait_* isolation specs drive a waiter through it
			make -C contrib/amcheck install && # the fuzzer's audit of fencelock's tables and indexes
			if [ "$variant" != "$major" ]; then # scripts/debug-run.sh gives it to memcheck
				install -m 644 src/tools/valgrind.supp "$prefix/share/valgrind.supp"
			fi
	) >"$FENCELOCK_PG_CACHE/pg-$variant.log" 2>&1 || {
		echo "building PostgreSQL $variant failed; see $FENCELOCK_PG_CACHE/pg-$variant.log" >&2
		tail -20 "$FENCELOCK_PG_CACHE/pg-$variant.log" >&2
		return 1
	}
	rm -rf "$src"
}

# ---- Debian roots (17 and 18 from Debian's binary packages) ----

# What a root holds besides Debian's minimal base: the server and its PGXS tree, a compiler, and
# what the TAP tests use (IPC::Run, pgbouncer, libfaketime).  MAJOR empty: a bare root (bookworm: the package
# smoke test installs into copies of it).
fl_root_packages() {
	[ -n "$1" ] || return 0
	echo "postgresql-$1 postgresql-server-dev-$1 libpq-dev build-essential perl libipc-run-perl pgbouncer libfaketime"
}

fl_root_dir() { echo "$FENCELOCK_PG_CACHE/root-$1"; }

# fl_root_exec ROOT [HOSTDIR:ROOTDIR ...] -- CMD...: run CMD chrooted into ROOT (as root), in a
# mount and PID namespace of its own: a fresh /proc, the host's /dev (for /dev/shm, /dev/null and
# /dev/urandom), a fresh tmpfs on /tmp, and each HOSTDIR bind-mounted on ROOTDIR.  Every mount
# belongs to the namespace alone and vanishes when CMD ends, however it ends (kill -9 too), and so
# does every process left inside (a server CMD started and did not stop): nothing is left to
# unmount or kill afterwards, and nothing under ROOT stays mounted for a later `rm -rf`.
# FL_ROOT_PIDFILE names a file to write the namespace's pid to (kill it to end everything inside).
fl_root_exec() {
	local root=$1 binds=() pid status=0
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do binds+=("$1"); shift; done
	[ "${1:-}" = -- ] && shift
	unshare --mount --pid --fork --kill-child --propagation private -- bash -c '
		set -e
		root=$1 n=$2
		shift 2
		mount -t proc proc "$root/proc"
		mount --rbind /dev "$root/dev"
		mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
		while [ "$n" -gt 0 ]; do
			mkdir -p "$root${1#*:}"
			mount --bind "${1%%:*}" "$root${1#*:}"
			shift
			n=$((n - 1))
		done
		set +e
		chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			HOME=/root LANG=C.UTF-8 TERM=dumb "$@"
	' fl-root "$root" "${#binds[@]}" "${binds[@]}" "$@" <&0 &
	pid=$!
	[ -z "${FL_ROOT_PIDFILE:-}" ] || echo "$pid" >"$FL_ROOT_PIDFILE"
	wait "$pid" || status=$?
	[ -z "${FL_ROOT_PIDFILE:-}" ] || rm -f "$FL_ROOT_PIDFILE"
	return "$status"
}

# fl_root_verify SUITE MAJOR: the root is complete (its server and PGXS tree as fl_pg_verify asks).
fl_root_verify() {
	local root=$(fl_root_dir "$1") major=$2 f pgxs
	[ -x "$root/bin/bash" ] && [ -x "$root/usr/bin/apt-get" ] || return 1
	[ -n "$major" ] || return 0
	pgxs=$root/usr/lib/postgresql/$major/lib/pgxs
	for f in src/makefiles/pgxs.mk src/test/regress/pg_regress src/test/isolation/pg_isolation_regress \
		src/test/isolation/isolationtester src/test/perl/PostgreSQL/Test/Cluster.pm; do
		[ -e "$pgxs/$f" ] || { echo "missing $pgxs/$f" >&2; return 1; }
	done
	for f in initdb pg_ctl psql pg_dump pg_basebackup pg_config postgres; do
		[ -x "$root/usr/lib/postgresql/$major/bin/$f" ] || { echo "missing $f in $root" >&2; return 1; }
	done
	[ -e "$root/usr/share/postgresql/$major/extension/dblink.control" ] || { echo "missing dblink in $root" >&2; return 1; }
	[ -x "$root/usr/sbin/pgbouncer" ] && [ -e "$root/usr/share/perl5/IPC/Run.pm" ] || { echo "missing pgbouncer or IPC::Run in $root" >&2; return 1; }
	fl_root_exec "$root" -- /usr/lib/postgresql/"$major"/bin/postgres --version | grep -q "(PostgreSQL) $major\." ||
		{ echo "postgres in $root does not run or is not $major" >&2; return 1; }
}

# fl_root_build SUITE MAJOR: debootstrap SUITE into its root, then install MAJOR's packages there.
fl_root_build() {
	local suite=$1 major=$2 root log
	root=$(fl_root_dir "$suite")
	log=$FENCELOCK_PG_CACHE/root-$suite.log
	fl_pg_apt_install debootstrap || return 1
	fl_pg_log "$suite: debootstrap into $root (log $log)"
	# debootstrap mounts /proc and /sys inside the root while it works: in a mount namespace of
	# its own, so an interrupted run leaves nothing mounted under the root.
	unshare --mount --propagation private -- debootstrap --variant=minbase "$suite" "$root" \
		"$(fl_pg_mirror)" >"$log" 2>&1 || { tail -20 "$log" >&2; return 1; }
	# Nothing starts services in the root, the packages create no cluster of their own, and sid's
	# Release file may have passed its Valid-Until date (the archive snapshot this machine sees).
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod 755 "$root/usr/sbin/policy-rc.d"
	mkdir -p "$root/etc/postgresql-common"
	echo 'create_main_cluster = false' >"$root/etc/postgresql-common/createcluster.conf"
	cat >"$root/etc/apt/apt.conf.d/99fencelock" <<-'EOC'
		// Written by fencelock's scripts/pg.sh.
		Acquire::Check-Valid-Until "false";
		APT::Install-Recommends "false";
		APT::Install-Suggests "false";
	EOC
	[ -n "$major" ] || return 0
	fl_pg_log "$suite: installing $(fl_root_packages "$major") into $root"
	fl_root_exec "$root" -- bash -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq $(fl_root_packages "$major") && apt-get clean" >>"$log" 2>&1 ||
		{ tail -20 "$log" >&2; return 1; }
}

# fl_root SUITE [MAJOR]: provide the root of SUITE (with MAJOR's packages); sets FL_PG_ROOT.
fl_root() {
	local suite=$1 major=${2:-} root stamp
	root=$(fl_root_dir "$suite")
	stamp=$root.ok
	if [ ! -f "$stamp" ]; then
		mkdir -p "$FENCELOCK_PG_CACHE" || return 1
		(
			# One build at a time per root; a run that waited finds the stamp and uses that root.
			flock 9
			[ -f "$stamp" ] && exit 0
			if [ -e "$root" ]; then
				fl_pg_log "$suite: removing incomplete root $root"
				# Never through a mount point into the host's /dev or /proc.
				rm -rf --one-file-system "$root"
			fi
			t=$SECONDS
			fl_root_build "$suite" "$major" && fl_root_verify "$suite" "$major" &&
				echo "$suite ${major:+postgresql-$major }built in $((SECONDS - t)) s" >"$stamp"
			status=$?
			[ "$status" -eq 0 ] || rm -rf --one-file-system "$root"
			exit "$status"
		) 9>"$root.lock" || return
	fi
	FL_PG_ROOT=$root
}

# fl_pg_bindir MAJOR: where the bindir of MAJOR is (or will be, once fl_pg has provided it); for
# 17 and 18, inside their root.
fl_pg_bindir() {
	if [ "$1" = 15 ] || [ "$1" = 17 ] || [ "$1" = 18 ]; then
		echo "/usr/lib/postgresql/$1/bin"
	else
		echo "$FENCELOCK_PG_CACHE/pg-$1/bin"
	fi
}

# fl_pg MAJOR: make the PGXS tree of MAJOR available and set PG_BIN to its bindir.
fl_pg() {
	local major=$1 prefix stamp
	case " $FL_PG_MAJORS $FL_PG_VARIANTS " in
	*" $major "*) ;;
	*)
		echo "unsupported PostgreSQL major '$major' (supported: $FL_PG_MAJORS $FL_PG_VARIANTS)" >&2
		return 1
		;;
	esac
	FL_PG_ROOT=
	if [ "$major" = 15 ]; then
		fl_pg_apt_install "postgresql-$major" "postgresql-server-dev-$major" || return 1
		PG_BIN=$(fl_pg_bindir "$major")
		return 0
	fi
	if [ "$major" = 17 ] || [ "$major" = 18 ]; then
		fl_root "$(fl_pg_suite "$major")" "$major" || return 1
		PG_BIN=$(fl_pg_bindir "$major")
		return 0
	fi
	prefix=$FENCELOCK_PG_CACHE/pg-$major
	# (the stamp's name changes when the recipe does: -2 added amcheck, so older builds are redone)
	stamp=$prefix/.fencelock-build-ok-2
	if [ ! -f "$stamp" ]; then
		mkdir -p "$FENCELOCK_PG_CACHE" || return 1
		(
			# One build at a time per major; a run that waited finds the stamp and uses that build.
			flock 9
			[ -f "$stamp" ] && exit 0
			[ ! -e "$prefix" ] || fl_pg_log "$major: removing incomplete build $prefix"
			fl_pg_build "$major" "$prefix" &&
				fl_pg_verify "$major" "$prefix" &&
				"$prefix/bin/postgres" --version >"$stamp"
			status=$?
			[ "$status" -eq 0 ] || rm -rf "$prefix" "$FENCELOCK_PG_CACHE/src-$major"
			exit "$status"
		) 9>"$FENCELOCK_PG_CACHE/pg-$major.lock" || return
	fi
	PG_BIN=$(fl_pg_bindir "$major")
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	[ $# -eq 1 ] || { echo "usage: $0 MAJOR   (one of: $FL_PG_MAJORS $FL_PG_VARIANTS)" >&2; exit 2; }
	fl_pg "$1"
	echo "${FL_PG_ROOT:+$FL_PG_ROOT:}$PG_BIN"
fi
