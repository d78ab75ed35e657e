# Issue 20, defect 11: the counts of a prepared transaction (grants, renewals, releases, revokes)
# wait in shared memory, one slot per transaction, until COMMIT PREPARED counts them or ROLLBACK
# PREPARED drops them (test/sql/502_prepared_counts_follow_commit.sql and
# test/specs/stats_count_prepared.spec show the rule).  Here, what only many transactions and a
# restart show:
#   - slots are given back: many more prepared transactions than slots, committed and rolled
#     back in turn, and PREPAREs that fail, are each counted exactly;
#   - a transaction prepared before a restart is committed as usual after it, and, as README
#     says, not counted (the slots are in shared memory); nothing fails.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use FencelockTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# Few slots: max_prepared_transactions + the server's backends (under 60 here), and three times
# as many rounds.
my $node = fl_node('prepared',
	conf => "max_prepared_transactions = 3\nmax_connections = 10\n");
my $rounds = 150;

$node->safe_psql('postgres', 'SELECT fencelock.stats_reset()');

# Each round: two transactions prepared at once (each a grant and a release), one committed and
# one rolled back, and a PREPARE that fails (its identifier is in use) after a release.
my $sql = '';
foreach my $i (1 .. $rounds)
{
	$sql .= qq{
		BEGIN;
		SELECT fencelock.acquire('pp:c$i', 'a', '1 minute') IS NOT NULL;
		SELECT fencelock.release('pp:c$i', 'a');
		PREPARE TRANSACTION 'pp_commit';
		BEGIN;
		SELECT fencelock.acquire('pp:r$i', 'a', '1 minute') IS NOT NULL;
		SELECT fencelock.release('pp:r$i', 'a');
		PREPARE TRANSACTION 'pp_rollback';
		BEGIN;
		SELECT fencelock.acquire('pp:f$i', 'a', '1 minute') IS NOT NULL;
		PREPARE TRANSACTION 'pp_commit';
		COMMIT PREPARED 'pp_commit';
		ROLLBACK PREPARED 'pp_rollback';
	};
}
my ($out, $err) = ('', '');
$node->psql('postgres', $sql, stdout => \$out, stderr => \$err, on_error_stop => 0);
my @errors = $err =~ /ERROR:  ([^\n]*)/g;
is(scalar(grep { $_ eq 'transaction identifier "pp_commit" is already in use' } @errors),
	$rounds, "$rounds PREPAREs failed on an identifier in use");
is(scalar(@errors), $rounds, 'no other error');
is( $node->safe_psql('postgres', 'SELECT grants, releases FROM fencelock.stats'),
	"$rounds|$rounds",
	"$rounds rounds: every committed grant and release counted, nothing else");
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM fencelock.lease WHERE resource LIKE 'pp:c%'}),
	$rounds, 'the committed grants are there');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM fencelock.lease WHERE resource NOT LIKE 'pp:c%'}),
	'0', 'nothing of the rolled-back ones');

# Prepared before a restart: committed after it, not counted; the next ones are.
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT fencelock.acquire('pp:across', 'a', '1 hour');
	PREPARE TRANSACTION 'pp_across';});
$node->restart;
$node->safe_psql('postgres', q{COMMIT PREPARED 'pp_across'});
is($node->safe_psql('postgres', q{SELECT fencelock.current_fence('pp:across') IS NOT NULL}),
	't', 'prepared before the restart, committed after it: granted');
is($node->safe_psql('postgres', 'SELECT grants, releases FROM fencelock.stats'),
	'0|0', 'and not counted (the counters restarted at zero too)');
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT fencelock.release('pp:across', 'a');
	PREPARE TRANSACTION 'pp_after';
	COMMIT PREPARED 'pp_after';});
is($node->safe_psql('postgres', 'SELECT grants, releases FROM fencelock.stats'),
	'0|1', 'a transaction prepared after the restart is counted');

fl_no_crash($node, 'prepared transactions');
$node->stop;
done_testing();
