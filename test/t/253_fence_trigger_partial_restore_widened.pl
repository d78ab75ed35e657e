# Issue 35, defect 4 (the restore path): a 0.3.0 database may hold a fence trigger declared with
# UPDATE OF or WHEN, which lets a stale write it skips lower the stored fence.  ALTER EXTENSION
# UPDATE refuses while one exists (906), but a dump of it restored into a fresh database with
# 0.4.0 goes around the update: pg_dump's scripts and pg_restore set check_function_bodies off,
# where CREATE TRIGGER cannot be refused without failing the restore.  There the event trigger
# creates the trigger again without the column list and the WHEN condition (same name, events,
# arguments, enabled state; a partitioned table's clones follow), so the restore completes and
# the stale write is refused (FL001).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use FencelockTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('partial_restore', create => 0);

$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', q{
	CREATE EXTENSION fencelock VERSION '0.3.0';
	CREATE TABLE d4 (id int PRIMARY KEY, last_fence bigint, note text);
	INSERT INTO d4 VALUES (1, 10, 'x');
	CREATE TRIGGER fence BEFORE UPDATE OF note ON d4 FOR EACH ROW
	    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
	CREATE TABLE d4w (id int PRIMARY KEY, last_fence bigint, note text);
	INSERT INTO d4w VALUES (1, 10, 'x');
	CREATE TRIGGER fence BEFORE UPDATE ON d4w FOR EACH ROW
	    WHEN (NEW.note IS DISTINCT FROM OLD.note)
	    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
	ALTER TABLE d4w ENABLE ALWAYS TRIGGER fence;
	CREATE TABLE d4p (id int, last_fence bigint, note text) PARTITION BY LIST (id);
	CREATE TABLE d4p1 PARTITION OF d4p FOR VALUES IN (1);
	INSERT INTO d4p VALUES (1, 10, 'x');
	CREATE TRIGGER fence BEFORE UPDATE OF note ON d4p FOR EACH ROW
	    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
});
is($node->safe_psql('src', "SELECT extversion FROM pg_extension WHERE extname = 'fencelock'"),
	'0.3.0', 'the source database is at 0.3.0');
is(join('|', fl_error($node, 'src', 'BEGIN; UPDATE d4 SET last_fence = 5 WHERE id = 1; ROLLBACK')), '',
	'0.3.0: the stale write the trigger skips goes through');

my $triggers = q{SELECT string_agg(tgrelid::regclass || '.' || tgname || ':' || tgenabled::text
                   || ':' || (tgattr::text = '') || ':' || (tgqual IS NULL),
                   ' ' ORDER BY tgrelid::regclass::text, tgname) FROM pg_trigger WHERE NOT tgisinternal};
is($node->safe_psql('src', $triggers),
	'd4.fence:O:false:true d4p.fence:O:false:true d4p1.fence:O:false:true d4w.fence:A:true:false',
	'the source database: triggers with UPDATE OF or WHEN');
my $whole = 'd4.fence:O:true:true d4p.fence:O:true:true d4p1.fence:O:true:true d4w.fence:A:true:true';

sub widened_ok
{
	my ($db, $what, $log_from) = @_;
	my $log = substr(slurp_file($node->logfile), $log_from);
	is($node->safe_psql($db, "SELECT extversion FROM pg_extension WHERE extname = 'fencelock'"),
		'0.4.0', "$what: restored into 0.4.0");
	like($log,
		qr/WARNING:  fence trigger "fence" on table "public.d4" was created again without UPDATE OF/,
		"$what: warns that it widened the trigger (server log)");
	is($node->safe_psql($db, $triggers), $whole,
		"$what: every fence trigger is back without UPDATE OF and WHEN, enabled as it was");
	for my $t ('d4', 'd4w', 'd4p')
	{
		my ($s) = fl_error($node, $db, "UPDATE $t SET last_fence = 5 WHERE id = 1");
		is($s, 'FL001', "$what: the stale write to $t is refused");
	}
	is($node->safe_psql($db, 'SELECT string_agg(last_fence::text, \',\') FROM '
			. '(SELECT last_fence FROM d4 UNION ALL SELECT last_fence FROM d4w '
			. 'UNION ALL SELECT last_fence FROM d4p) f'),
		'10,10,10', "$what: every fence stays 10");
}

my $dump = $node->basedir . '/src.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('src') ],
	'pg_dump (custom format)');
$node->safe_psql('postgres', 'CREATE DATABASE dst_custom');
my $log_from = -s $node->logfile;
my ($rout, $rerr) = ('', '');
my $rc = IPC::Run::run(
	[ 'pg_restore', '--exit-on-error', '-j', '2', '-d', $node->connstr('dst_custom'), $dump ],
	'>', \$rout, '2>', \$rerr);
ok($rc, 'pg_restore -j 2 --exit-on-error completes') or diag($rerr);
widened_ok('dst_custom', 'pg_restore', $log_from);

$node->safe_psql('postgres', 'CREATE DATABASE dst_plain');
$log_from = -s $node->logfile;
my $plain = '';
IPC::Run::run([ 'pg_dump', '-d', $node->connstr('src') ], '>', \$plain);
$rc = IPC::Run::run(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('dst_plain') ],
	'<', \$plain, '>', \$rout, '2>', \$rerr);
ok($rc, 'a plain dump restores with psql and ON_ERROR_STOP') or diag($rerr);
like($rerr, qr/WARNING:  fence trigger "fence" on table "public.d4p" was created again without UPDATE OF/,
	'psql shows the warning');
widened_ok('dst_plain', 'psql', $log_from);

fl_no_crash($node, 'restores');
$node->stop;
done_testing();
