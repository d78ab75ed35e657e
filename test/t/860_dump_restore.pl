# pg_dump and restore: fencelock.lease and fencelock.fence_floor are extension configuration
# tables, so a dump keeps every lease and fence, and the floor left by purge.  Restored into a
# new database (plain format, psql) and into a new cluster (custom format, pg_restore): the
# leases are the same, held leases are still held, and every new fence is higher than before,
# also for a resource that was purged before the dump.
use strict;
use warnings FATAL => 'all';

use FencelockTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('dump');
$node->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	GRANT USAGE ON SCHEMA fencelock TO app;
	CREATE TABLE orders (id int PRIMARY KEY, status text, last_fence bigint);
	CREATE TRIGGER fence BEFORE UPDATE ON orders FOR EACH ROW
	    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
	INSERT INTO orders VALUES (1, 'open', NULL);
});
$node->safe_psql('postgres', q{
	SELECT fencelock.acquire('dr:held', 'w1', '1 hour');
	SELECT fencelock.release('dr:held', 'w1');
	SELECT fencelock.acquire('dr:held', 'w2', '1 hour');
	SELECT fencelock.release('dr:held', 'w2');
	SELECT fencelock.acquire('dr:held', 'holder', '1 hour');            -- 3, held
	SELECT fencelock.acquire('dr:free', 'w1', '1 hour');
	SELECT fencelock.release('dr:free', 'w1');
	SELECT fencelock.acquire('dr:free', 'w2', '1 hour');                -- 2, released below
	UPDATE orders SET status = 'closed', last_fence = 3 WHERE id = 1;
});
# dr:gone reaches fence 5 and is purged: the floor keeps 5.
$node->safe_psql('postgres', join("\n",
	map { "SELECT fencelock.acquire('dr:gone', 'w$_', '1 hour'); SELECT fencelock.release('dr:gone', 'w$_');" } 1 .. 5));
is($node->safe_psql('postgres', "SELECT fencelock.current_fence('dr:gone')"), '5', 'dr:gone reached fence 5');
is($node->safe_psql('postgres', "SELECT fencelock.purge('0')"), '1', 'purge removed the free lease of dr:gone');
is($node->safe_psql('postgres', "SELECT fencelock.current_fence('dr:gone')"), '', 'dr:gone is purged');
$node->safe_psql('postgres', "SELECT fencelock.release('dr:free', 'w2')");
# A lease taken by a non-superuser role: the view shows its owner token to that role.
$node->safe_psql('postgres', "SELECT fencelock.acquire('dr:app', 'app-token', '1 hour')",
	extra_params => [ '-U', 'app' ]);
# Resource privileges (issue 22): 'dr:app' names are app's alone; the grant is dumped by role name.
$node->safe_psql('postgres', q{
	CREATE ROLE filler;
	SELECT fencelock.grant_resources('dr:app', 'app')});

my $digest = fl_lease_digest($node);
my $leases_sql = "SELECT resource, owner, fence, state, holder FROM fencelock.leases ORDER BY resource";
my $leases = $node->safe_psql('postgres', $leases_sql);
is($leases, "dr:app|app-token|6|held|app\ndr:free||2|free|postgres\ndr:held|holder|3|held|postgres",
	'before the dump: two held leases and a free one (its holder is the role of its last grant)');

# The checks on a restored copy.
sub check_restored
{
	my ($n, $db, $what) = @_;
	is($n->safe_psql($db, $leases_sql), $leases, "$what: the leases are the same, holder roles included");
	is($n->safe_psql($db, "SELECT resource, fence, expires_at > now() FROM fencelock.lease ORDER BY 1"),
		"dr:app|6|t\ndr:free|2|f\ndr:held|3|t", "$what: the lease rows' resources, fences and deadlines are the same");
	is($n->safe_psql($db, 'SELECT floor FROM fencelock.fence_floor'), '5', "$what: the fence floor is kept");
	is($n->safe_psql($db, "SELECT owner FROM fencelock.leases WHERE resource = 'dr:app'",
			extra_params => [ '-U', 'app' ]),
		'app-token', "$what: role app still sees the owner token of its own lease");
	is($n->safe_psql($db, q{
		SELECT fencelock.acquire('dr:held', 'intruder') IS NULL,
		       fencelock.renew('dr:held', 'holder', '1 hour'),
		       fencelock.acquire('dr:free', 'w3'),
		       fencelock.acquire('dr:gone', 'w6'),
		       fencelock.acquire('dr:new', 'w1')}),
		't|t|3|6|6',
		"$what: held lease still held and renewable; new fences above the old ones and above the floor");
	is($n->safe_psql($db, q{
		SELECT fencelock.release('dr:held', 'holder'), fencelock.acquire('dr:held', 'next')}),
		't|4', "$what: the held lease's next grant is fence 4");
	my ($state) = fl_error($n, $db, 'UPDATE orders SET last_fence = 2 WHERE id = 1');
	is($state, 'FL001', "$what: the fence trigger still refuses an older fence");
	is($n->safe_psql($db, 'SELECT prefix, grantee FROM fencelock.resource_privileges'),
		'dr:app|app', "$what: the resource grant is kept, by role name");
	is($n->safe_psql($db, "SELECT fencelock.renew('dr:app', 'app-token', '1 hour')",
			extra_params => [ '-U', 'app' ]),
		't', "$what: the grantee still renews its lease");
	($state) = fl_error($n, $db, "SET ROLE filler; SELECT fencelock.acquire('dr:app-2', 'f')");
	is($state, '42501', "$what: another role is still refused the granted names");
}

