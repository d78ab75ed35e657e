# Issue 20, defect 15 (logical replication): a subscriber whose fence trigger is ENABLE ALWAYS
# (it then fires in logical replication's workers too) refused its own initial table sync
# forever: the sync's COPY inserts every row of a lease-bound table, and the subscriber's own
# lease table knows nothing of the publisher's leases (FL001 "no fence has been issued"); the
# worker failed, restarted and failed again.  Replicated DELETEs would be refused the same way
# (FL002: the apply worker's transaction has shown no fence).  A change that logical
# replication applies was checked where it was made, on the publisher: the trigger now lets
# it pass, in both modes.  The subscriber's own writes are still checked.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use FencelockTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $tables = q{
	CREATE TABLE s (id int PRIMARY KEY, v text, last_fence bigint);
	CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON s FOR EACH ROW
	    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=set-demo');
	CREATE TABLE orders (id int PRIMARY KEY, status text, last_fence bigint);
	CREATE TRIGGER fence BEFORE UPDATE ON orders FOR EACH ROW
	    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
};

my $pub = fl_node('publisher', init => { allows_streaming => 'logical' });
$pub->safe_psql('postgres', $tables);
$pub->safe_psql('postgres', q{
	SELECT fencelock.acquire('set-demo', 'w1', '1 hour');
	INSERT INTO s VALUES (1, 'a', 1), (2, 'b', 1), (3, 'c', 1);
	INSERT INTO orders VALUES (1, 'open', NULL), (2, 'open', NULL);
	UPDATE orders SET status = 'paid', last_fence = 1 WHERE id = 1;
	CREATE PUBLICATION pub FOR TABLE s, orders;
});

my $sub = fl_node('subscriber');
$sub->safe_psql('postgres', $tables);
$sub->safe_psql('postgres', q{
	ALTER TABLE s ENABLE ALWAYS TRIGGER fence;
	ALTER TABLE orders ENABLE ALWAYS TRIGGER fence;
});
my $pubconn = $pub->connstr . ' dbname=postgres';
$sub->safe_psql('postgres', "CREATE SUBSCRIPTION sub CONNECTION '$pubconn' PUBLICATION pub");

# The initial sync: every table ready within 60 s (before the fix the sync of s failed forever).
my $synced = 0;
my $deadline = time + 60;
while (time < $deadline)
{
	$synced = $sub->safe_psql('postgres',
		q{SELECT count(*) = 2 AND bool_and(srsubstate IN ('r', 's')) FROM pg_subscription_rel}) eq 't';
	last if $synced;
	usleep(200_000);
}
ok($synced, 'the initial table sync completes with the fence triggers ENABLE ALWAYS');
my $refusals = () = slurp_file($sub->logfile) =~ /ERROR:  (?:no fence|fence \d+|\w+ (?:into|of|from) table)/g;
is($refusals, 0, 'no replicated row was refused');
is($sub->safe_psql('postgres', 'SELECT id, v, last_fence FROM s ORDER BY id'),
	"1|a|1\n2|b|1\n3|c|1", 'the lease-bound table is copied');
is($sub->safe_psql('postgres', 'SELECT id, status, last_fence FROM orders ORDER BY id'),
	"1|paid|1\n2|open|", 'the per-row fenced table is copied');

# Changes made afterwards, under a new grant: INSERT, UPDATE and DELETE of the lease-bound table,
# an UPDATE of the per-row table.
$pub->safe_psql('postgres', q{
	SELECT fencelock.release('set-demo', 'w1');
	SELECT fencelock.acquire('set-demo', 'w2', '1 hour');
	INSERT INTO s VALUES (4, 'd', 2);
	UPDATE s SET v = 'a2', last_fence = 2 WHERE id = 1;
	BEGIN;
	SELECT fencelock.assert_fence('set-demo', 2);
	DELETE FROM s WHERE id = 2;
	COMMIT;
	UPDATE orders SET status = 'shipped', last_fence = 2 WHERE id = 1;
});
$pub->wait_for_catchup('sub');
is($sub->safe_psql('postgres', 'SELECT id, v, last_fence FROM s ORDER BY id'),
	"1|a2|2\n3|c|1\n4|d|2", 'replicated INSERT, UPDATE and DELETE are applied');
is($sub->safe_psql('postgres', 'SELECT id, status, last_fence FROM orders ORDER BY id'),
	"1|shipped|2\n2|open|", 'a replicated UPDATE of the per-row table is applied');

# The subscriber's own writes still go through the checks.
my ($state) = fl_error($sub, 'postgres', "INSERT INTO s VALUES (9, 'x', 2)");
is($state, 'FL001', 'a local INSERT on the subscriber is checked against its own leases');
($state) = fl_error($sub, 'postgres', "UPDATE orders SET status = 'lost' WHERE id = 1");
is($state, 'FL002', 'a local UPDATE that carries no fence is refused');
($state) = fl_error($sub, 'postgres', "UPDATE orders SET status = 'old', last_fence = 1 WHERE id = 1");
is($state, 'FL001', 'a local UPDATE with an older fence is refused');
# So are writes of a superuser session that sets session_replication_role = replica: only
# logical replication's own workers pass unchecked.
($state) = fl_error($sub, 'postgres',
	"SET session_replication_role = replica; UPDATE orders SET status = 'x' WHERE id = 1");
is($state, 'FL002', 'a session_replication_role = replica session is still checked (ENABLE ALWAYS)');

fl_no_crash($pub, 'publisher');
fl_no_crash($sub, 'subscriber');
done_testing();
