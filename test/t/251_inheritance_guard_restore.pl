# Issue 20, defect 4: the inheritance guard checks only what a command did, refuses a fence
# trigger on a parent whose inheritance children lack it, and with check_function_bodies off (as
# pg_dump's scripts and pg_restore set it) only warns.  Shown here across the tools:
#   - a database that 0.3.0's guard had trapped (a child without its parent's fence trigger made
#     every CREATE TABLE and ALTER TABLE fail) is freed by ALTER EXTENSION ... UPDATE;
#   - pg_restore (custom format, two jobs, --exit-on-error; and again with --clean), and psql with
#     a plain dump, restore a parent and child whose triggers come in the order that broke 0.3.0's
#     guard: the parent's fence trigger first, then an ALTER TABLE of the child (a disabled
#     trigger), then the child's fence trigger; the restored database is guarded as before.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use FencelockTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('inh_restore', create => 0);

# --- a database trapped by 0.3.0's guard, then updated ---
$node->safe_psql('postgres', 'CREATE DATABASE trapped');
my ($out, $err) = ('', '');
$node->psql('trapped', q{
	CREATE EXTENSION fencelock VERSION '0.3.0';
	CREATE TABLE tp (id int, last_fence bigint);
	CREATE TABLE tc () INHERITS (tp);
	CREATE TRIGGER fence BEFORE UPDATE ON tp FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
}, stdout => \$out, stderr => \$err, on_error_stop => 1);
like($err, qr/WARNING:  inheritance child "public.tc" of table "public.tp" lacks its fence trigger/,
	'0.3.0 lets a fence trigger onto a parent whose child lacks it, with a warning');
my ($state) = fl_error($node, 'trapped', 'CREATE TABLE unrelated (id int)');
is($state, '55000', '0.3.0: from then on an unrelated CREATE TABLE fails');
$node->safe_psql('trapped', 'ALTER EXTENSION fencelock UPDATE');
is($node->safe_psql('trapped', "SELECT extversion FROM pg_extension WHERE extname = 'fencelock'"),
	'0.4.0', 'the update to 0.4.0 runs in the trapped database');
is(join('|', fl_error($node, 'trapped', q{
	CREATE TABLE unrelated (id int);
	ALTER TABLE unrelated ADD COLUMN v text;
	CREATE TEMP TABLE unrelated_tmp (id int);
})), '', 'after the update, DDL on other tables works again');
($state) = fl_error($node, 'trapped', 'CREATE TABLE tc2 () INHERITS (tp)');
is($state, '55000', '... and a new child without the trigger is still refused');

# --- dump and restore, the parent's trigger before the child's ---
$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', q{
	CREATE EXTENSION fencelock;
	CREATE TABLE a_parent (id int, last_fence bigint);
	CREATE TRIGGER fence BEFORE UPDATE ON a_parent FOR EACH ROW
	    EXECUTE FUNCTION fencelock.fence_trigger();
	CREATE TABLE b_child (id int, last_fence bigint);
	CREATE TRIGGER z_fence BEFORE UPDATE ON b_child FOR EACH ROW
	    EXECUTE FUNCTION fencelock.fence_trigger();
	CREATE FUNCTION audit() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
	CREATE TRIGGER m_audit BEFORE UPDATE ON b_child FOR EACH ROW EXECUTE FUNCTION audit();
	ALTER TABLE b_child DISABLE TRIGGER m_audit;
	ALTER TABLE b_child INHERIT a_parent;
	INSERT INTO b_child VALUES (1, 5);
});
my $triggers = q{SELECT string_agg(tgrelid::regclass || '.' || tgname || ':' || tgenabled::text, ' '
                   ORDER BY tgrelid::regclass::text, tgname) FROM pg_trigger WHERE NOT tgisinternal};
my $want = $node->safe_psql('src', $triggers);
is($want, 'a_parent.fence:O b_child.m_audit:D b_child.z_fence:O', 'the source database');

my $dump = $node->basedir . '/src.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('src') ],
	'pg_dump (custom format)');
my ($rc, $list) = (0, '');
IPC::Run::run([ 'pg_restore', '-l', $dump ], '>', \$list);
like($list, qr/TRIGGER public a_parent fence.*TRIGGER public b_child m_audit.*TRIGGER public b_child z_fence/s,
	'the dump restores the parent\'s fence trigger, then the child\'s disabled trigger, then its fence trigger');

sub restored_ok
{
	my ($db, $what) = @_;
	is($node->safe_psql($db, $triggers), $want, "$what: every trigger is back, as it was");
	my ($s) = fl_error($node, $db, 'CREATE TABLE late () INHERITS (a_parent)');
	is($s, '55000', "$what: a new child without the trigger is refused");
	is(join('|', fl_error($node, $db, 'CREATE TABLE other (id int); DROP TABLE other')), '',
		"$what: other DDL works");
}

$node->safe_psql('postgres', 'CREATE DATABASE dst_custom');
my ($rout, $rerr) = ('', '');
$rc = IPC::Run::run(
	[ 'pg_restore', '--exit-on-error', '-j', '2', '-d', $node->connstr('dst_custom'), $dump ],
	'>', \$rout, '2>', \$rerr);
ok($rc, 'pg_restore -j 2 --exit-on-error succeeds') or diag($rerr);
restored_ok('dst_custom', 'pg_restore');

$rc = IPC::Run::run(
	[ 'pg_restore', '--exit-on-error', '--clean', '--if-exists', '-d',
		$node->connstr('dst_custom'), $dump ],
	'>', \$rout, '2>', \$rerr);
ok($rc, 'pg_restore --clean over the restored database succeeds') or diag($rerr);
restored_ok('dst_custom', 'pg_restore --clean');

$node->safe_psql('postgres', 'CREATE DATABASE dst_plain');
my $plain = '';
IPC::Run::run([ 'pg_dump', '-d', $node->connstr('src') ], '>', \$plain);
$rc = IPC::Run::run(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('dst_plain') ],
	'<', \$plain, '>', \$rout, '2>', \$rerr);
ok($rc, 'a plain dump restores with psql and ON_ERROR_STOP') or diag($rerr);
like($rerr, qr/WARNING:  inheritance child "public.b_child" of table "public.a_parent" lacks its fence trigger "fence"/,
	'... warning while the child has not got its trigger yet');
restored_ok('dst_plain', 'psql');

fl_no_crash($node, 'restores');
$node->stop;
done_testing();
