# The privileges the update to 0.4.0 carries over survive a dump (issue 27, found reviewing the
# stats view's replacement).  The update replaces acquire and the stats view with its function,
# and grants the new objects what the database had granted on the old ones.  PostgreSQL records
# every grant an extension script makes as the object's initial privileges, which pg_dump leaves
# out: the database's own REVOKE and GRANT were lost in a dump, and a restore's fresh install let
# PUBLIC call acquire and read stats again.  The update now keeps a fresh install's initial
# privileges, so the dump holds the database's own (and from 17 on, the roles' shared
# dependencies on those initial privileges go with them: the application role can be dropped).
# Checked after update, dump and restore: a database that revoked PUBLIC's privileges and granted
# an application role, and one that left the defaults.
use strict;
use warnings FATAL => 'all';

use FencelockTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('dumpprivs', create => 0);
my $tmp = PostgreSQL::Test::Utils::tempdir;
my $acquire = 'fencelock.acquire(text, text, interval, interval, boolean, jsonb)';
my $privs_sql = qq{
	SELECT has_function_privilege('public', '$acquire', 'EXECUTE'),
	       has_function_privilege('app', '$acquire', 'EXECUTE'),
	       has_table_privilege('public', 'fencelock.stats', 'SELECT'),
	       has_table_privilege('app', 'fencelock.stats', 'SELECT'),
	       has_function_privilege('public', 'fencelock.read_stats()', 'EXECUTE'),
	       has_function_privilege('app', 'fencelock.read_stats()', 'EXECUTE')};

$node->safe_psql('postgres', 'CREATE ROLE app');
foreach my $case ([ 'custom', 'f|t|f|t|f|t' ], [ 'defaults', 't|t|t|t|t|t' ])
{
	my ($db, $want) = @$case;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, q{CREATE EXTENSION fencelock VERSION '0.3.0'});
	$node->safe_psql($db, q{
		REVOKE EXECUTE ON FUNCTION fencelock.acquire(text, text, interval),
		    fencelock.acquire(text, text, interval, interval),
		    fencelock.acquire(text, text, interval, interval, boolean) FROM PUBLIC;
		GRANT EXECUTE ON FUNCTION fencelock.acquire(text, text, interval),
		    fencelock.acquire(text, text, interval, interval),
		    fencelock.acquire(text, text, interval, interval, boolean) TO app;
		REVOKE SELECT ON fencelock.stats FROM PUBLIC;
		GRANT SELECT ON fencelock.stats TO app;
		REVOKE EXECUTE ON FUNCTION fencelock.read_stats() FROM PUBLIC;
		GRANT EXECUTE ON FUNCTION fencelock.read_stats() TO app;
	}) if $db eq 'custom';
	$node->safe_psql($db, 'ALTER EXTENSION fencelock UPDATE');
	is($node->safe_psql($db, $privs_sql), $want, "$db: privileges after the update");

	$node->command_ok([ 'pg_dump', '-d', $node->connstr($db), '-f', "$tmp/$db.sql" ],
		"$db: pg_dump");
	$node->safe_psql('postgres', "CREATE DATABASE ${db}_copy");
	$node->command_ok(
		[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr("${db}_copy"),
		  '-f', "$tmp/$db.sql" ],
		"$db: restored into a new database");
	is($node->safe_psql("${db}_copy", $privs_sql), $want, "$db: the same privileges once restored");
}
like(slurp_file("$tmp/custom.sql"), qr/REVOKE ALL ON FUNCTION fencelock\.acquire\(.*FROM PUBLIC/,
	'the dump revokes acquire from PUBLIC');
unlike(slurp_file("$tmp/defaults.sql"), qr/(GRANT|REVOKE) .* ON (FUNCTION|TABLE) fencelock\./,
	'a database that kept the defaults dumps no privileges of fencelock\'s');

# The application role can be dropped once its privileges are (on 17 and 18, stale dependencies
# on initial privileges it no longer had kept DROP OWNED and DROP ROLE from working).
$node->safe_psql($_, 'DROP OWNED BY app') foreach qw(custom custom_copy);
is($node->psql('postgres', 'DROP ROLE app'), 0, 'the application role can be dropped');

done_testing();
