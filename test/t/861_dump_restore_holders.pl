# pg_dump and restore of shares and permits (issue 27): fencelock.lease_holder is an extension
# configuration table, like fencelock.lease, so a dump keeps a group and its holders.  Restored
# into a new database, the holders are the same, still held: a writer is still busy, each holder
# renews and releases its own, and the writer's grant after the last release is above every
# holder's fence.
use strict;
use warnings FATAL => 'all';

use FencelockTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('dumpholders');
$node->safe_psql('postgres', q{
	SELECT fencelock.acquire_shared('dh:cfg', 'reader-1', '1 hour');
	SELECT fencelock.acquire_shared('dh:cfg', 'reader-2', '1 hour', value => '{"n": 2}');
	SELECT fencelock.acquire_permit('dh:api', 'job-1', '1 hour', 2);
	SELECT fencelock.acquire_permit('dh:api', 'job-2', '1 hour', 2);
});
my $holders_sql = "SELECT resource, owner, mode, slot, permits, fence, state, value FROM "
  . "fencelock.lease_holders ORDER BY resource, fence";
my $holders = $node->safe_psql('postgres', $holders_sql);
is($holders,
	"dh:api|job-1|permit|1|2|1|held|\ndh:api|job-2|permit|2|2|2|held|\n"
	  . "dh:cfg|reader-1|shared|||1|held|\ndh:cfg|reader-2|shared|||2|held|{\"n\": 2}",
	'before the dump: two shares and two permits');

my $tmp = PostgreSQL::Test::Utils::tempdir;
$node->command_ok([ 'pg_dump', '-d', $node->connstr('postgres'), '-f', "$tmp/plain.sql" ],
	'pg_dump, plain format');
like(slurp_file("$tmp/plain.sql"), qr/COPY fencelock\.lease_holder /,
	'the dump holds the holder table data');
$node->safe_psql('postgres', 'CREATE DATABASE copy1');
$node->command_ok(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('copy1'), '-f', "$tmp/plain.sql" ],
	'restore into a new database');
is($node->safe_psql('copy1', $holders_sql), $holders, 'restored: the same holders, still held');
is($node->safe_psql('copy1', q{
	SELECT fencelock.acquire('dh:cfg', 'writer', '1 hour') IS NULL,
	       fencelock.acquire_permit('dh:api', 'job-3', '1 hour', 2) IS NULL,
	       fencelock.renew('dh:cfg', 'reader-1', '1 hour'),
	       fencelock.release('dh:cfg', 'reader-1'),
	       fencelock.release('dh:cfg', 'reader-2'),
	       fencelock.acquire('dh:cfg', 'writer', '1 hour'),
	       fencelock.release('dh:api', 'job-1'),
	       fencelock.acquire_permit('dh:api', 'job-3', '1 hour', 2)}),
	't|t|t|t|t|3|t|3',
	'restored: writer and a third permit busy; holders renew and release; the next fences are higher');

done_testing();
