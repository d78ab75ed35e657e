# The update from 0.3.0 opens no new function to roles the database had refused (issue 35,
# defect 2).  0.4.0 adds entry points beside 0.3.0's acquire, renew and release: acquire_shared,
# acquire_permit, acquire_xact, set_value, and renew and release naming a fence.  The update
# created them with the default privileges, so in a database that had revoked acquire, renew and
# release from PUBLIC and granted them to its application, any role could take a day-long share
# that kept the application out, and free the application's lease with the new release (its fence
# is readable in leases).  The update now gives each new entry point the privileges of the 0.3.0
# function it extends (WITH GRANT OPTION carried), and the administrators' functions a fresh
# install's, and keeps a fresh install's initial privileges, so a dump keeps the carried ones.
#
# A customised and a default 0.3.0 database go through ALTER EXTENSION UPDATE, pg_dump and a
# restore into a new database.  Every function of the extension, by signature, must have the ACL
# (and initial privileges) of a fresh 0.4.0 install, except in the customised database those of
# acquire, renew and release and the functions extending them, which must have the customised
# ACL of the one they extend; the refused role can call none of them.
use strict;
use warnings FATAL => 'all';

use FencelockTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('upgradeprivs', create => 0);
my $tmp = PostgreSQL::Test::Utils::tempdir;

# Each 0.4.0 function and view that extends a 0.3.0 entry point or view the database customised,
# by the one it extends (the test's own list: an object the update adds must be listed here or be
# as a fresh install has it).
my %extends = (
	'leases' => 'leases',
	'lease_holders' => 'leases',
	'stats' => 'stats',
	'resource_stats' => 'stats',
	'resource_stats_info' => 'stats',
	'acquire(text, text, interval, interval, boolean, jsonb)' => 'acquire',
	'acquire_shared(text, text, interval, interval, boolean, jsonb)' => 'acquire',
	'acquire_permit(text, text, interval, integer, interval, boolean, jsonb)' => 'acquire',
	'acquire_xact(text, text, interval)' => 'acquire',
	'set_value(text, text, jsonb)' => 'acquire',
	'renew(text, text, interval)' => 'renew',
	'renew(text, text, interval, bigint)' => 'renew',
	'release(text, text)' => 'release',
	'release(text, text, bigint)' => 'release');

# Every function (by signature), table and view of the extension: sorted ACL (NULL: the
# default), initial privileges.
my $acls_sql = q{
	WITH o AS (
	    SELECT 'pg_proc'::regclass AS cat, p.oid,
	           format('%s(%s)', p.proname, oidvectortypes(p.proargtypes)) AS name, p.proacl AS acl
	      FROM pg_proc p
	    UNION ALL
	    SELECT 'pg_class'::regclass, c.oid, c.relname, c.relacl
	      FROM pg_class c WHERE c.relkind IN ('r', 'v', 'p'))
	SELECT o.name,
	       coalesce((SELECT string_agg(a::text, ',' ORDER BY a::text) FROM unnest(o.acl) a),
	                'default'),
	       coalesce((SELECT string_agg(a::text, ',' ORDER BY a::text)
	                   FROM pg_init_privs i, unnest(i.initprivs) a
	                  WHERE i.objoid = o.oid AND i.classoid = o.cat AND i.objsubid = 0), 'none')
	  FROM o
	  JOIN pg_depend d ON d.classid = o.cat AND d.objid = o.oid AND d.deptype = 'e'
	  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'fencelock'
	 ORDER BY 1};

sub acls
{
	my ($db) = @_;
	my %acl;
	foreach my $row (fl_parse_rows($node->safe_psql($db, $acls_sql)))
	{
		$acl{ $row->[0] } = { acl => $row->[1], init => $row->[2] };
	}
	return \%acl;
}

$node->safe_psql('postgres', 'CREATE ROLE app; CREATE ROLE intruder; CREATE ROLE app_helper');
my $owner = $node->safe_psql('postgres', 'SELECT current_user');

# A fresh install of 0.4.0: what the updated databases must match.
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION fencelock');
my $fresh = acls('fresh');
ok(exists $fresh->{$_}, "a fresh install has $_") foreach sort keys %extends;

