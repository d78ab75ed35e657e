# Shared by scripts/demo.sh, scripts/test.sh and the bench: dependencies, build, throwaway cluster.
# Source it; it defines functions and sets PG_BIN.

set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/pg.sh"

# PG_MAJOR: the major to use (scripts/pg.sh provides it: Debian's 15, a cached source build of 17
# or 18).  PG_BIN may instead name an installation to use as it is (a private copy); its major is
# then whatever its pg_config says.
PG_MAJOR=${PG_MAJOR:-15}
FL_PG_BIN_GIVEN=${PG_BIN:+1}
PG_BIN=${PG_BIN:-$(fl_pg_bindir "$PG_MAJOR")}
export PATH="$PG_BIN:$PATH"

# Install what a fresh Debian 12 machine lacks (as root) and provide PG_MAJOR (unless PG_BIN was
# given); quiet when all is there.
fl_deps() {
	fl_deps_common "$@"
	[ -n "$FL_PG_BIN_GIVEN" ] || fl_pg "$PG_MAJOR"
}

# fl_deps_common [PKG...]: what every major's run needs besides the server.
fl_deps_common() {
	fl_pg_apt_install libpq-dev gcc make libipc-run-perl pgbouncer libfaketime "$@" || exit 1
}

# Build and install the extension (and its tools) with this major's pg_config.  FL_COPT adds
# compiler options (scripts/test.sh: -Werror).
fl_build() {
	echo "== building and installing fencelock"
	# Objects built for another installation (another major) must not be linked in.
	if [ "$(cat .fl-built-for 2>/dev/null)" != "$PG_BIN" ]; then
		make -s PG_CONFIG="$PG_BIN/pg_config" clean >/dev/null
		echo "$PG_BIN" >.fl-built-for
	fi
	make -s PG_CONFIG="$PG_BIN/pg_config" ${FL_COPT:+COPT="$FL_COPT"} >/dev/null
	# fencelock-run is linked into /usr/local for login shells (mk/fencelock-run.mk) only from a
	# Debian-packaged server: a private build's links would outlive it.
	case $PG_BIN in
	/usr/lib/postgresql/*) make -s PG_CONFIG="$PG_BIN/pg_config" install >/dev/null ;;
	*) make -s PG_CONFIG="$PG_BIN/pg_config" FENCELOCK_RUN_LINKDIR= install >/dev/null ;;
	esac
}

# Run a command as the cluster's OS user (initdb refuses root).
fl_as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- env PATH="$PATH" "$@"
	else
		"$@"
	fi
}

# fl_cluster_init DIR PORT [extra postgresql.conf lines...]: a throwaway cluster's data directory
# in DIR, listening only on a socket in DIR (not started), with test/fencelock.conf's settings
# (the library preloaded: make installcheck's temporary instance has the same).  Sets PGHOST,
# PGPORT, PGUSER, PGDATABASE for what follows.
FL_TEST_CONF=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/test/fencelock.conf
fl_cluster_init() {
	local dir=$1 port=$2
	shift 2
	mkdir -p "$dir"
	[ "$(id -u)" -ne 0 ] || chown postgres: "$dir"
	fl_as_pg initdb -D "$dir/data" -A trust -U postgres --no-sync >/dev/null
	{
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$dir'"
		echo "port = $port"
		cat "$FL_TEST_CONF"
		for line in "$@"; do echo "$line"; done
	} | fl_as_pg tee -a "$dir/data/postgresql.conf" >/dev/null
	export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=postgres
}

# fl_cluster_start DIR PORT [extra postgresql.conf lines...]: fl_cluster_init, then started.
fl_cluster_start() {
	fl_cluster_init "$@"
	fl_as_pg pg_ctl -D "$1/data" -l "$1/server.log" -w start >/dev/null
}

fl_cluster_stop() {
	local dir=$1
	[ -f "$dir/data/postmaster.pid" ] && fl_as_pg pg_ctl -D "$dir/data" -m fast -w stop >/dev/null || true
}
