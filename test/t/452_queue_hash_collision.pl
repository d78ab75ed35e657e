# Issue 20, defect 9 (wait queue hash collision): the wait queue knew a resource only by a 64-bit
# hash of its name, hash_bytes_extended seeded with the database OID.  That hash is not built to
# resist an adversary: two names of the same length that differ in their first 24 bytes collide
# when the second 12-byte block makes up for the difference the first one left in the hash's
# internal state, and finding printable bytes that do takes a few thousand tries.  An ordinary
# role computed such a name, held it and queued a waiter under it; from then on every waiting
# acquire of the real resource, free or released, saw "someone queued ahead" and timed out.
# The queue now compares the database and the whole name; the hash only skips other slots fast.
#
# The collision is computed here (FencelockTest's fl_colliding_name), against this database's OID;
# the server confirms it (hashtextextended is the same hash with the same seed).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use FencelockTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = fl_node('collide');
$node->safe_psql('postgres', q{
	CREATE ROLE mallory LOGIN;
	CREATE ROLE app LOGIN;
});

my $victim = 'tenant-7:orders:nightly-export';
my $dboid = $node->safe_psql('postgres',
	"SELECT oid FROM pg_database WHERE datname = current_database()");
my $t0 = time;
my $forged = fl_colliding_name($victim, $dboid);
note(sprintf('colliding name found in %.3f s', time - $t0));
# The forged name as an SQL expression (it holds control characters).
my $forged_sql = "convert_from('\\x" . unpack('H*', $forged) . "'::bytea, 'UTF8')";

is( $node->safe_psql('postgres', qq{
		SELECT hashtextextended('$victim', $dboid) = hashtextextended($forged_sql, $dboid),
		       $forged_sql <> '$victim'}),
	't|t', 'a different name with the same 64-bit hash of the database, computed in Perl');

# A client in the background running one statement.
sub start_client
{
	my ($user, $sql) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-q', '-A', '-t', '-U', $user, '-d', $node->connstr('postgres'),
		  '-c', $sql ],
		'>', \$out, '2>', \$err);
	return { h => $h, out => \$out, err => \$err };
}

# mallory holds the forged name and queues a waiter under it.
$node->safe_psql('postgres', "SELECT fencelock.acquire($forged_sql, 'm-holder', '1 hour')",
	extra_params => [ '-U', 'mallory' ]);
my $squatter = start_client('mallory',
	"SELECT fencelock.acquire($forged_sql, 'm-waiter', '1 hour', wait => '2 minutes') IS NOT NULL");
$node->poll_query_until('postgres', "SELECT fencelock.waiters($forged_sql) = 1")
  or die 'the squatting waiter never queued';

is($node->safe_psql('postgres', "SELECT fencelock.waiters('$victim')"),
	'0', 'waiters() of the real resource does not count the waiter of the colliding name');

# The real resource is free: a waiting acquire gets it at once.
my $start = time;
my $fence = $node->safe_psql('postgres',
	"SELECT fencelock.acquire('$victim', 'app-1', '1 minute', wait => '5 seconds')",
	extra_params => [ '-U', 'app' ]);
my $took = time - $start;
is($fence, '1', 'a waiting acquire of the free resource is granted');
cmp_ok($took, '<', 4, sprintf('at once (%.2f s), not at the end of its wait', $took));

# The real resource is held, and a waiter of its own queues behind the squatter's ticket: the
# holder's release wakes that waiter, which gets the lease.
my $waiter = start_client('app',
	"SELECT fencelock.acquire('$victim', 'app-2', '1 minute', wait => '20 seconds')");
$node->poll_query_until('postgres', "SELECT fencelock.waiters('$victim') = 1")
  or die 'the waiter of the real resource never queued';
is($node->safe_psql('postgres', "SELECT fencelock.waiters($forged_sql)"),
	'1', 'the queues of the two names are counted apart');
$start = time;
$node->safe_psql('postgres', "SELECT fencelock.release('$victim', 'app-1')",
	extra_params => [ '-U', 'app' ]);
$waiter->{h}->finish;
$took = time - $start;
is(${ $waiter->{out} }, "2\n", 'the released resource goes to its own waiter, behind the squatter');
is(${ $waiter->{err} }, '', 'the waiter finished without error');
cmp_ok($took, '<', 15, sprintf('the waiter was granted after the release (%.2f s)', $took));

# The squatter is still queued, and its own queue still works: its holder's release wakes it.
is($node->safe_psql('postgres', "SELECT fencelock.waiters($forged_sql)"),
	'1', 'the squatter is still waiting for its own name');
$node->safe_psql('postgres', "SELECT fencelock.release($forged_sql, 'm-holder')",
	extra_params => [ '-U', 'mallory' ]);
$squatter->{h}->finish;
is(${ $squatter->{out} }, "t\n", 'the colliding name is a resource of its own, granted to its waiter');
is($node->safe_psql('postgres', "SELECT count(*) FROM fencelock.lease"), '2',
	'two lease rows: the real resource and the colliding name');

fl_no_crash($node, 'collide');
done_testing();