# What the customised database's objects must have: the customised ACL of acquire (with grant
# option), renew, release, leases or stats for those and what extends them, a fresh install's for
# every other.  A view's: a fresh install's (the owner's privileges differ between majors) with
# app reading it instead of PUBLIC.
sub view_acl
{
	my ($fresh_acl) = @_;
	return join(',', sort((grep { !/^=/ } split /,/, $fresh_acl), "app=r/$owner"));
}
my %custom_acl = (
	acquire => "$owner=X/$owner,app=X*/$owner",
	renew => "$owner=X/$owner,app=X/$owner",
	release => "$owner=X/$owner,app=X/$owner",
	leases => view_acl($fresh->{leases}{acl}),
	stats => view_acl($fresh->{stats}{acl}));

# The same customisation of 0.1.0, updated through every script at once: there acquire_all and
# release_all (0.2.0) are new as well, and extend acquire and release.
my %extends_010 = (%extends,
	'stats' => undef, 'resource_stats' => undef, 'resource_stats_info' => undef,
	'acquire_all(text[], text, interval, interval)' => 'acquire',
	'release_all(text[], text)' => 'release');
my %customise = (
	'0.3.0' => q{
		REVOKE EXECUTE ON FUNCTION fencelock.acquire(text, text, interval),
		    fencelock.acquire(text, text, interval, interval),
		    fencelock.acquire(text, text, interval, interval, boolean),
		    fencelock.renew(text, text, interval), fencelock.release(text, text) FROM PUBLIC;
		GRANT EXECUTE ON FUNCTION fencelock.acquire(text, text, interval),
		    fencelock.acquire(text, text, interval, interval),
		    fencelock.acquire(text, text, interval, interval, boolean) TO app WITH GRANT OPTION;
		GRANT EXECUTE ON FUNCTION fencelock.renew(text, text, interval),
		    fencelock.release(text, text) TO app;
		REVOKE SELECT ON fencelock.leases, fencelock.stats FROM PUBLIC;
		GRANT SELECT ON fencelock.leases, fencelock.stats TO app;},
	'0.1.0' => q{
		REVOKE EXECUTE ON FUNCTION fencelock.acquire(text, text, interval),
		    fencelock.renew(text, text, interval), fencelock.release(text, text) FROM PUBLIC;
		GRANT EXECUTE ON FUNCTION fencelock.acquire(text, text, interval) TO app WITH GRANT OPTION;
		GRANT EXECUTE ON FUNCTION fencelock.renew(text, text, interval),
		    fencelock.release(text, text) TO app;
		REVOKE SELECT ON fencelock.leases FROM PUBLIC;
		GRANT SELECT ON fencelock.leases TO app;});

foreach my $case ([ 'custom', '0.3.0', \%extends ], [ 'defaults', '0.3.0', {} ],
	[ 'custom_010', '0.1.0', \%extends_010 ], [ 'defaults_010', '0.1.0', {} ])
{
	my ($db, $version, $extends) = @$case;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, qq{CREATE EXTENSION fencelock VERSION '$version'});
	$node->safe_psql($db, $customise{$version}) if %$extends;
	$node->safe_psql($db, 'ALTER EXTENSION fencelock UPDATE');

	$node->command_ok([ 'pg_dump', '-d', $node->connstr($db), '-f', "$tmp/$db.sql" ],
		"$db: pg_dump");
	$node->safe_psql('postgres', "CREATE DATABASE ${db}_copy");
	$node->command_ok(
		[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr("${db}_copy"),
		  '-f', "$tmp/$db.sql" ],
		"$db: restored into a new database");

	foreach my $copy ($db, "${db}_copy")
	{
		my $got = acls($copy);
		is(join(' ', sort keys %$got), join(' ', sort keys %$fresh),
			"$copy: the functions, tables and views of a fresh install");
		foreach my $fn (sort keys %$fresh)
		{
			my $want = $extends->{$fn}
			  ? join(',', sort split /,/, $custom_acl{ $extends->{$fn} }) : $fresh->{$fn}{acl};
			is($got->{$fn}{acl}, $want, "$copy: privileges on $fn");
			# The initial privileges are a fresh install's (what pg_dump compares with); a
			# restore's come from its own fresh install.
			is($got->{$fn}{init}, $fresh->{$fn}{init}, "$copy: initial privileges of $fn");
		}
	}
}
unlike(slurp_file("$tmp/$_.sql"), qr/(GRANT|REVOKE) .* ON (FUNCTION|TABLE) fencelock\./,
	"$_: a database that kept the defaults dumps no privileges on fencelock's objects")
  foreach qw(defaults defaults_010);

