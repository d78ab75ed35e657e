# Task tables survive pg_dump and restore: the mapping in fencelock.task_tables (an extension
# configuration table, restored before the indexes exist), the fence trigger and the claim index
# come back, claims go on with fences above every fence issued before the dump, and a worker
# that claimed before the dump is still refused after the restore.
use strict;
use warnings FATAL => 'all';

use FencelockTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('claim_dump');

$node->safe_psql('postgres', q{
	CREATE SCHEMA app;
	CREATE TABLE app.jobs (id int PRIMARY KEY, status text NOT NULL DEFAULT 'ready',
	                       lease_owner text, lease_until timestamptz,
	                       attempt int NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0,
	                       priority int NOT NULL DEFAULT 0, note text);
	SELECT fencelock.enable_tasks('app.jobs', state_col => 'status');
	INSERT INTO app.jobs (id) SELECT generate_series(1, 3);
});
my $fence_before = $node->safe_psql('postgres',
	"SELECT fence FROM fencelock.claim(NULL::app.jobs, 'before-dump', '1 hour')");
is($fence_before, '1', 'a claim before the dump gets fence 1');

my $dump = $node->basedir . '/claim.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('postgres') ],
	'pg_dump');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok(
	[ 'pg_restore', '--exit-on-error', '-d', $node->connstr('restored'), $dump ],
	'pg_restore, with the mapping row restored before the index');

is( $node->safe_psql('restored',
		"SELECT tbl, state_col, claim_index FROM fencelock.task_tables"),
	'app.jobs|status|jobs_claim_idx',
	'the mapping came back');
is( $node->safe_psql('restored',
		"SELECT count(*) FROM pg_trigger WHERE tgrelid = 'app.jobs'::regclass"
		  . " AND tgname = 'fencelock_fence'"),
	'1', 'the fence trigger came back');

# Claims go on; the job claimed before the dump is still leased, its worker still fenced.
is( $node->safe_psql('restored',
		"SELECT string_agg(id || ':' || fence, ',' ORDER BY id)"
		  . " FROM fencelock.claim(NULL::app.jobs, 'after-restore', '1 minute', 10)"),
	'2:1,3:1', 'the other jobs are claimed after the restore');
$node->safe_psql('restored',
	"UPDATE app.jobs SET lease_until = now() - interval '1 s', fence = fence WHERE id = 1");
is( $node->safe_psql('restored',
		"SELECT id || ':' || fence FROM fencelock.claim(NULL::app.jobs, 'after-restore')"),
	'1:2', 'the lapsed job is taken over with a higher fence');
my ($state) = fl_error($node, 'restored',
	"UPDATE app.jobs SET note = 'late', fence = $fence_before WHERE id = 1");
is($state, 'FL001', "the worker from before the dump is refused");

# enable_tasks on the restored table keeps the restored index.
my $index = $node->safe_psql('restored', "SELECT 'app.jobs_claim_idx'::regclass::oid");
$node->safe_psql('restored', "SELECT fencelock.enable_tasks('app.jobs', state_col => 'status')");
is($node->safe_psql('restored', "SELECT 'app.jobs_claim_idx'::regclass::oid"),
	$index, 'enable_tasks again keeps the restored index');

$node->stop;
done_testing();
