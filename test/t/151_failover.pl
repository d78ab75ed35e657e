# Failover: fences never go back when a standby is promoted.
#  - A synchronous standby has every grant a client saw (the client's session uses the default
#    synchronous_commit = on): after the primary is killed and the standby promoted, every lease
#    is there with its fence, and new fences carry the new timeline in their top 16 bits.
#  - An asynchronous standby that was cut off before the last grants lacks them: after its
#    promotion those leases are simply free, and every fence it issues exceeds every fence the old
#    primary issued, because fences on timeline T are at least (T - 1) << 48.
#  - On a standby, acquire (and the other writing functions) fail with SQLSTATE 25006.
#  - A grant made in a synchronous_commit = off session still waits for the synchronous standby:
#    acquire raises the setting to 'on' for its transaction.
use strict;
use warnings FATAL => 'all';

use FencelockTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $TL2 = 1 << 48;    # the lowest fence a grant on timeline 2 may carry, less one

my $primary = fl_node('primary', init => { allows_streaming => 1 });
$primary->backup('base');

my $sync = PostgreSQL::Test::Cluster->new('standby_sync');
$sync->init_from_backup($primary, 'base', has_streaming => 1);
$sync->start;
my $async = PostgreSQL::Test::Cluster->new('standby_async');
$async->init_from_backup($primary, 'base', has_streaming => 1);
$async->start;

# cluster_name is the node's name, and the walreceiver's application_name.
$primary->append_conf('postgresql.conf', "synchronous_standby_names = 'standby_sync'\n");
$primary->reload;
$primary->poll_query_until('postgres',
	"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'standby_sync'")
  or die 'standby_sync never became synchronous';

# "resource|fence" rows for a list of grants made in one session, each its own transaction.
sub grant_all
{
	my ($node, @grants) = @_;
	my $sql = join("\n",
		map { "SELECT '$_->[0]', fencelock.acquire('$_->[0]', '$_->[1]', '1 hour');" } @grants);
	return map { $_->[0] => $_->[1] } fl_parse_rows($node->safe_psql('postgres', $sql));
}

# Early grants: both standbys get them.
my %early;
foreach my $round (1 .. 3)
{
	my %got = grant_all($primary, map { [ "fo:early$_", "w$round" ] } 1 .. 4);
	$primary->safe_psql('postgres',
		join("\n", map { "SELECT fencelock.release('fo:early$_', 'w$round');" } 1 .. 4))
	  if $round < 3;
	$early{$_} = $got{$_} foreach keys %got;
}
is_deeply([ @early{ map { "fo:early$_" } 1 .. 4 } ], [ 3, 3, 3, 3 ], 'early grants: fences 1..3');
$primary->wait_for_catchup($async);

# On a standby, the functions that write fail with 25006; reading works.
my ($state, $msg) = fl_error($sync, 'postgres', "SELECT fencelock.acquire('fo:early1', 'w9')");
is($state, '25006', "acquire on a standby fails with 25006 ($msg)");
($state) = fl_error($async, 'postgres', "SELECT fencelock.acquire('fo:new', 'w9')");
is($state, '25006', 'acquire of a new resource on an asynchronous standby fails with 25006');
($state) = fl_error($sync, 'postgres', "SELECT fencelock.renew('fo:early1', 'w3')");
is($state, '25006', 'renew on a standby fails with 25006');
($state) = fl_error($sync, 'postgres', "SELECT fencelock.release('fo:early1', 'w3')");
is($state, '25006', 'release on a standby fails with 25006');
is($sync->safe_psql('postgres', "SELECT fencelock.current_fence('fo:early1')"),
	'3', 'current_fence works on a standby');

# The asynchronous standby is cut off: it will never see the late grants.
$async->stop('immediate');

my %late = grant_all($primary, map { [ "fo:late$_", 'late' ] } 1 .. 4);