# The refused role calls none of the new entry points; the application calls them all, and may
# pass acquire's on.
foreach my $db (qw(custom custom_copy custom_010 custom_010_copy))
{
	my $fence = $node->safe_psql($db, q{
		SET ROLE app;
		SELECT fencelock.acquire('app:job', 'app-1', '1 hour')});
	ok($fence > 0, "$db: the application acquires");
	foreach my $call (
		q{SELECT fencelock.acquire_shared('app:job', 'x', '1 day')},
		q{SELECT fencelock.acquire_shared('app:other', 'x', '1 day')},
		q{SELECT fencelock.acquire_permit('app:other', 'x', '1 day', 2)},
		q{SELECT fencelock.acquire_xact('app:other', 'x')},
		q{SELECT fencelock.acquire('app:other', 'x', '1 day')},
		($db =~ /_010/ ? q{SELECT fencelock.acquire_all(ARRAY['app:other'], 'x', '1 day')} : ()),
		qq{SELECT fencelock.release('app:job', 'app-1', $fence)},
		qq{SELECT fencelock.renew('app:job', 'app-1', '1 second', $fence)},
		q{SELECT fencelock.set_value('app:job', 'app-1', '"x"')},
		q{SELECT count(*) FROM fencelock.lease_holders},
		($db =~ /_010/ ? () : q{SELECT count(*) FROM fencelock.resource_stats}))
	{
		my ($state) = fl_error($node, $db, "SET ROLE intruder;\n$call;");
		is($state, '42501', "$db: the refused role is refused: $call");
	}
	is($node->safe_psql($db, q{SELECT state FROM fencelock.leases WHERE resource = 'app:job'}),
		'held', "$db: the application's lease is still held");
	is($node->safe_psql($db, qq{
		SET ROLE app;
		SELECT fencelock.set_value('app:job', 'app-1', '"v"'),
		       fencelock.renew('app:job', 'app-1', '1 hour', $fence),
		       fencelock.release('app:job', 'app-1', $fence),
		       fencelock.acquire_shared('app:s', 'r1', '1 minute') > 0,
		       fencelock.acquire_permit('app:p', 'p1', '1 minute', 2) > 0,
		       fencelock.release('app:s', 'r1'), fencelock.release('app:p', 'p1')}),
		't|t|t|t|t|t|t', "$db: the application calls every new entry point");
	is($node->psql($db, q{
		SET ROLE app;
		GRANT EXECUTE ON FUNCTION fencelock.acquire_shared(text, text, interval, interval,
		    boolean, jsonb) TO app_helper}), 0,
		"$db: the application passes acquire_shared on (its grant option carried)");
}

# In the database that kept the defaults, every role calls them, as after a fresh install.
is($node->safe_psql('defaults', q{
	SET ROLE intruder;
	SELECT fencelock.acquire_shared('d:s', 'r1', '1 minute') > 0, fencelock.release('d:s', 'r1')}),
	't|t', 'defaults: PUBLIC calls the new entry points');

# The roles can be dropped once their privileges are: the update left no shared dependency of
# theirs on initial privileges (17 on), which DROP OWNED would not remove.
$node->safe_psql($_, 'DROP OWNED BY app, app_helper CASCADE')
  foreach qw(custom custom_copy custom_010 custom_010_copy);
is($node->psql('postgres', 'DROP ROLE app_helper, app'), 0, 'the application\'s roles can be dropped');

done_testing();
