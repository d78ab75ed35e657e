# A session-bound share whose exit sweep finds its group's row locked (issue 35, defect 3).  A
# session's end skips a locked lease row rather than wait (src/lease/session.c), and until 0.4.0's fix
# nothing else ended such a share: the group row kept the dead share's deadline (an hour here),
# writers were refused, and while a writer waited, writer preference refused every new reader.
# Now liveness frees it, as it frees an exclusive session-bound lease: an exclusive grant that
# finds a group none of whose holders occupies a share any more, one of them of an ended
# session, ends the group (src/store/group.c, fl_group_end_dead).
#
# The row is held locked, while 16 session-bound readers are terminated at once, by another
# holder's open assert_fence (a lease-bound write takes the same share lock), by the readers' own
# exit sweeps racing each other (a pool closing), and by a reader's own prepared renew.  Then a
# try-once writer must be granted, and a writer already waiting must be granted within its
# recheck (fencelock.wait_recheck, 1 s), not at its deadline.  Made to fail: on 8a3f85a the
# try-once writers answered NULL and the waiting one NULL at its 60 s deadline.
use strict;
use warnings FATAL => 'all';

use FencelockTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = fl_node('sharelocked',
	conf => "fencelock.history = on\nmax_prepared_transactions = 4\nmax_connections = 60\n");
my $readers = 16;

sub wait_for { return fl_wait_for($node, @_); }

# READERS session-bound readers of RESOURCE (1 hour), each in a session of its own that sleeps.
sub start_readers
{
	my ($resource) = @_;
	my @r = map {
		fl_background($node, "reader-$resource",
			"SELECT fencelock.acquire_shared('$resource', 'r$_', '1 hour', '30 seconds', true)",
			q{SELECT pg_sleep(300)})
	} 1 .. $readers;
	is( wait_for(
			"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'reader-$resource'
			  AND wait_event = 'PgSleep'", "$readers"),
		"$readers",
		"$resource: $readers session-bound readers hold their shares");
	return @r;
}

# Terminate them all at once, as a pool that closes ends its connections; wait until they exited.
sub end_readers
{
	my ($resource, @r) = @_;
	$node->safe_psql('postgres',
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		  WHERE application_name = 'reader-$resource'");
	is( wait_for(
			"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'reader-$resource'",
			'0'),
		'0',
		"$resource: the readers' sessions have ended");
	$_->{h}->finish for @r;
}

# 1. Another holder's assert_fence holds the group row share-locked while the readers end: every
#    exit sweep skips the row.  The holder's own share runs out; a try-once writer is granted.
my $keeper = fl_client($node->connstr('postgres'));
my $k = $keeper->query(q{SELECT fencelock.acquire_shared('d3:fence', 'keeper', '3 seconds')});
like($k, qr/^\d+$/, 'd3:fence: another holder has a share of 3 seconds');
my @r = start_readers('d3:fence');
is($keeper->query("BEGIN; SELECT fencelock.assert_fence('d3:fence', $k)"), '',
	'd3:fence: its assert_fence holds the group row share-locked');
end_readers('d3:fence', @r);
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM fencelock.lease_holders WHERE resource = 'd3:fence'
		  AND owner LIKE 'r%' AND state = 'expired'}),
	"$readers",
	'd3:fence: every exit sweep skipped the locked row: the dead readers\' rows are left');
$keeper->query('COMMIT');
is( wait_for(
		q{SELECT state FROM fencelock.lease_holders WHERE resource = 'd3:fence'
		  AND owner = 'keeper'}, 'expired'),
	'expired',
	'd3:fence: the other holder\'s share has run out');
like(
	$node->safe_psql('postgres', q{SELECT fencelock.acquire('d3:fence', 'writer', '1 minute')}),
	qr/^\d+$/,
	'd3:fence: a try-once writer is granted: the dead readers\' shares ended with their sessions');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM fencelock.lease_holders WHERE resource = 'd3:fence'}),
	'0', 'd3:fence: the group has ended');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM fencelock.history WHERE resource = 'd3:fence'
		  AND owner LIKE 'r%' AND ended_how = 'released'}),
	"$readers",
	'd3:fence: history: each dead reader\'s share ended, released');

# 2. The same with a writer already waiting (queued before the readers end): it is granted
#    within its recheck once the other holder's share has run out, long before its deadline.
$k = $keeper->query(q{SELECT fencelock.acquire_shared('d3:wait', 'keeper', '4 seconds')});
@r = start_readers('d3:wait');
my $writer = fl_background($node, 'writer',
	q{SET fencelock.wait_recheck = '1s'},
	q{SELECT fencelock.acquire('d3:wait', 'writer', '1 minute', '60 seconds') IS NOT NULL,
	         clock_timestamp() - statement_timestamp() < interval '30 seconds'});
is(wait_for(q{SELECT fencelock.waiters('d3:wait')}, '1'), '1', 'd3:wait: a writer waits');
is($node->safe_psql('postgres', q{SELECT fencelock.acquire_shared('d3:wait', 'new', '1 minute')}),
	'', 'd3:wait: writer preference refuses a new reader');
$keeper->query("BEGIN; SELECT fencelock.assert_fence('d3:wait', $k)");
end_readers('d3:wait', @r);
$keeper->query('COMMIT');
$writer->{h}->finish;
is(${ $writer->{out} }, "t|t\n",
	'd3:wait: the waiting writer is granted within its recheck, not at its deadline');

# 3. The readers' own exit sweeps race for the group row, with no other lock (1 in 5 trials
#    failed before): the group ends with the last of them.
for my $trial (1 .. 3)
{
	@r = start_readers("d3:race$trial");
	end_readers("d3:race$trial", @r);
	like(
		$node->safe_psql('postgres',
			"SELECT fencelock.acquire('d3:race$trial', 'writer', '1 minute', '10 seconds')"),
		qr/^\d+$/,
		"d3:race$trial: a writer is granted once the readers ended together");
}

# 4. The reader's own renew, prepared and not yet committed, holds the row when its session ends.
my $prep = fl_client($node->connstr('postgres'));
like($prep->query(
		q{SELECT fencelock.acquire_shared('d3:prepared', 'p', '1 hour', session => true)}),
	qr/^\d+$/, 'd3:prepared: a session-bound reader');
my $prep_pid = $prep->query('SELECT pg_backend_pid()');
$prep->query(q{BEGIN; SELECT fencelock.renew('d3:prepared', 'p', '1 hour');
	PREPARE TRANSACTION 'd3_renew'});
$node->safe_psql('postgres', "SELECT pg_terminate_backend($prep_pid)");
is(wait_for("SELECT count(*) FROM pg_stat_activity WHERE pid = $prep_pid", '0'),
	'0', 'd3:prepared: its session ended with its renew prepared');
$node->safe_psql('postgres', q{COMMIT PREPARED 'd3_renew'});
like(
	$node->safe_psql('postgres', q{SELECT fencelock.acquire('d3:prepared', 'writer', '1 minute')}),
	qr/^\d+$/,
	'd3:prepared: a try-once writer is granted after the renew committed');

$keeper->quit;
fl_no_crash($node, 'session shares with a locked group row');
done_testing();
