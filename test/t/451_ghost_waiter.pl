# Issue 10, finding 13 (ghost waiters): a waiting acquire whose client died (kill -9 of the
# client) stayed queued, was granted the lease at the next release and held it, unused, for a
# whole ttl, while the live waiter behind it waited.  A sleeping waiter now checks its client
# connection at least every 200 ms and before it tries after a wake-up; a dead client ends the
# session as the server ends one whose client is lost ("connection to client lost"), and its
# place in the queue goes to the next waiter.  Both for acquire with a wait and for acquire_all.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use FencelockTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = fl_node('ghost', conf => "fencelock.history = on\n");

# A client in the background running one statement; returns the harness and its output.
sub start_client
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-q', '-A', '-t', '-d', $node->connstr('postgres'), '-c', $sql ],
		'>', \$out, '2>', \$err);
	return { h => $h, out => \$out, err => \$err };
}

sub waiters
{
	my ($resource) = @_;
	return $node->safe_psql('postgres', "SELECT fencelock.waiters('$resource')");
}

sub wait_for_waiters
{
	my ($resource, $n) = @_;
	$node->poll_query_until('postgres', "SELECT fencelock.waiters('$resource') = $n")
	  or die "timed out waiting for $n waiters of $resource";
}

# Kill a client with SIGKILL (no goodbye to the server) and reap it.
sub kill_client
{
	my ($c) = @_;
	$c->{h}->signal('KILL');
	eval { $c->{h}->finish };
}

foreach my $case (
	[ 'acquire', "SELECT fencelock.acquire('%s', '%s', '1 minute', '%s')" ],
	[ 'acquire_all', "SELECT fencelock.acquire_all(ARRAY['%s'], '%s', '1 minute', '%s')" ])
{
	my ($api, $template) = @$case;
	my $res = "ghost:$api";

	$node->safe_psql('postgres', "SELECT fencelock.acquire('$res', 'holder', '1 minute')");
	my $ghost = start_client(sprintf($template, $res, "ghost-$api", '60 seconds'));
	wait_for_waiters($res, 1);
	my $live = start_client(
		sprintf($template, $res, "live-$api", '20 seconds')
		  . " IS NOT NULL AS got, clock_timestamp() - statement_timestamp() < interval '5 seconds' AS prompt");
	wait_for_waiters($res, 2);

	# The client dies while its backend sleeps in the queue: the backend notices within a few
	# hundred milliseconds and leaves the queue, without any release.
	my $t0 = time;
	kill_client($ghost);
	$node->poll_query_until('postgres', "SELECT fencelock.waiters('$res') = 1")
	  or die "the dead client's backend stayed queued for $res";
	my $gone = time - $t0;
	cmp_ok($gone, '<', 3, "$api: the dead client's waiter left the queue after ${\ sprintf('%.2f', $gone)} s");

	# The release goes to the live waiter, promptly, and never to the dead one.
	$node->safe_psql('postgres', "SELECT fencelock.release('$res', 'holder')");
	$live->{h}->finish;
	is(${ $live->{out} }, "t|t\n", "$api: the live waiter gets the lease promptly");
	is($node->safe_psql('postgres', "SELECT owner FROM fencelock.lease WHERE resource = '$res'"),
		"live-$api", "$api: the lease row names the live waiter");
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM fencelock.history WHERE resource = '$res' AND owner = 'ghost-$api'"),
		'0', "$api: history shows no grant to the dead client");
	is(waiters($res), '0', "$api: nobody is left queued");
}

# A dead client whose backend is woken by the release itself (killed just before it): it must
# not take the lease it was woken for.
{
	my $res = 'ghost:woken';
	$node->safe_psql('postgres', "SELECT fencelock.acquire('$res', 'holder', '1 minute')");
	my $ghost = start_client("SELECT fencelock.acquire('$res', 'ghost-woken', '1 minute', '60 seconds')");
	wait_for_waiters($res, 1);
	my $live = start_client("SELECT fencelock.acquire('$res', 'live-woken', '1 minute', '20 seconds') IS NOT NULL");
	wait_for_waiters($res, 2);
	kill_client($ghost);
	$node->safe_psql('postgres', "SELECT fencelock.release('$res', 'holder')");
	$live->{h}->finish;
	is(${ $live->{out} }, "t\n", 'a dead client woken by the release: the live waiter gets the lease');
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM fencelock.history WHERE resource = '$res' AND owner = 'ghost-woken'"),
		'0', 'and the dead client never got it');
}

like(slurp_file($node->logfile), qr/connection to client lost/,
	'the dead clients\' sessions ended as for a lost client');
fl_no_crash($node, 'ghost waiters');
$node->stop;
done_testing();
