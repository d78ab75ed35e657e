# Issue 35, defect 5: resource grants follow their roles.  resource_grants.grantee was a regrole
# with no dependency: DROP ROLE of a grantee left a grant revoke_resources could not remove
# (42704), and a dump restored into a cluster lacking one grantee failed the whole COPY of
# resource_grants, so every reserved prefix was open after the restore.
#
# Now a grant keeps its grantee's name, and grant_resources gives the grantee SELECT on
# fencelock.resource_grants, which PostgreSQL records in pg_shdepend: DROP ROLE is refused
# (2BP01, naming the table), DROP OWNED BY takes the privilege (no XX000), and a superuser's
# direct DELETE blocks DROP ROLE only until revoke_resources or DROP OWNED BY.  A grant whose
# name resolves to no role matches nobody, so its prefix stays reserved.  revoke_resources takes
# the name and removes any grant.
use strict;
use warnings FATAL => 'all';

use FencelockTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('grantee');
$node->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	CREATE ROLE ops LOGIN;
	CREATE ROLE other LOGIN;
	CREATE ROLE gone;
	CREATE ROLE deleted;
	GRANT USAGE ON SCHEMA fencelock TO app, ops, other;
	SELECT fencelock.grant_resources('order-', 'app');
	SELECT fencelock.grant_resources('ops-', 'ops');
	SELECT fencelock.grant_resources('gone-', 'gone');
	SELECT fencelock.grant_resources('del-', 'deleted')});

# psql's stderr for SQL, in VERBOSITY verbose.
sub err_of
{
	my ($n, $sql, @params) = @_;
	my ($out, $err) = ('', '');
	my $db = $n->name eq 'grantee' ? 'postgres' : 'copy';
	$n->psql($db, "\\set VERBOSITY verbose\n$sql", stdout => \$out, stderr => \$err,
		on_error_stop => 1, @params);
	return $err;
}

# DROP ROLE of a grantee is refused, naming where the grant is; DROP OWNED BY works (no XX000).
my $err = err_of($node, 'DROP ROLE gone');
like($err, qr/ERROR:  2BP01: role "gone" cannot be dropped because some objects depend on it/,
	'DROP ROLE of a grantee is refused (2BP01)');
like($err, qr/DETAIL:  privileges for table fencelock\.resource_grants/,
	'the detail names the table of resource grants');
is(err_of($node, 'DROP OWNED BY gone'), '', 'DROP OWNED BY the grantee succeeds');
is(err_of($node, 'DROP ROLE gone'), '', 'then DROP ROLE succeeds');
is($node->safe_psql('postgres', q{SELECT grantee FROM fencelock.resource_privileges WHERE prefix = 'gone-'}),
	'gone', 'the view still shows the grant by name');
like(err_of($node, q{SELECT fencelock.acquire('gone-1', 'o', '1 hour')}, extra_params => [ '-U', 'other' ]),
	qr/42501/, 'a grant whose role is gone keeps its prefix reserved');
is($node->safe_psql('postgres', q{SELECT fencelock.revoke_resources('gone-', 'gone')}), 't',
	'revoke_resources removes the grant of a dropped role');
is($node->safe_psql('postgres', q{SELECT fencelock.acquire('gone-3', 'o', '1 hour') IS NOT NULL},
		extra_params => [ '-U', 'other' ]),
	't', 'the prefix is open once revoked');

# A superuser's direct DELETE leaves the privilege, so DROP ROLE is still refused, but not for
# good: revoke_resources (or DROP OWNED BY) takes it.
$node->safe_psql('postgres', q{DELETE FROM fencelock.resource_grants WHERE grantee = 'deleted'});
like(err_of($node, 'DROP ROLE deleted'), qr/2BP01/, 'after a direct DELETE, DROP ROLE is refused');
is($node->safe_psql('postgres', q{SELECT fencelock.revoke_resources('del-', 'deleted')}), 'f',
	'revoke_resources finds no grant');
is(err_of($node, 'DROP ROLE deleted'), '', 'but takes the privilege: DROP ROLE succeeds');