# README: "With a synchronous standby the grants a client saw are on the standby."  A session
# with synchronous_commit = off: acquire forces a local flush (ForceSyncCommit) but does not wait
# for the synchronous standby, so while the standby is down the client gets a fence the standby
# does not have.  Shown with the standby stopped: a grant that waits for it shows up in
# pg_stat_activity with wait_event SyncRep (the control, with synchronous_commit = on, does);
# one that does not returns at once.
$sync->stop('fast');
my %client;
foreach my $c ([ 'control', 'on' ], [ 'nosync', 'off' ])
{
	my ($name, $mode) = @$c;
	$client{$name}{out} = '';
	$client{$name}{h} = IPC::Run::start(
		[
			'psql', '-XAtq', '-d', $primary->connstr('postgres') . " application_name=$name",
			'-c',
			"SET synchronous_commit = $mode; SELECT fencelock.acquire('fo:$name', 'late', '1 hour')"
		],
		'<' => \undef, '>' => \$client{$name}{out}, '2>' => \$client{$name}{err});
}
my ($control_waits, $nosync_waits, $nosync_done) = (0, 0, 0);
my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
while (time < $deadline && !($control_waits && ($nosync_waits || $nosync_done)))
{
	$client{nosync}{h}->pump_nb;
	$nosync_done = !$client{nosync}{h}->pumpable;
	my $waiting = $primary->safe_psql('postgres',
		"SELECT string_agg(application_name, ',') FROM pg_stat_activity WHERE wait_event = 'SyncRep'");
	$control_waits = $waiting =~ /control/;
	$nosync_waits = $waiting =~ /nosync/;
	select(undef, undef, undef, 0.05);
}
ok($control_waits, 'control: a grant in a synchronous_commit = on session waits for the synchronous standby');
ok($nosync_waits, 'a grant in a synchronous_commit = off session waits for the synchronous standby');
$sync->start;
foreach my $name ('control', 'nosync')
{
	$client{$name}{h}->finish;
	chomp($late{"fo:$name"} = $client{$name}{out});
	is($late{"fo:$name"}, '1', "$name: the grant made while the synchronous standby was down has fence 1");
}
$primary->poll_query_until('postgres',
	"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'standby_sync'")
  or die 'standby_sync never became synchronous again';
my %more = grant_all($primary, map { [ "fo:early$_", 'late' ] } 1 .. 2);
is_deeply([ @more{ map { "fo:early$_" } 1 .. 2 } ], [ '', '' ],
	'early leases are held by w3: another owner gets NULL');
$primary->safe_psql('postgres',
	join("\n", map { "SELECT fencelock.release('fo:early$_', 'w3');" } 1 .. 2));
%more = grant_all($primary, map { [ "fo:early$_", 'late' ] } 1 .. 2);
is_deeply([ @more{ map { "fo:early$_" } 1 .. 2 } ], [ 4, 4 ],
	'late grants of early resources: fence 4');
$early{$_} = $more{$_} foreach keys %more;

my %issued = (%early, %late);    # every fence the old primary issued, per resource
my $max_issued = 0;
$max_issued = $_ > $max_issued ? $_ : $max_issued foreach values %issued;

# Kill the primary; promote the synchronous standby.
$primary->stop('immediate');
$sync->promote;

my %on_sync = map { $_->[0] => $_->[1] } fl_parse_rows(
	$sync->safe_psql('postgres', "SELECT resource, fence FROM fencelock.lease WHERE owner IS NOT NULL"));
is_deeply(\%on_sync, \%issued,
	'promoted synchronous standby: every lease the clients saw is held, with its fence');

$sync->safe_psql('postgres', "SELECT fencelock.release('fo:early4', 'w3')");
my %new = grant_all($sync,
	map { [ $_, 'after-failover' ] } 'fo:early3', 'fo:early4', 'fo:fresh');
is($new{'fo:early3'}, '', 'promoted synchronous standby: a lease held before the failover is still held');
foreach my $res ('fo:early4', 'fo:fresh')
{
	is($new{$res}, $TL2 + 1,
		"promoted synchronous standby: $res granted with fence (1 << 48) + 1, on timeline 2");
	cmp_ok($new{$res}, '>', $max_issued,
		"promoted synchronous standby: $res fence exceeds every fence issued before");
}
$sync->stop;

# Promote the asynchronous standby that lacks the late grants.
$async->start;
$async->promote;
my %on_async = map { $_->[0] => $_->[1] } fl_parse_rows(
	$async->safe_psql('postgres', "SELECT resource, fence FROM fencelock.lease"));
ok(!exists $on_async{'fo:late1'}, 'promoted asynchronous standby: it lost the late grants');
is($on_async{'fo:early1'}, 3, 'promoted asynchronous standby: its fence for fo:early1 is behind (3 < 4)');

my @res = ((map { "fo:late$_" } 1 .. 4), (map { "fo:early$_" } 1 .. 4));
$async->safe_psql('postgres',
	join("\n", map { "SELECT fencelock.release('fo:early$_', 'w3');" } 1 .. 4));
%new = grant_all($async, map { [ $_, 'after-failover' ] } @res);
foreach my $res (@res)
{
	cmp_ok($new{$res}, '>', $issued{$res},
		"promoted asynchronous standby: $res fence $new{$res} > the old primary's $issued{$res}");
}
my $min_new = (sort { $a <=> $b } values %new)[0];
cmp_ok($min_new, '>', $max_issued,
	'promoted asynchronous standby: every new fence exceeds every fence issued before the failover');
cmp_ok($min_new, '>', $TL2, 'and carries timeline 2 in its top bits');

fl_no_crash($async, 'promoted asynchronous standby');
$async->stop;
done_testing();
