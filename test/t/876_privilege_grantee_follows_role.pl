# Issue 35, defect 5: resource grants follow their roles.  resource_grants.grantee was a regrole
# with no dependency: DROP ROLE of a grantee left a grant revoke_resources could not remove
# (42704), and a dump restored into a cluster lacking one grantee failed the whole COPY of
# resource_grants, so every reserved prefix was open after the restore.
#
# Now a grant keeps its grantee's name, and grant_resources gives the grantee a marker, SELECT on
# column grantee of fencelock.resource_grants, which PostgreSQL records in pg_shdepend: DROP ROLE
# is refused (2BP01, naming the column), DROP OWNED BY takes the marker (no XX000), and a
# superuser's direct DELETE blocks DROP ROLE only until revoke_resources or DROP OWNED BY.  A grant
# matches the role of its name only if that role holds the marker itself, so a name that resolves
# to no role, or to a role created later under a dropped or renamed grantee's name, matches nobody:
# its prefix stays reserved until grant_resources is run again (the review of c909d79: such a role
# took the prefix).  revoke_resources takes the name, removes any grant, and takes only the
# marker: a table-level SELECT a DBA granted stays.
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
	CREATE ROLE creator LOGIN CREATEROLE;
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
like($err, qr/DETAIL:  privileges for column grantee of table fencelock\.resource_grants/,
	'the detail names the marker: the column grantee of the table of resource grants');
is(err_of($node, 'DROP OWNED BY gone'), '', 'DROP OWNED BY the grantee succeeds');
is(err_of($node, 'DROP ROLE gone'), '', 'then DROP ROLE succeeds');
is($node->safe_psql('postgres', q{SELECT grantee FROM fencelock.resource_privileges WHERE prefix = 'gone-'}),
	'gone', 'the view still shows the grant by name');
like(err_of($node, q{SELECT fencelock.acquire('gone-1', 'o', '1 hour')}, extra_params => [ '-U', 'other' ]),
	qr/42501/, 'a grant whose role is gone keeps its prefix reserved');
# A role with CREATEROLE (no superuser) creates a role under the dropped grantee's name: it holds
# nothing until grant_resources is run again.
$node->safe_psql('postgres', 'CREATE ROLE gone LOGIN', extra_params => [ '-U', 'creator' ]);
$node->safe_psql('postgres', 'GRANT USAGE ON SCHEMA fencelock TO gone');
my ($state) = fl_error($node, 'postgres', q{SELECT fencelock.acquire('gone-1', 'o', '1 hour')},
	extra_params => [ '-U', 'gone' ]);
is($state, '42501', 'a role created later under the dropped grantee\'s name is refused its prefix');
is($node->safe_psql('postgres', q{SELECT fencelock.grant_resources('gone-', 'gone')}), 'f',
	'granting to it again finds the grant');
is($node->safe_psql('postgres', q{SELECT fencelock.acquire('gone-2', 'o', '1 hour') IS NOT NULL},
		extra_params => [ '-U', 'gone' ]),
	't', 'and gives it the prefix');
is($node->safe_psql('postgres', q{SELECT fencelock.revoke_resources('gone-', 'gone')}), 't',
	'revoke_resources removes the grant of a dropped role');
is($node->safe_psql('postgres', q{SELECT fencelock.acquire('gone-3', 'o', '1 hour') IS NOT NULL},
		extra_params => [ '-U', 'other' ]),
	't', 'the prefix is open once revoked');
is(err_of($node, 'REVOKE USAGE ON SCHEMA fencelock FROM gone; DROP ROLE gone'), '',
	'revoke_resources took the new role\'s marker: DROP ROLE succeeds');

# A superuser's direct DELETE leaves the privilege, so DROP ROLE is still refused, but not for
# good: revoke_resources (or DROP OWNED BY) takes it.
$node->safe_psql('postgres', q{DELETE FROM fencelock.resource_grants WHERE grantee = 'deleted'});
like(err_of($node, 'DROP ROLE deleted'), qr/2BP01/, 'after a direct DELETE, DROP ROLE is refused');
is($node->safe_psql('postgres', q{SELECT fencelock.revoke_resources('del-', 'deleted')}), 'f',
	'revoke_resources finds no grant');
is(err_of($node, 'DROP ROLE deleted'), '', 'but takes the privilege: DROP ROLE succeeds');

# A renamed grantee: the grant keeps the old name and matches nobody (fail closed), neither the
# renamed role nor a role created later under the old name, until the prefix is granted again.
$node->safe_psql('postgres', q{
	CREATE ROLE renamed LOGIN; GRANT USAGE ON SCHEMA fencelock TO renamed;
	SELECT fencelock.grant_resources('ren-', 'renamed');
	ALTER ROLE renamed RENAME TO renamed2});
