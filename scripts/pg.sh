#!/usr/bin/env bash
# Provide a PGXS tree (server, pg_config, headers, pg_regress, isolation tester, TAP modules) for
# one PostgreSQL major.
#
#   bash scripts/pg.sh MAJOR       provide it (installing or building when missing), print its bindir
#   . scripts/pg.sh; fl_pg MAJOR   the same from a script: sets PG_BIN instead of printing it
#
# 15 is Debian 12's own packages (postgresql-15, postgresql-server-dev-15), installed when missing.
# 17 and 18 are built from the upstream tarball inside Debian's source packages (trixie serves 17,
# sid serves 18) into $FENCELOCK_PG_CACHE/pg-MAJOR (default /var/cache/fencelock/pg-MAJOR), once per
# machine.  18-debug is the same source built as PostgreSQL's developers test: assertions on
# (--enable-cassert: freed memory is clobbered, invariants checked), debug symbols, and
# -DUSE_VALGRIND (memcheck learns about palloc's chunks; `make valgrind` runs the server under it).  A build counts only when its stamp file exists; the stamp is written after the installed
# tree has been checked, so an interrupted or failed build is removed and redone, never used.  A
# lock (flock) makes concurrent runs wait for one build instead of building twice.
# Logs go to stderr (the build's full log to $FENCELOCK_PG_CACHE/pg-MAJOR.log).

FENCELOCK_PG_CACHE=${FENCELOCK_PG_CACHE:-/var/cache/fencelock}
FL_PG_MAJORS="15 17 18"
FL_PG_VARIANTS="18-debug" # builds that are not a major of their own (fl_pg accepts them too)

# Which Debian suite serves the source package of a major built from source.
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
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
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

# fl_pg_bindir MAJOR: where the bindir of MAJOR is (or will be, once fl_pg has provided it).
fl_pg_bindir() {
	if [ "$1" = 15 ]; then
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
	if [ "$major" = 15 ]; then
		fl_pg_apt_install "postgresql-$major" "postgresql-server-dev-$major" || return 1
		PG_BIN=$(fl_pg_bindir "$major")
		return 0
	fi
	prefix=$FENCELOCK_PG_CACHE/pg-$major
	stamp=$prefix/.fencelock-build-ok
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
	echo "$PG_BIN"
fi