# A renamed grantee: the grant keeps the old name and matches nobody (fail closed) until the
# prefix is granted to the new name.
$node->safe_psql('postgres', q{
	CREATE ROLE renamed LOGIN; GRANT USAGE ON SCHEMA fencelock TO renamed;
	SELECT fencelock.grant_resources('ren-', 'renamed');
	ALTER ROLE renamed RENAME TO renamed2});
like(err_of($node, q{SELECT fencelock.acquire('ren-1', 'r', '1 hour')}, extra_params => [ '-U', 'renamed2' ]),
	qr/42501/, 'a renamed grantee is refused its old name\'s grants');
$node->safe_psql('postgres', q{SELECT fencelock.grant_resources('ren-', 'renamed2')});
is($node->safe_psql('postgres', q{SELECT fencelock.acquire('ren-2', 'r', '1 hour') IS NOT NULL},
		extra_params => [ '-U', 'renamed2' ]),
	't', 'granted to the new name, it takes the prefix');
$node->safe_psql('postgres', q{
	SELECT fencelock.revoke_resources('ren-', 'renamed');
	SELECT fencelock.revoke_resources('ren-', 'renamed2');
	DROP OWNED BY renamed2; DROP ROLE renamed2});

# A restore into a cluster that lacks one grantee (ops): the COPY of resource_grants succeeds,
# the GRANT to the missing role fails, and ops-* stays reserved.
my $tmp = PostgreSQL::Test::Utils::tempdir;
$node->command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('postgres'), '-f', "$tmp/grants.dump" ],
	'pg_dump');
my $new = fl_node('grantee_restore', create => 0);
$new->safe_psql('postgres', q{CREATE ROLE app LOGIN; CREATE ROLE other LOGIN; CREATE DATABASE copy});
my ($out, $rerr) = ('', '');
IPC::Run::run([ 'pg_restore', '-d', $new->connstr('copy'), "$tmp/grants.dump" ],
	'>', \$out, '2>', \$rerr);
unlike($rerr, qr/COPY failed for table "resource_grants"|invalid input syntax|resource_grants.*does not exist/,
	'pg_restore: the COPY of resource_grants does not fail');
is($new->safe_psql('copy', 'SELECT prefix, grantee FROM fencelock.resource_privileges ORDER BY 1'),
	"ops-|ops\norder-|app",
	'the restored view shows every grant, the missing role\'s too');
# (The dump grants USAGE on the schema to every role in one statement, which the missing role
# makes fail for all: given again here.)
$new->safe_psql('copy', 'GRANT USAGE ON SCHEMA fencelock TO app, other');
my ($state) = fl_error($new, 'copy', q{SELECT fencelock.acquire('ops-1', 'o', '1 hour')},
	extra_params => [ '-U', 'other' ]);
is($state, '42501', 'the missing grantee\'s prefix stays reserved');
($state) = fl_error($new, 'copy', q{SELECT fencelock.acquire('order-1', 'o', '1 hour')},
	extra_params => [ '-U', 'other' ]);
is($state, '42501', 'another role is refused the present grantee\'s prefix');
is($new->safe_psql('copy', q{SELECT fencelock.acquire('order-1', 'a', '1 hour') IS NOT NULL},
		extra_params => [ '-U', 'app' ]),
	't', 'the present grantee takes its prefix');
# The missing role created afterwards holds the grant (grants name roles); granting again gives
# it the privilege the failed GRANT did not, and DROP ROLE is refused again.
$new->safe_psql('copy', 'CREATE ROLE ops LOGIN; GRANT USAGE ON SCHEMA fencelock TO ops');
is($new->safe_psql('copy', q{SELECT fencelock.acquire('ops-2', 'p', '1 hour') IS NOT NULL},
		extra_params => [ '-U', 'ops' ]),
	't', 'the role created afterwards under the grant\'s name takes its prefix');
is($new->safe_psql('copy', q{SELECT fencelock.grant_resources('ops-', 'ops')}), 'f',
	'granting again finds the grant');
$new->safe_psql('copy', 'REVOKE USAGE ON SCHEMA fencelock FROM ops');
like(err_of($new, 'DROP ROLE ops'), qr/privileges for table fencelock\.resource_grants/,
	'and ties the role to it again: DROP ROLE is refused');

fl_no_crash($node, 'grantee');
fl_no_crash($new, 'grantee_restore');
done_testing();
