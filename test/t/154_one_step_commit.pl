# Which commits a grant forces to flush (issue 28).  A grant still held when its transaction
# commits must survive a crash: its commit is flushed whatever synchronous_commit says.  A grant
# that its own transaction released again is held by nobody after the commit, so that commit is
# left to the session's synchronous_commit.  Where fencelock cannot be sure a grant of the
# transaction is not held (a release a rolled-back subtransaction may have undone, more grants
# than it follows one by one), it flushes.
#
# The node runs with synchronous_commit = off, autovacuum off and a WAL writer that sleeps 10 s,
# so right after a commit its WAL is flushed only if the commit flushed it: the flush position
# reaches the insert position (nothing else writes WAL in between).
use strict;
use warnings FATAL => 'all';

use FencelockTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('one_step',
	conf => "synchronous_commit = off\nwal_writer_delay = 10000ms\nautovacuum = off\n");

# Whether every WAL record inserted so far is flushed.  A record that ends exactly at a page
# boundary leaves the insert position past the next page's header (24 bytes, 40 at a segment's
# start) while nothing more was inserted: that is flushed too.  (A commit record that ended there
# made this check fail on PostgreSQL 17 although the commit had flushed.)
my $flushed_sql = q{SELECT 'flushed:' || (f >= i - CASE WHEN (i - '0/0'::pg_lsn) % bs IN (24, 40)
		THEN (i - '0/0'::pg_lsn) % bs ELSE 0 END)
	FROM (SELECT pg_current_wal_flush_lsn() AS f, pg_current_wal_insert_lsn() AS i,
	             current_setting('wal_block_size')::numeric AS bs) AS w};

# flushed(SQL): whether the WAL was flushed up to its end right after SQL's last commit.
sub flushed
{
	my ($sql) = @_;
	my @lines = split /\n/,
	  $node->safe_psql('postgres', "$sql\n$flushed_sql");
	die "no answer from the check" unless @lines && $lines[-1] =~ /^flushed:(true|false)$/;
	return $1 eq 'true' ? 1 : 0;
}

# unflushed(SQL): whether one of up to three runs of SQL left its last commit's WAL unflushed.  A
# commit that flushes does so every time; one that does not can still find its WAL flushed on a
# loaded machine, by the WAL writer its commit woke, before the check reads the positions.
sub unflushed
{
	my ($sql) = @_;
	for (1 .. 3)
	{
		return 1 unless flushed($sql);
	}
	return 0;
}

# A one-off write first, so the WAL writer is awake (not hibernating) for every case below.
$node->safe_psql('postgres', 'CREATE TABLE t (x int); INSERT INTO t VALUES (1);');

ok(unflushed("INSERT INTO t VALUES (2);"),
	'an ordinary asynchronous commit is not flushed (the check can see the difference)');

is(flushed("SELECT fencelock.acquire('held', 'a', '1 hour') IS NOT NULL;"),
	1, 'a grant held at its commit is flushed');
is(flushed("BEGIN; SELECT fencelock.acquire('held-tx', 'a', '1 hour'); INSERT INTO t VALUES (3); COMMIT;"),
	1, 'a grant held at the commit of a longer transaction is flushed');

ok( unflushed(
		"BEGIN; SELECT fencelock.acquire('step', 'a', '1 hour'); INSERT INTO t VALUES (4);
		 SELECT fencelock.release('step', 'a'); COMMIT;"),
	'a grant its own transaction released: the commit follows synchronous_commit');
ok( unflushed(
		"BEGIN; SELECT fencelock.acquire('step-fence', 'a', '1 hour') AS f \\gset
		 SELECT fencelock.release('step-fence', 'a', :f); COMMIT;"),
	'the same with the release naming its grant');
ok( unflushed(
		"UPDATE t SET x = a.f FROM (SELECT fencelock.acquire('step-one', 'a', '1 hour') AS f) AS a
		  WHERE a.f IS NOT NULL\\; SELECT fencelock.release('step-one', 'a');"),
	"README's one-step form, one implicit transaction");

is( flushed(
		"BEGIN; SELECT fencelock.acquire('two-1', 'a', '1 hour'); SELECT fencelock.acquire('two-2', 'a', '1 hour');
		 SELECT fencelock.release('two-1', 'a'); COMMIT;"),
	1,
	'one of two grants still held: flushed');
is( flushed(
		"BEGIN; SELECT fencelock.acquire('undone', 'a', '1 hour'); SAVEPOINT s;
		 SELECT fencelock.release('undone', 'a'); ROLLBACK TO SAVEPOINT s; COMMIT;"),
	1,
	'a release undone by a rolled-back subtransaction: the grant is held, flushed');
is($node->safe_psql('postgres', "SELECT state FROM fencelock.leases WHERE resource = 'undone'"),
	'held', '... and the lease is indeed held');
is( flushed(
		"BEGIN; SELECT fencelock.acquire('sub-' || g, 'a', '1 hour') FROM generate_series(1, 9) AS g;
		 SELECT fencelock.release('sub-' || g, 'a') FROM generate_series(1, 9) AS g; COMMIT;"),
	1,
	'more grants than it follows one by one (8): flushed');
ok( unflushed(
		"BEGIN; SELECT fencelock.acquire('few-' || g, 'a', '1 hour') FROM generate_series(1, 8) AS g;
		 SELECT fencelock.release('few-' || g, 'a') FROM generate_series(1, 8) AS g; COMMIT;"),
	'eight grants, all released: not flushed');

# The same owner's live lease, acquired again and released in a new transaction: the grant
# committed (and was flushed) earlier; the release alone never forces a flush.
ok( unflushed(
		"SELECT fencelock.acquire('again', 'a', '1 hour');
		 BEGIN; SELECT fencelock.acquire('again', 'a', '1 hour'); SELECT fencelock.release('again', 'a'); COMMIT;"),
	'a re-acquire released in its transaction: not flushed');

# A crash right after a one-step transaction loses nothing anyone holds: every held lease is
# there after an immediate shutdown, and every lease the crash may have lost was released.
$node->safe_psql('postgres', "SELECT fencelock.acquire('kept', 'a', '1 hour')");
$node->safe_psql('postgres',
	"BEGIN; SELECT fencelock.acquire('gone', 'a', '1 hour'); SELECT fencelock.release('gone', 'a'); COMMIT;");
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', "SELECT state FROM fencelock.leases WHERE resource = 'kept'"),
	'held', 'after a crash: the lease held at its commit is held');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM fencelock.leases WHERE resource = 'gone' AND state = 'held'"),
	'0',
	'after a crash: the one-step lease is not held (lost with its transaction, or released)');

$node->stop;
done_testing();
