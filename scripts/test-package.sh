#!/usr/bin/env bash
# The Debian packages in a fresh Debian 12 root: builds them (make deb), installs them with apt
# into a copy of a cached pristine bookworm root (debootstrap --variant=minbase, scripts/pg.sh's
# fl_root, with the packages they depend on downloaded but not installed), and checks there that
#   - apt resolves their dependencies (postgresql-15, libpq5) from bookworm's own packages;
#   - a cluster with shared_preload_libraries = 'fencelock' starts, CREATE EXTENSION works, a
#     lease is granted, fencelock.stats answers (the preloaded library);
#   - fencelock-run is in /usr/bin, found by a login shell, and its man page is installed;
#   - purging both packages leaves none of their files.
# Prints "ok N - ..." / "not ok N - ..." per check, then "package: N passed, M failed".  As root.
#   bash scripts/test-package.sh [DEBDIR]   (DEBDIR: packages already built; default: make deb)
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/pg.sh
[ "$(id -u)" -eq 0 ] || { echo "run as root (debootstrap, chroot)" >&2; exit 1; }

work=$(mktemp -d /tmp/fencelock-package.XXXXXX)
chmod 755 "$work" # the build-time installcheck's server (user postgres) reads the package there
cleanup() { [ -n "${KEEP:-}" ] || rm -rf --one-file-system "$work"; }
trap cleanup EXIT
n=0 passed=0 failed=0
result() { # result DESCRIPTION STATUS [LOG]
	n=$((n + 1))
	if [ "$2" -eq 0 ]; then
		passed=$((passed + 1))
		echo "ok $n - $1"
	else
		failed=$((failed + 1))
		echo "not ok $n - $1"
		[ -z "${3:-}" ] || sed 's/^/#   /' "$3" | tail -30
	fi
}
finish() {
	echo "package: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
}

# The packages.
debs=${1:-}
if [ -z "$debs" ]; then
	t=$SECONDS
	debs=$work/debs
	s=0
	# dpkg-buildpackage's build dependencies (debian/control), which a fresh machine lacks.
	fl_pg_apt_install debhelper postgresql-server-dev-all >"$work/deps.log" 2>&1 ||
		{ result "the build dependencies installed (debhelper, postgresql-server-dev-all)" 1 "$work/deps.log"; finish; }
	make -s deb DEB_OUTDIR="$debs" DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-}" >"$work/deb.log" 2>&1 || s=$?
	result "make deb ($((SECONDS - t)) s: $(cd "$debs" 2>/dev/null && ls -- *.deb | grep -v dbgsym | tr '\n' ' '))" "$s" "$work/deb.log"
	[ "$s" -eq 0 ] || finish
fi

# The pristine root, and in it the packages ours depend on (downloaded once, then offline).
t=$SECONDS
s=0
{
	fl_root bookworm && root=$FL_PG_ROOT && (
		flock 9
		[ -f "$root.deps-ok" ] && exit 0
		# Debian 12 as installed: bookworm, bookworm-updates and bookworm-security, from the
		# mirrors this machine uses (debootstrap wrote bookworm alone).
		for f in /etc/apt/sources.list.d/*.sources; do
			grep -q '^Types: deb$' "$f" && grep -q '^Suites:.*bookworm' "$f" && cp "$f" "$root/etc/apt/sources.list.d/"
		done
		grep -E '^deb [^ ]+ bookworm(-updates|-security)? ' /etc/apt/sources.list >"$root/etc/apt/sources.list" 2>/dev/null ||
			: >"$root/etc/apt/sources.list"
		fl_root_exec "$root" -- bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --download-only postgresql-15 libpq5' &&
			touch "$root.deps-ok"
	) 9>"$root.deps.lock"
} >"$work/root.log" 2>&1 || s=$?
result "pristine bookworm root $FENCELOCK_PG_CACHE/root-bookworm ($((SECONDS - t)) s)" "$s" "$work/root.log"
[ "$s" -eq 0 ] || finish

# A fresh copy of it per run.
t=$SECONDS
s=0
cp -a --one-file-system "$root" "$work/root" >"$work/copy.log" 2>&1 || s=$?
result "a fresh copy of the root ($((SECONDS - t)) s, $(du -sm "$work/root" | cut -f1) MB)" "$s" "$work/copy.log"
[ "$s" -eq 0 ] || finish
mkdir -p "$work/root/debs"
cp "$debs"/postgresql-15-fencelock_*.deb "$debs"/fencelock-run_*.deb "$work/root/debs/"

inroot() { fl_root_exec "$work/root" -- bash -c "$1"; }

t=$SECONDS
s=0
inroot 'DEBIAN_FRONTEND=noninteractive apt-get install -y -q /debs/*.deb' >"$work/install.log" 2>&1 || s=$?
result "apt-get install of the packages, their dependencies from bookworm ($((SECONDS - t)) s)" "$s" "$work/install.log"
[ "$s" -eq 0 ] || finish

cat >"$work/root/server.sh" <<'EOS'
set -e
cd /tmp
export PATH=/usr/lib/postgresql/15/bin:$PATH
pg() { runuser -u postgres -- env PATH="$PATH" "$@"; }
pg initdb -D /tmp/pg -A trust -U postgres --no-sync >/dev/null
cat >>/tmp/pg/postgresql.conf <<'EOC'
shared_preload_libraries = 'fencelock'
listen_addresses = ''
unix_socket_directories = '/tmp'
EOC
pg pg_ctl -D /tmp/pg -l /tmp/pg.log -w start >/dev/null
q() { pg psql -X -At -h /tmp -U postgres -v ON_ERROR_STOP=1 -c "$1"; }
q "CREATE EXTENSION fencelock"
got=$(q "SELECT fencelock.acquire('smoke', 'a')"); echo "acquire: $got"; [ "$got" = 1 ]
got=$(q "SELECT grants FROM fencelock.stats"); echo "stats.grants: $got"; [ "$got" = 1 ]
q "SELECT extversion FROM pg_extension WHERE extname = 'fencelock'"
pg pg_ctl -D /tmp/pg -m fast -w stop >/dev/null
EOS
s=0
inroot 'bash /server.sh' >"$work/server.log" 2>&1 || s=$?
result "preloaded cluster: CREATE EXTENSION, acquire, stats" "$s" "$work/server.log"

s=0
inroot '
	set -e
	found=$(runuser -u postgres -- bash -lc "command -v fencelock-run")
	echo "a login shell finds: $found"; [ "$found" = /usr/bin/fencelock-run ]
	runuser -u postgres -- bash -lc "fencelock-run --version"
	[ -s /usr/share/man/man1/fencelock-run.1.gz ]
	[ ! -e /usr/lib/postgresql/15/bin/fencelock-run ]
' >"$work/tool.log" 2>&1 || s=$?
result "fencelock-run in /usr/bin, on a login PATH, with its man page" "$s" "$work/tool.log"

s=0
inroot '
	set -e
	files=$(dpkg -L postgresql-15-fencelock fencelock-run | sort -u)
	DEBIAN_FRONTEND=noninteractive apt-get purge -y -q postgresql-15-fencelock fencelock-run
	left=0
	for f in $files; do [ -d "$f" ] || [ ! -e "$f" ] || { echo "left: $f"; left=1; }; done
	[ "$left" -eq 0 ]
' >"$work/purge.log" 2>&1 || s=$?
result "apt-get purge removes every file of both packages" "$s" "$work/purge.log"
finish
