# Issue 10, finding 4 (install-time schema takeover).  A database owner creates schema fencelock
# before a superuser installs the extension; later it renames the schema and plants its own
# fencelock.lease with a trigger that records every row written, owner tokens included.  The C
# code resolved "fencelock" by name and ran its statements against the planted table as the
# extension's owner.  Now: CREATE EXTENSION into a schema the installing role does not own is
# refused, an update of such an install is refused, and the functions refuse to run while the
# schema named fencelock is not the extension's own schema owned by the extension's owner.
use strict;
use warnings FATAL => 'all';

use FencelockTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('takeover', create => 0);
$node->safe_psql('postgres', q{
	CREATE ROLE dbo LOGIN;
	CREATE ROLE victim LOGIN;
	CREATE DATABASE shop OWNER dbo;
	CREATE DATABASE shop2 OWNER dbo;});
my @dbo = (extra_params => [ '-U', 'dbo' ]);
my @victim = (extra_params => [ '-U', 'victim' ]);

# 1. The database owner creates the schema first; the superuser's CREATE EXTENSION is refused.
$node->safe_psql('shop', 'CREATE SCHEMA fencelock', @dbo);
my ($state, $msg) = fl_error($node, 'shop', 'CREATE EXTENSION fencelock');
is($state, '55000', "CREATE EXTENSION into the database owner's schema is refused ($msg)");
like($msg, qr/schema "fencelock" is owned by role "dbo"/, 'the message names the schema and its owner');
is($node->safe_psql('shop', q{SELECT count(*) FROM pg_extension WHERE extname = 'fencelock'}),
	'0', 'nothing was installed');
my ($out, $err) = ('', '');
$node->psql('shop', 'CREATE EXTENSION fencelock', stderr => \$err);
like($err, qr/HINT:  Run ALTER SCHEMA fencelock OWNER TO postgres as a superuser/,
	'the hint says how to fix it');

# 2. An install made by an earlier version in such a schema: the update is refused, and so is
# every call, before and after the database owner's takeover.
$node->safe_psql('shop', q{CREATE EXTENSION fencelock VERSION '0.2.0'});
($state, $msg) = fl_error($node, 'shop', 'ALTER EXTENSION fencelock UPDATE');
is($state, '55000', "ALTER EXTENSION UPDATE of an install in the owner's schema is refused ($msg)");
($state, $msg) = fl_error($node, 'shop', q{SELECT fencelock.acquire('job', 'victim-token-1')}, @victim);
is($state, '55000', "a call is refused while the schema belongs to another role ($msg)");

# The takeover: rename, and plant a lease table whose trigger keeps every owner token.
$node->safe_psql('shop', q{
	ALTER SCHEMA fencelock RENAME TO fencelock_old;
	CREATE SCHEMA fencelock;
	CREATE TABLE fencelock.loot (owner text);
	GRANT INSERT ON fencelock.loot TO PUBLIC;
	CREATE TABLE fencelock.lease (resource text COLLATE "C" PRIMARY KEY, owner text,
	  fence int8 NOT NULL, acquired_at timestamptz, expires_at timestamptz, holder name,
	  granted_how "char", lock_delay interval);
	GRANT ALL ON fencelock.lease TO PUBLIC;
	CREATE FUNCTION fencelock.steal() RETURNS trigger LANGUAGE plpgsql AS
	  $$BEGIN INSERT INTO fencelock.loot VALUES (NEW.owner); RETURN NEW; END$$;
	CREATE TRIGGER steal BEFORE INSERT OR UPDATE ON fencelock.lease
	  FOR EACH ROW EXECUTE FUNCTION fencelock.steal();}, @dbo);
foreach my $call (
	q{SELECT fencelock_old.acquire('job', 'victim-token-2')},
	q{SELECT fencelock_old.acquire('job', 'victim-token-3', '1 minute', '0')},
	q{SELECT fencelock_old.renew('job', 'victim-token-4')},
	q{SELECT fencelock_old.release('job', 'victim-token-5')},
	q{SELECT fencelock_old.current_fence('job')},
	q{SELECT fencelock_old.acquire_all(ARRAY['job'], 'victim-token-6')})
{
	($state, $msg) = fl_error($node, 'shop', $call, @victim);
	is($state, '55000', "after the takeover, $call is refused ($msg)");
}
is($node->safe_psql('shop', 'SELECT count(*) FROM fencelock.loot', @dbo),
	'0', 'the planted table captured no owner token');

# 3. A proper install: the schema belongs to the extension's owner, and nobody below it can
# rename it or plant objects in it.
$node->safe_psql('shop2', 'CREATE EXTENSION fencelock');
is($node->safe_psql('shop2', q{SELECT fencelock.acquire('job', 'token') IS NOT NULL}, @victim),
	't', 'a proper install works');
my $session = fl_client($node->connstr('shop2') . ' user=victim');
is(scalar $session->query(q{SELECT fencelock.current_fence('job') IS NOT NULL}), 't',
	'a long-lived session has checked the schema');
foreach my $ddl (
	'ALTER SCHEMA fencelock RENAME TO fl_x',
	'CREATE TABLE fencelock.lease2 (x int)',
	'CREATE FUNCTION fencelock.f() RETURNS int LANGUAGE sql AS $$SELECT 1$$',
	'ALTER SCHEMA fencelock OWNER TO dbo',
	'DROP SCHEMA fencelock CASCADE')
{
	($state, $msg) = fl_error($node, 'shop2', $ddl, @dbo);
	is($state, '42501', "the database owner cannot: $ddl ($msg)");
}

# A superuser who hands the schema to another role stops the functions until it is handed back
# (each backend notices at once: the check is redone after any change of the schema).
$node->safe_psql('shop2', 'ALTER SCHEMA fencelock OWNER TO dbo');
($state, $msg) = fl_error($node, 'shop2', q{SELECT fencelock.renew('job', 'token')}, @victim);
is($state, '55000', "a schema handed to another role is refused ($msg)");
($out, $err) = $session->query(q{SELECT fencelock.current_fence('job')});
like($err, qr/55000: schema "fencelock" is owned by role "dbo"/,
	'the long-lived session is refused too: it noticed the change');
$node->safe_psql('shop2', 'ALTER SCHEMA fencelock OWNER TO postgres');
is(scalar $session->query(q{SELECT fencelock.renew('job', 'token')}), 't',
	'the same session works again once the schema is handed back');
$node->safe_psql('shop2', 'ALTER SCHEMA fencelock RENAME TO fl_moved');
($out, $err) = $session->query(q{SELECT fl_moved.renew('job', 'token')});
like($err, qr/55000: schema "fencelock" is not the schema of extension "fencelock"/,
	'a renamed extension schema is refused in a session that had checked it before');
$node->safe_psql('shop2', 'ALTER SCHEMA fl_moved RENAME TO fencelock');
is(scalar $session->query(q{SELECT fencelock.release('job', 'token')}), 't',
	'and works again once renamed back');
$session->quit;

fl_no_crash($node, 'schema takeover');
done_testing();
