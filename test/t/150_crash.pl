# Crash: grants survive an immediate shutdown even when the granting session runs with
# synchronous_commit = off.  Every fence granted after the restart is greater than every fence
# a client received before the crash, for the same resource, and leases held before the crash
# are still held.  Two rounds: 200 acquire/release cycles that finish before the crash, then a
# stream of grants that the crash interrupts.
#
# The node is configured so that an asynchronous commit really can be lost: fsync is off (as in
# every TAP node; an immediate shutdown is a process crash, the kernel keeps what was written)
# and the WAL writer sleeps 10 s, so only a commit that flushes its own WAL survives.
use strict;
use warnings FATAL => 'all';

use FencelockTest;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('crash', conf => "synchronous_commit = off\nwal_writer_delay = 10000ms\n");

# max fence received per resource, from "grant|resource|owner|fence" lines
sub received
{
	my ($out) = @_;
	my %max;
	foreach my $row (fl_parse_rows($out))
	{
		next unless $row->[0] eq 'grant' && $row->[3] ne '';
		$max{ $row->[1] } = $row->[3]
		  if !defined $max{ $row->[1] } || $row->[3] > $max{ $row->[1] };
	}
	return %max;
}

# After the restart: a new owner gets a fence above every fence received before the crash.
# A lease whose release was lost in the crash (release does not force a flush, and need not)
# is still held by its last owner until it expires, so wait for that.
sub check_new_grants
{
	my ($round, %max) = @_;
	my $list = join(', ', map { "'$_'" } sort keys %max);
	my %stored = map { $_->[0] => $_->[1] } fl_parse_rows(
		$node->safe_psql('postgres',
			"SELECT r, fencelock.current_fence(r) FROM unnest(ARRAY[$list]) AS r"));
	my $held = $node->safe_psql('postgres',
		"SELECT count(*) FROM fencelock.leases WHERE resource IN ($list) AND state = 'held'");
	note "$round: $held leases were still held after the restart: their release was lost in the crash"
	  if $held > 0;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM fencelock.leases WHERE resource IN ($list) AND state = 'held'")
	  or die "the leases were never free again";
	my %new = map { $_->[0] => $_->[1] } fl_parse_rows(
		$node->safe_psql('postgres',
			"SELECT r, fencelock.acquire(r, 'after-crash', '1 minute') FROM unnest(ARRAY[$list]) AS r"
		));
	foreach my $res (sort keys %max)
	{
		cmp_ok($stored{$res}, '>=', $max{$res},
			"$round: $res: the stored fence did not go back ($stored{$res} >= $max{$res})");
		cmp_ok($new{$res}, '>', $max{$res},
			"$round: $res: the first grant after the crash ($new{$res}) is above every fence received before ($max{$res})"
		);
	}
}

# Control: on this node an asynchronous commit can be lost in a crash.
$node->safe_psql('postgres', 'SET synchronous_commit = on; CREATE TABLE journal (i int)');
$node->safe_psql('postgres',
	"SET synchronous_commit = off;\n" . join('', map { "INSERT INTO journal VALUES ($_);\n" } 1 .. 50));
$node->stop('immediate');
$node->start;
my $journal = $node->safe_psql('postgres', 'SELECT count(*) FROM journal');
note "control: $journal of 50 asynchronous commits survived the crash";

# Round 1: 200 acquire/release cycles on 8 resources, each call its own transaction, then
# leases that stay held: the last transactions before the crash.
my $sql = "SET synchronous_commit = off;\n";
foreach my $i (1 .. 200)
{
	my $res = 'crash:c' . ($i % 8);
	$sql .= "SELECT 'grant', '$res', 'w$i', fencelock.acquire('$res', 'w$i', '2 seconds');\n";
	$sql .= "SELECT 'release', '$res', 'w$i', fencelock.release('$res', 'w$i');\n";
}
foreach my $h (1 .. 4)
{
	$sql .= "SELECT 'grant', 'crash:h$h', 'holder-$h', fencelock.acquire('crash:h$h', 'holder-$h', '1 hour');\n";
}
my $out = $node->safe_psql('postgres', $sql);

my %max = received($out);
my @grants = grep { $_->[0] eq 'grant' } fl_parse_rows($out);
is(scalar(grep { $_->[3] ne '' } @grants), 204, 'round 1: all 204 grants were made');
my %seen;
is(scalar(grep { $seen{"$_->[1]/$_->[3]"}++ } @grants), 0,
	'round 1: no fence was received twice for a resource');
is($max{'crash:c0'}, 25, 'round 1: 25 grants of crash:c0 got fences 1..25');

$node->stop('immediate');
$node->start;

my %after = map { $_->[0] => "$_->[1]|$_->[2]|$_->[3]|$_->[4]|$_->[5]" } fl_parse_rows(
	$node->safe_psql('postgres', q{
		SELECT resource, owner, fence, state, fencelock.acquire(resource, 'intruder') IS NULL,
		       fencelock.renew(resource, owner, '1 hour')
		  FROM fencelock.leases WHERE resource LIKE 'crash:h%'}));
foreach my $h (1 .. 4)
{
	is($after{"crash:h$h"}, "holder-$h|$max{\"crash:h$h\"}|held|t|t",
		"round 1: crash:h$h is still held by holder-$h with the same fence; another owner gets NULL, the holder can renew"
	);
	delete $max{"crash:h$h"};
}
check_new_grants('round 1', %max);

# Round 2: a client streams grants (synchronous_commit = off) and the server crashes under it.
# What the client printed it received after the grant's commit returned.
my $script = "SET synchronous_commit = off;\n";
foreach my $i (1 .. 5000)
{
	my $res = 'stream:s' . ($i % 4);
	$script .= "SELECT 'grant', '$res', 'v$i', fencelock.acquire('$res', 'v$i', '1 second');\n";
	$script .= "SELECT 'release', '$res', 'v$i', fencelock.release('$res', 'v$i');\n";
}
my $script_file = $node->basedir . '/stream.sql';
append_to_file($script_file, $script);
my ($stdout, $stderr) = ('', '');
my $psql = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-f', $script_file ],
	'<' => \undef, '>' => \$stdout, '2>' => \$stderr);
my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
while (($stdout =~ tr/\n//) < 400 && time < $deadline)
{
	$psql->pump_nb;
	select(undef, undef, undef, 0.01);
}
$node->stop('immediate');
$psql->finish;
%max = received($stdout);
my $n = scalar(grep { $_->[0] eq 'grant' } fl_parse_rows($stdout));
cmp_ok($n, '>=', 100, "round 2: the client received $n grants before the crash");
like($stderr, qr/server closed the connection|terminating connection|connection to server was lost/,
	'round 2: the crash cut the client off mid-stream');

$node->start;
check_new_grants('round 2', %max);

fl_no_crash($node, 'after both crashes');
$node->stop;
done_testing();
