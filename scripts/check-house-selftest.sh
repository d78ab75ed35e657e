#!/bin/bash
# check-house-selftest.sh TREE [SRCDIR]: each rule of scripts/check-house.pl seen failing.
#
# Copies a built tree's src/ (TREE's objects, SRCDIR's sources; SRCDIR is TREE unless a VPATH
# build names its source tree) and plants one violation per copy: an upward call, a sibling call
# (lease -> claim), a call into the assembly, an upward use of read-only data, an upward include,
# a sibling include, a project header named without its folder, shmem.h outside the assembly, a
# shared writable global, a fencelock_ global that src/settings.h does not declare, a call cycle,
# an unused export, a file over 1000 lines, a second owner of the shared-memory hooks, a folder
# the order does not know.  check-house must exit 1 and report the planted finding and nothing
# else beyond what it reports on the unplanted copy.  Last, a small tree that keeps every rule
# (settings used from a folder, read-only data used downwards, siblings called from the
# assembly) must be clean and exit 0.  A planted .c is compiled with the server's compiler and
# CFLAGS (PG_CONFIG, else pg_config on PATH) and read with nm like the built objects.
# Prints "ok N - name" / "not ok N - name" and a count; exits 1 if a case failed.
set -euo pipefail

scripts=$(cd "$(dirname "$0")" && pwd)
tree=$(cd "${1:-.}" && pwd)
srcdir=$(cd "${2:-$tree}" && pwd)
pg_config=${PG_CONFIG:-pg_config}
cc=$("$pg_config" --cc)
read -ra cflags <<<"$("$pg_config" --cflags) $("$pg_config" --cflags_sl)"
work=$(mktemp -d "${TMPDIR:-/tmp}/check-house-selftest.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The unplanted copy, and what check-house reports on it.
base=$work/base
mkdir -p "$base/src"
(cd "$tree/src" && find . -name '*.o' -exec cp --parents -t "$base/src" {} +)
(cd "$srcdir/src" && find . -name '*.[ch]' -exec cp --parents -t "$base/src" {} +)
[ -n "$(find "$base/src" -name '*.o' -print -quit)" ] || { echo "check-house-selftest: no objects in $tree/src (build first)" >&2; exit 2; }
findings() { grep -v '^check-house: [0-9]* files, ' "$1" | sort || true; }
perl "$scripts/check-house.pl" "$base" >"$work/base.out" 2>&1 || true
findings "$work/base.out" >"$work/base.findings"

# A function some object of FOLDER defines (not an SQL entry point), and that object's source.
text_sym() {
	local o r
	for o in "$base/src/$1"/*.o; do
		r=$(nm -P --defined-only "$o" | awk -v f="${o#"$base"/src/}" \
			'$2 == "T" && $1 !~ /^(pg_finfo_|fencelock_|_PG_init$|Pg_magic_func$)/ { sub(/\.o$/, ".c", f); print $1, f; exit }')
		[ -z "$r" ] || { echo "$r"; return; }
	done
}
# Read-only data (nm's R, or D in .data.rel.ro) some object of FOLDER defines, and its source.
ro_sym() {
	local o r
	for o in "$base/src/$1"/*.o; do
		r=$(nm -f sysv "$o" | awk -F'|' -v f="${o#"$base"/src/}" '{ for (i = 1; i <= NF; i++) gsub(/ /, "", $i) }
			$3 == "R" || ($3 == "D" && $7 ~ /^\.data\.rel\.ro/) { sub(/\.o$/, ".c", f); print $1, f; exit }')
		[ -z "$r" ] || { echo "$r"; return; }
	done
}
read -r store_fn store_c <<<"$(text_sym store)"
read -r claim_fn claim_c <<<"$(text_sym claim)"
for ro_dir in claim lease fence store wait observe; do
	read -r ro_name ro_c <<<"$(ro_sym "$ro_dir")"
	[ -z "$ro_name" ] || break
done
top_fn=$(for o in "$base"/src/*.o; do nm -P --defined-only "$o" | awk '$2 == "T" && $1 ~ /^fl_/ { print $1; exit }'; done | head -1)
top_c=$(for o in "$base"/src/*.o; do nm -P --defined-only "$o" | grep -q "^$top_fn T" && basename "${o%.o}.c"; done)
first() { echo "$1"; }
store_h=$(cd "$base/src" && first store/*.h)
lease_h=$(cd "$base/src" && first lease/*.h)
for v in store_fn claim_fn ro_name top_fn store_h lease_h; do
	[ -n "${!v}" ] || { echo "check-house-selftest: found no $v in the built tree" >&2; exit 2; }
done

n=0
failed=0
dir=
# case NAME: a fresh copy of the unplanted tree to plant in.
case_() {
	dir=$work/$1
	cp -a "$base" "$dir"
}
# put FILE: FILE (a path under src/) gets stdin; a .c is compiled into its object.
put() {
	mkdir -p "$(dirname "$dir/src/$1")"
	cat >"$dir/src/$1"
	case $1 in *.c)
		"$cc" "${cflags[@]}" -I "$dir/src" -c "$dir/src/$1" -o "$dir/src/${1%.c}.o" ;;
	esac
}
# expect NAME STATUS REGEX...: check-house on the planted copy exits STATUS, and its findings beyond
# the unplanted copy's are exactly one matching each REGEX.
expect() {
	local name=$1 want=$2 status=0 new re bad='' count
	shift 2
	n=$((n + 1))
	perl "$scripts/check-house.pl" "$dir" >"$dir.out" 2>&1 || status=$?
	new=$(findings "$dir.out" | comm -13 "$work/base.findings" -)
	[ "$status" -eq "$want" ] || bad="exit $status, not $want"
	for re in "$@"; do
		[ "$(grep -cE -- "$re" <<<"$new" || true)" -eq 1 ] || bad="${bad:+$bad; }no single finding like: $re"
	done
	count=$(grep -c . <<<"$new" || true)
	[ "$count" -eq $# ] || bad="${bad:+$bad; }$count new findings, not $#"
	if [ -z "$bad" ]; then
		echo "ok $n - $name"
		sed -n 's/^/#   /p' <<<"$new"
	else
		failed=$((failed + 1))
		echo "not ok $n - $name: $bad"
		sed 's/^/#   /' "$dir.out"
	fi
}

case_ up_call
put base/planted.c <<EOF
extern void $store_fn(void);
__attribute__((used)) static void planted(void) { $store_fn(); }
EOF
expect "a base file calls a store function" 1 "^check-house: base/planted\.c calls $store_fn of ${store_c//./\\.}: base is below store$"

case_ sibling_call
put lease/planted.c <<EOF
extern void $claim_fn(void);
__attribute__((used)) static void planted(void) { $claim_fn(); }
EOF
expect "a lease file calls a claim function" 1 "^check-house: lease/planted\.c calls $claim_fn of ${claim_c//./\\.}: lease and claim are siblings$"

case_ into_assembly
put store/planted.c <<EOF
extern void $top_fn(void);
__attribute__((used)) static void planted(void) { $top_fn(); }
EOF
expect "a store file calls into the assembly" 1 "^check-house: store/planted\.c calls $top_fn of ${top_c//./\\.}: nothing calls into the assembly"

case_ up_rodata
put base/planted.c <<EOF
extern const char ${ro_name}[];
__attribute__((used)) static const char *planted(void) { return $ro_name; }
EOF
expect "a base file uses read-only data of $ro_dir" 1 "^check-house: base/planted\.c uses $ro_name of ${ro_c//./\\.}: base is below $ro_dir$"

case_ up_include
put base/planted.h <<EOF
#include "postgres.h"
#include "$store_h"
EOF
expect "a base header includes a store header" 1 "^check-house: base/planted\.h:2 includes ${store_h//./\\.}: base is below store$"

case_ sibling_include
put claim/planted.h <<EOF
#include "$lease_h"
EOF
expect "a claim header includes a lease header" 1 "^check-house: claim/planted\.h:1 includes ${lease_h//./\\.}: claim and lease are siblings$"

case_ plain_include
put store/planted.h <<EOF
#include "$(basename "$store_h")"
EOF
expect "a store header names a store header without its folder" 1 "^check-house: store/planted\.h:1: #include \"$(basename "${store_h//./\\.}")\": name the folder \(\"${store_h//./\\.}\"\)$"

case_ shmem_h
put observe/planted.h <<EOF
#include "fencelock.h"
#include "shmem.h"
EOF
expect "an observe header includes shmem.h" 1 "^check-house: observe/planted\.h:2: #include \"shmem\.h\": shmem\.h is the assembly's own"

case_ shared_global
put wait/planted_def.c <<EOF
int fl_planted_set = 1;   /* .data */
int fl_planted_zero;      /* .bss */
EOF
put observe/planted_use.c <<EOF
extern int fl_planted_set, fl_planted_zero;
__attribute__((used)) static int planted(void) { return fl_planted_set + fl_planted_zero; }
EOF
expect "an observe file uses a wait file's writable globals" 1 \
	"^check-house: observe/planted_use\.c uses fl_planted_set, a writable global of wait/planted_def\.c " \
	"^check-house: observe/planted_use\.c uses fl_planted_zero, a writable global of wait/planted_def\.c "

case_ not_a_setting
put base/planted_def.c <<EOF
int fencelock_planted = 1;
EOF
put store/planted_use.c <<EOF
extern int fencelock_planted;
__attribute__((used)) static int planted(void) { return fencelock_planted; }
EOF
expect "a fencelock_ global that settings.h does not declare" 1 \
	"^check-house: store/planted_use\.c uses fencelock_planted, a writable global of base/planted_def\.c "

case_ cycle
put base/planted_a.c <<EOF
extern void fl_planted_a(void), fl_planted_b(void);
void fl_planted_a(void) { fl_planted_b(); }
EOF
put base/planted_b.c <<EOF
extern void fl_planted_a(void), fl_planted_b(void);
void fl_planted_b(void) { fl_planted_a(); }
EOF
expect "two base files call each other" 1 \
	"^check-house: call cycle: base/planted_a\.c \[fl_planted_b\] -> base/planted_b\.c \[fl_planted_a\] -> base/planted_a\.c$"

case_ unused_export
put base/planted.c <<EOF
extern void fl_planted(void);
void fl_planted(void) {}
EOF
expect "an export nobody calls" 1 "^check-house: base/planted\.c exports fl_planted, which no other file calls"

case_ size
for i in $(seq 1001); do echo "/* $i */"; done | put store/planted.h
expect "a file over 1000 lines" 1 "^check-house: store/planted\.h has 1001 lines \(over 1000\)$"

case_ hooks
# (a source only: check-house reads the assignment from the text)
echo 'static void planted(void) { shmem_startup_hook = 0; }' >"$dir/src/fence/planted.c"
expect "a second file sets the shared-memory hooks" 1 "^check-house: the shared-memory hooks are set in 2 files: "

case_ unknown_folder
put extra/planted.h <<EOF
/* a folder the order does not know */
EOF
expect "a folder not in the order" 1 "^check-house: src/extra/ is not in check-house's order"

# A small tree that keeps every rule.
dir=$work/clean
mkdir -p "$dir/src"
put settings.h <<EOF
extern int fencelock_planted_setting;
EOF
put fencelock.h <<EOF
/* shared */
EOF
put base/d.h <<EOF
extern const char *const fl_d_names[];
extern int fl_d(void);
EOF
put base/d.c <<EOF
#include "base/d.h"
const char *const fl_d_names[] = {"a", "b"}; /* read-only once loaded (.data.rel.ro) */
int fl_d(void) { return 1; }
EOF
put store/b.h <<EOF
#include "fencelock.h"
#include "base/d.h"
extern int fl_b(void);
EOF
put store/b.c <<EOF
#include "settings.h"
#include "store/b.h"
int fl_b(void) { return fencelock_planted_setting + fl_d() + (fl_d_names[0][0] == 'a'); }
EOF
put lease/a.c <<EOF
#include "store/b.h"
extern int fl_a(void);
int fl_a(void) { return fl_b(); }
EOF
put claim/c.c <<EOF
#include "base/d.h"
extern int fl_c(void);
int fl_c(void) { return fl_d(); }
EOF
put fencelock.c <<EOF
#include "settings.h"
extern int fl_a(void), fl_c(void);
extern void _PG_init(void);
int fencelock_planted_setting = 1;
void _PG_init(void) { fencelock_planted_setting = fl_a() + fl_c(); }
EOF
n=$((n + 1))
if perl "$scripts/check-house.pl" "$dir" >"$dir.out" 2>&1 && grep -q '^check-house: 5 files, 5 calls between them, clean$' "$dir.out"; then
	echo "ok $n - a tree that keeps every rule is clean"
else
	failed=$((failed + 1))
	echo "not ok $n - a tree that keeps every rule is clean"
	sed 's/^/#   /' "$dir.out"
fi

echo "# the built tree itself: $(tail -1 "$work/base.out" | sed 's/^check-house: //')"
echo "check-house-selftest: $((n - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