like(err_of($node, q{SELECT fencelock.acquire('ren-1', 'r', '1 hour')}, extra_params => [ '-U', 'renamed2' ]),
	qr/42501/, 'a renamed grantee is refused its old name\'s grants');
$node->safe_psql('postgres', 'CREATE ROLE renamed LOGIN', extra_params => [ '-U', 'creator' ]);
$node->safe_psql('postgres', 'GRANT USAGE ON SCHEMA fencelock TO renamed');
($state) = fl_error($node, 'postgres', q{SELECT fencelock.acquire('ren-1', 'r', '1 hour')},
	extra_params => [ '-U', 'renamed' ]);
is($state, '42501', 'a role created later under the old name is refused the renamed grantee\'s prefix');
is(err_of($node, 'REVOKE USAGE ON SCHEMA fencelock FROM renamed; DROP ROLE renamed'), '',
	'the new role of the old name holds no marker: DROP ROLE succeeds');
like(err_of($node, 'DROP ROLE renamed2'), qr/privileges for column grantee of table fencelock\.resource_grants/,
	'the renamed grantee keeps its marker: DROP ROLE refused');
$node->safe_psql('postgres', q{SELECT fencelock.grant_resources('ren-', 'renamed2')});
is($node->safe_psql('postgres', q{SELECT fencelock.acquire('ren-2', 'r', '1 hour') IS NOT NULL},
		extra_params => [ '-U', 'renamed2' ]),
	't', 'granted to the new name, it takes the prefix');
$node->safe_psql('postgres', q{
	SELECT fencelock.revoke_resources('ren-', 'renamed');
	SELECT fencelock.revoke_resources('ren-', 'renamed2');
	DROP OWNED BY renamed2; DROP ROLE renamed2});

# revoke_resources takes the marker only: a table-level SELECT a DBA granted stays, and it is no
# marker (a role named by a grant, holding only it, is refused).
$node->safe_psql('postgres', q{
	CREATE ROLE mon LOGIN; GRANT USAGE ON SCHEMA fencelock TO mon;
	GRANT SELECT ON fencelock.resource_grants TO mon;
	SELECT fencelock.grant_resources('mon-', 'mon')});
is($node->safe_psql('postgres', q{SELECT fencelock.acquire('mon-1', 'm', '1 hour') IS NOT NULL},
		extra_params => [ '-U', 'mon' ]),
	't', 'the grantee with a table-level SELECT takes its prefix');
is($node->safe_psql('postgres', q{SELECT fencelock.revoke_resources('mon-', 'mon')}), 't',
	'revoke_resources removes the grant');
is($node->safe_psql('postgres',
		q{SELECT has_table_privilege('mon', 'fencelock.resource_grants', 'SELECT')}),
	't', 'the DBA\'s table-level SELECT survives revoke_resources');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_attribute a, aclexplode(a.attacl) x
	 WHERE a.attrelid = 'fencelock.resource_grants'::regclass AND a.attname = 'grantee'
	   AND x.grantee = 'mon'::regrole}),
	'0', 'the marker is gone');
$node->safe_psql('postgres', q{
	INSERT INTO fencelock.resource_grants VALUES ('mon-', 'mon')});
($state) = fl_error($node, 'postgres', q{SELECT fencelock.acquire('mon-2', 'm', '1 hour')},
	extra_params => [ '-U', 'mon' ]);
is($state, '42501', 'a grant row for a role holding only a table-level SELECT matches nobody');
$node->safe_psql('postgres', q{SELECT fencelock.revoke_resources('mon-', 'mon')});

# The marker decides in a session whose cache is built: a GRANT or REVOKE of it in another session
# drops that cache (pg_attribute's row changes: a relcache invalidation of the table).
$node->safe_psql('postgres', q{SELECT fencelock.grant_resources('mon-', 'mon')});
my $mon = $node->background_psql('postgres', on_error_stop => 0, extra_params => [ '-U', 'mon' ]);
is($mon->query(q{SELECT fencelock.acquire('mon-3', 'm', '1 hour') IS NOT NULL}), 't',
	'a session of the grantee takes its prefix');
$node->safe_psql('postgres', 'REVOKE SELECT (grantee) ON fencelock.resource_grants FROM mon');
my ($bgout, $bgret) = $mon->query(q{SELECT fencelock.acquire('mon-4', 'm', '1 hour') IS NOT NULL});
ok($bgret && $mon->{stderr} =~ /permission denied for resource "mon-4"/,
	'the marker revoked in another session: that session is refused');
$node->safe_psql('postgres', 'GRANT SELECT (grantee) ON fencelock.resource_grants TO mon');
is($mon->query(q{SELECT fencelock.acquire('mon-5', 'm', '1 hour') IS NOT NULL}), 't',
	'granted again: it takes the prefix');
$mon->quit;
$node->safe_psql('postgres', q{SELECT fencelock.revoke_resources('mon-', 'mon')});

