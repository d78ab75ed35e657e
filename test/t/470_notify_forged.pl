# Issue 20, defect 15 (forged notifications): PostgreSQL has no privileges on channels, so any
# role can NOTIFY fencelock with a payload of its choosing, and a listener receives it exactly
# like fencelock's own.  README now says a notification is a hint and shows the confirming read;
# this test pins both halves: the forged event arrives, and the read README prescribes refutes
# it, while a real event passes the same read.  (Nothing in fencelock acts on a notification:
# the clients in examples/ and bin/ do not LISTEN.)
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use FencelockTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('notify', conf => "fencelock.notify = on\n");
$node->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	CREATE ROLE mallory LOGIN;
});

my $listener = fl_client($node->connstr('postgres'));
$listener->query('LISTEN fencelock');

# The events a listener received since the last call, as payloads.
sub received
{
	my ($out, $err) = $listener->query('SELECT 1');
	return [ ($out . $err) =~ /Asynchronous notification "fencelock" with payload "(.*?)" received/g ];
}

# README's confirming read: is the lease in the state the event claims?
sub confirmed
{
	my ($event, $fence) = @_;
	my ($state, $current) = split /\|/, $node->safe_psql('postgres',
		"SELECT state, fence FROM fencelock.leases WHERE resource = 'leader'");
	return $event eq 'released'
	  ? ($state eq 'free' || $current > $fence)
	  : ($state eq 'held' && $current >= $fence);
}

$node->safe_psql('postgres', "SELECT fencelock.acquire('leader', 'node-1', '1 hour')",
	extra_params => [ '-U', 'app' ]);
my $got = received();
is(scalar @$got, 1, 'the real grant is announced');
like($got->[0], qr/"event": "granted", "fence": 1, "holder": "app"/, 'with its fence and role');
ok(confirmed('granted', 1), 'the real grant passes the confirming read');

# mallory, an ordinary role with no privilege on fencelock, announces the leader's release.
$node->safe_psql('postgres',
	q{NOTIFY fencelock, '{"resource": "leader", "event": "released", "fence": 1, "holder": "app"}'},
	extra_params => [ '-U', 'mallory' ]);
$got = received();
is_deeply($got, [ '{"resource": "leader", "event": "released", "fence": 1, "holder": "app"}' ],
	'a forged release arrives like a real one');
ok(!confirmed('released', 1), 'the confirming read refutes it: the lease is still held');

# The real release passes the same read.
$node->safe_psql('postgres', "SELECT fencelock.release('leader', 'node-1')",
	extra_params => [ '-U', 'app' ]);
$got = received();
like($got->[0] // '', qr/"event": "released", "fence": 1/, 'the real release is announced');
ok(confirmed('released', 1), 'and passes the confirming read');

$listener->quit;
fl_no_crash($node, 'notify');
done_testing();