# Into a new database of the same cluster, plain format through psql.
my $tmp = PostgreSQL::Test::Utils::tempdir;
$node->command_ok([ 'pg_dump', '-d', $node->connstr('postgres'), '-f', "$tmp/plain.sql" ],
	'pg_dump, plain format');
like(slurp_file("$tmp/plain.sql"), qr/COPY fencelock\.lease /, 'the dump holds the lease table data');
$node->safe_psql('postgres', 'CREATE DATABASE copy1');
$node->command_ok(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('copy1'), '-f', "$tmp/plain.sql" ],
	'restore into a new database');
is(fl_lease_digest($node, 'copy1'), $digest, 'new database: lease and floor rows are identical');
check_restored($node, 'copy1', 'new database');

# Into a new cluster, custom format through pg_restore.  Roles are not in a database's dump:
# create app first, as pg_dumpall --roles-only would.  The new cluster gives it another OID.
# fencelock.lease.holder is an oid column, so the dump carries the old cluster's OID: the two
# holder checks below fail until holder is dumped by name (e.g. a regrole column).
$node->command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('postgres'), '-f', "$tmp/custom.dump" ],
	'pg_dump, custom format');
my $new = fl_node('restore', create => 0);
$new->safe_psql('postgres', q{
	CREATE ROLE filler; CREATE ROLE app LOGIN; CREATE DATABASE copy2});
$new->command_ok([ 'pg_restore', '-d', $new->connstr('copy2'), "$tmp/custom.dump" ],
	'pg_restore into a new cluster');
check_restored($new, 'copy2', 'new cluster');

# Issue 20, defect 10: an older dump.  The old database goes on granting after the dump was
# taken: dr:free twice more (fences 3 and 4), and dr:late, a resource the dump never saw (6,
# above the floor).  Restored, the dump knows none of it: its next grant of dr:free would be 3
# again, a fence already issued (shown in a transaction rolled back, which issues nothing).
# README's procedure: before letting clients in, raise_fences() above every fence the old
# cluster can have issued; its timeline T gives the bound T << 48.
$node->safe_psql('postgres', q{
	SELECT fencelock.acquire('dr:free', 'late-1', '1 hour'); SELECT fencelock.release('dr:free', 'late-1');
	SELECT fencelock.acquire('dr:free', 'late-2', '1 hour');
	SELECT fencelock.acquire('dr:late', 'late-1', '1 hour');
});
my %after_dump = map { $_->[0] => $_->[1] } fl_parse_rows($node->safe_psql('postgres',
	"SELECT resource, fence FROM fencelock.lease WHERE resource IN ('dr:free', 'dr:late')"));
is_deeply(\%after_dump, { 'dr:free' => 4, 'dr:late' => 6 }, 'the old database issued fences after the dump');
my $max_after = $node->safe_psql('postgres', 'SELECT max(fence) FROM fencelock.lease');

$node->safe_psql('postgres', 'CREATE DATABASE copy3');
$node->command_ok(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('copy3'), '-f', "$tmp/plain.sql" ],
	'older dump: restored into a new database');
is($node->safe_psql('copy3', q{
	BEGIN;
	SELECT fencelock.acquire('dr:free', 'probe');
	ROLLBACK;}),
	'3', 'older dump, the limit: without raise_fences the next grant repeats fence 3, issued after the dump');

my $timeline = $node->safe_psql('postgres', 'SELECT timeline_id FROM pg_control_checkpoint()');
is($node->safe_psql('copy3', "SELECT fencelock.raise_fences(${timeline}::bigint << 48)"),
	'3', "raise_fences(T << 48) with the old cluster's timeline T = $timeline raised every lease row");
is($node->safe_psql('copy3', q{
	SELECT fencelock.renew('dr:held', 'holder', '1 hour'), fencelock.renew('dr:app', 'app-token', '1 hour')}),
	'f|f', 'the holders from before the dump have lost their leases');
my ($free, $late, $held) = split /\|/, $node->safe_psql('copy3', q{
	SELECT fencelock.acquire('dr:free', 'new-1'), fencelock.acquire('dr:late', 'new-1'),
	       fencelock.acquire('dr:held', 'new-1')});
cmp_ok($free, '>', $max_after, "dr:free's next fence $free exceeds every fence the old database issued");
cmp_ok($late, '>', $max_after, "so does that of dr:late, which the dump lacks ($late)");
cmp_ok($held, '>', 3, "and that of dr:held ($held)");
my ($state) = fl_error($node, 'copy3', "SELECT fencelock.assert_fence('dr:held', 3)");
is($state, 'FL001', 'the fence held before the dump is refused');

fl_no_crash($node, 'dump');
fl_no_crash($new, 'restore');
done_testing();