# A restore into a cluster that lacks one grantee (ops): the COPY of resource_grants succeeds,
# the GRANT to the missing role fails, and ops-* stays reserved.
my $tmp = PostgreSQL::Test::Utils::tempdir;
$node->command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('postgres'), '-f', "$tmp/grants.dump" ],
	'pg_dump');
my $new = fl_node('grantee_restore', create => 0);
$new->safe_psql('postgres', q{CREATE ROLE app LOGIN; CREATE ROLE other LOGIN; CREATE DATABASE copy});
my ($out, $rerr) = ('', '');
IPC::Run::run([ 'pg_restore', '-f', '-', "$tmp/grants.dump" ], '>', \$out, '2>', \$rerr);
like($out, qr/^GRANT SELECT\(grantee\) ON TABLE fencelock\.resource_grants TO app;$/m,
	'pg_dump keeps the marker, a column privilege of the extension\'s table, by role name');
($out, $rerr) = ('', '');
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
($state) = fl_error($new, 'copy', q{SELECT fencelock.acquire('ops-1', 'o', '1 hour')},
	extra_params => [ '-U', 'other' ]);
is($state, '42501', 'the missing grantee\'s prefix stays reserved');
($state) = fl_error($new, 'copy', q{SELECT fencelock.acquire('order-1', 'o', '1 hour')},
	extra_params => [ '-U', 'other' ]);
is($state, '42501', 'another role is refused the present grantee\'s prefix');
# pg_restore runs the dump's GRANTs of the marker as one statement, which the missing role makes
# fail for all: the present grantee holds no marker either, and is refused (fail closed) until
# grant_resources is run again.
($state) = fl_error($new, 'copy', q{SELECT fencelock.acquire('order-1', 'a', '1 hour')},
	extra_params => [ '-U', 'app' ]);
is($state, '42501', 'the present grantee, its marker not restored, is refused too');
is($new->safe_psql('copy', q{SELECT fencelock.grant_resources('order-', 'app')}), 'f',
	'granting again finds the grant');
is($new->safe_psql('copy', q{SELECT fencelock.acquire('order-1', 'a', '1 hour') IS NOT NULL},
		extra_params => [ '-U', 'app' ]),
	't', 'and gives the present grantee its prefix');
# The missing role created afterwards holds nothing (the restore's GRANT of the marker failed), a
# table-level SELECT neither; granting again gives it the marker and the prefix, and DROP ROLE is
# refused again.
$new->safe_psql('copy', 'CREATE ROLE ops LOGIN; GRANT USAGE ON SCHEMA fencelock TO ops;
	GRANT SELECT ON fencelock.resource_grants TO ops');
($state) = fl_error($new, 'copy', q{SELECT fencelock.acquire('ops-2', 'p', '1 hour')},
	extra_params => [ '-U', 'ops' ]);
is($state, '42501', 'the role created afterwards under the grant\'s name is refused its prefix');
is($new->safe_psql('copy', q{SELECT fencelock.grant_resources('ops-', 'ops')}), 'f',
	'granting again finds the grant');
is($new->safe_psql('copy', q{SELECT fencelock.acquire('ops-2', 'p', '1 hour') IS NOT NULL},
		extra_params => [ '-U', 'ops' ]),
	't', 'and gives the role the prefix');
$new->safe_psql('copy', 'REVOKE USAGE ON SCHEMA fencelock FROM ops');
like(err_of($new, 'DROP ROLE ops'), qr/privileges for column grantee of table fencelock\.resource_grants/,
	'and ties the role to it again: DROP ROLE is refused');

# Restored where every grantee exists, the markers come back by name: each grantee takes its own
# prefix without a new grant_resources, and no other role does.
$new->safe_psql('postgres', 'CREATE ROLE mon LOGIN; CREATE DATABASE copy2');
IPC::Run::run([ 'pg_restore', '-d', $new->connstr('copy2'), "$tmp/grants.dump" ],
	'>', \$out, '2>', \$rerr);
is($new->safe_psql('copy2', q{SELECT fencelock.acquire('order-1', 'a', '1 hour') IS NOT NULL},
		extra_params => [ '-U', 'app' ]),
	't', 'restored with every role: the grantee takes its prefix');
is($new->safe_psql('copy2', q{SELECT fencelock.acquire('ops-1', 'p', '1 hour') IS NOT NULL},
		extra_params => [ '-U', 'ops' ]),
	't', 'so does the other grantee');
($state) = fl_error($new, 'copy2', q{SELECT fencelock.acquire('order-2', 'o', '1 hour')},
	extra_params => [ '-U', 'other' ]);
is($state, '42501', 'and another role is refused');

fl_no_crash($node, 'grantee');
fl_no_crash($new, 'grantee_restore');
done_testing();
