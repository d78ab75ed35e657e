# Shared by scripts/demo.sh, scripts/test.sh and the bench: dependencies, build, throwaway cluster.
# Source it; it defines functions and sets PG_BIN.

set -euo pipefail

PG_MAJOR=${PG_MAJOR:-15}
# PG_BIN may name another installation of the major (a private copy, a source build).
PG_BIN=${PG_BIN:-/usr/lib/postgresql/$PG_MAJOR/bin}
export PATH="$PG_BIN:$PATH"

# Install what a fresh Debian 12 machine lacks (as root); quiet when all is there.
fl_deps() {
	local want=(postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR libpq-dev gcc make
		libipc-run-perl pgbouncer "$@")
	local missing=()
	for p in "${want[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "== installing ${missing[*]}"
		[ "$(id -u)" -eq 0 ] || { echo "run as root to install ${missing[*]}" >&2; exit 1; }
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
}

# Build and install the extension (and its tools) with this major's pg_config.
fl_build() {
	echo "== building and installing fencelock"
	make -s PG_CONFIG="$PG_BIN/pg_config" >/dev/null
	make -s PG_CONFIG="$PG_BIN/pg_config" install >/dev/null
}

# Run a command as the cluster's OS user (initdb refuses root).
fl_as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- env PATH="$PATH" "$@"
	else
		"$@"
	fi
}

# fl_cluster_start DIR PORT [extra postgresql.conf lines...]: a throwaway cluster listening only on
# a socket in DIR.  Sets PGHOST, PGPORT, PGUSER, PGDATABASE for what follows.
fl_cluster_start() {
	local dir=$1 port=$2
	shift 2
	mkdir -p "$dir"
	[ "$(id -u)" -ne 0 ] || chown postgres: "$dir"
	fl_as_pg initdb -D "$dir/data" -A trust -U postgres --no-sync >/dev/null
	{
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$dir'"
		echo "port = $port"
		echo "shared_preload_libraries = 'fencelock'"
		echo "max_prepared_transactions = 10"
		for line in "$@"; do echo "$line"; done
	} | fl_as_pg tee -a "$dir/data/postgresql.conf" >/dev/null
	fl_as_pg pg_ctl -D "$dir/data" -l "$dir/server.log" -w start >/dev/null
	export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=postgres
}

fl_cluster_stop() {
	local dir=$1
	[ -f "$dir/data/postmaster.pid" ] && fl_as_pg pg_ctl -D "$dir/data" -m fast -w stop >/dev/null || true
}
