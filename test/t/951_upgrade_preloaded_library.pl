# The update from 0.3.0 under a running server that preloads fencelock (issue 35).  A server
# started with shared_preload_libraries = 'fencelock' keeps the library it started with: every
# backend inherits the postmaster's mapping, and PostgreSQL looks a library up by its path among
# those already loaded before reading the file.  After `make install` of the new library, the
# update's first function in C that the old library lacks failed with 42883 "could not find
# function ... in file ...fencelock.so", naming a file that, on disk, has it.  The update now
# stops there with 55000 saying the loaded library is older than the update, with a hint to
# restart; README's Upgrading and debian/NEWS say to restart first.  After the restart the update
# goes through and the lease taken before it is still there.
#
# The old library: a library with the path, name and magic block of fencelock's and none of its
# functions (compiled here from three lines of C), standing in for 0.3.0's, which lacks 0.4.0's
# functions in the same way; FENCELOCK_OLD_LIBRARY may name a real older fencelock.so to use
# instead (its major's).  The server runs from a private copy of the installation
# (hard links where possible), so the library can be swapped under it without touching the
# installation other tests use.
use strict;
use warnings FATAL => 'all';

use File::Basename qw(dirname);
use File::Copy qw(copy);
use File::Path qw(make_path);
use FencelockTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $tmp = PostgreSQL::Test::Utils::tempdir;
my %cfg = map { my $v = `pg_config --$_`; chomp $v; ($_ => $v) }
  qw(bindir pkglibdir sharedir includedir-server cflags_sl);

# A private copy of the installation: the directory above bindir (bin and lib, and for a source
# build share too), and sharedir where it lies elsewhere (Debian).  PostgreSQL finds its library
# and share directories relative to its own binary, so the copy keeps the layout.
my $prefix = dirname($cfg{bindir});
my $root = "$tmp/inst";
foreach my $dir ($prefix, ($cfg{sharedir} =~ m{^\Q$prefix\E/} ? () : $cfg{sharedir}))
{
	make_path(dirname("$root$dir"));
	next if system('cp', '-al', $dir, "$root$dir") == 0;
	# (hard links refused: another file system, or files of another user)
	system('rm', '-rf', "$root$dir");
	system('cp', '-a', $dir, "$root$dir") == 0 or BAIL_OUT("cannot copy $dir");
}
my $libdir = "$root$cfg{pkglibdir}";
my $new_library = "$tmp/fencelock-new.so";
copy("$libdir/fencelock.so", $new_library) or BAIL_OUT("cannot copy the library: $!");

# Replace the library file as make install does: a new file under the old name (the running
# server keeps the old one mapped).
sub install_library
{
	my ($from) = @_;
	unlink("$libdir/fencelock.so");
	copy($from, "$libdir/fencelock.so") or BAIL_OUT("cannot install $from: $!");
	chmod(0755, "$libdir/fencelock.so");
}

my $old_library = $ENV{FENCELOCK_OLD_LIBRARY};
if (!$old_library)
{
	$old_library = "$tmp/fencelock-old.so";
	open(my $c, '>', "$tmp/old.c") or die $!;
	print $c "#include \"postgres.h\"\n#include \"fmgr.h\"\nPG_MODULE_MAGIC;\n";
	close($c);
	system("cc $cfg{cflags_sl} -shared -I'$cfg{'includedir-server'}' -o '$old_library' '$tmp/old.c'")
	  == 0
	  or BAIL_OUT('cannot compile the old library');
}

my $node = PostgreSQL::Test::Cluster->new('preloaded', install_path => "$root$prefix");
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencelock'\n");
$node->start;
$node->safe_psql('postgres', q{CREATE EXTENSION fencelock VERSION '0.3.0'});
my $fence = $node->safe_psql('postgres', q{SELECT fencelock.acquire('up:r', 'o', '1 hour')});
ok($fence > 0, 'a lease taken at 0.3.0');
my $digest = fl_lease_digest($node);

# The server runs the old library; then the new one is installed.
install_library($old_library);
$node->restart;
install_library($new_library);

my ($state, $message) = fl_error($node, 'postgres', 'ALTER EXTENSION fencelock UPDATE');
is($state, '55000', 'the update under the old library is refused with 55000');
is($message, 'the fencelock library loaded in this session is older than 0.4.0',
	'the error says the loaded library is older');
my ($out, $err) = ('', '');
$node->psql('postgres', "\\set VERBOSITY verbose\nALTER EXTENSION fencelock UPDATE",
	stdout => \$out, stderr => \$err);
like($err, qr/HINT:  .*restart the server/, 'the hint says to restart the server');
like($err, qr/DETAIL:  .*could not find function "fencelock_inheritance_guard"/,
	'the detail names the missing function');
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'fencelock'}),
	'0.3.0', 'the extension is still at 0.3.0');

# README's procedure: restart, then update.
$node->restart;
$node->safe_psql('postgres', 'ALTER EXTENSION fencelock UPDATE');
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'fencelock'}),
	'0.4.0', 'after a restart the update goes through');
is(fl_lease_digest($node), $digest, 'the lease table is unchanged by the update');
is($node->safe_psql('postgres', qq{
	SELECT fencelock.current_fence('up:r'), fencelock.renew('up:r', 'o', '1 hour', $fence),
	       fencelock.release('up:r', 'o', $fence)}),
	"$fence|t|t", 'the lease taken at 0.3.0 is renewed and released with 0.4.0');

$node->stop;
done_testing();
