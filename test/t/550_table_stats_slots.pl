# Issue 10, finding 12: table_stats' per-table slots are cluster-wide (fencelock.max_tables), and
# any role whose table has the fence trigger can make writes be refused.  They used to be handed
# out first come, first served, for good: a role could fill them with throwaway tables, and the
# slots of dropped tables were never freed.  Now (with fencelock.max_tables = 16 here):
#   - a new table takes the slot of the least recently refused table of the role that owns the
#     most slots, so a role that fills the slots only evicts its own tables;
#   - slots of dropped tables are given back when the slots run out;
#   - evicted and dropped tables' counts move to the overflow row, so no count is lost.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use FencelockTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $node = fl_node('slots', conf => "fencelock.max_tables = 16\n");
$node->safe_psql('postgres', q{
	CREATE ROLE mallory LOGIN;
	CREATE ROLE alice LOGIN;
	CREATE SCHEMA m AUTHORIZATION mallory;
	CREATE SCHEMA a AUTHORIZATION alice;
	SELECT fencelock.stats_reset();
});

# As ROLE: create tables SCHEMA.PREFIX1..N with the fence trigger and one row.
sub make_tables
{
	my ($role, $schema, $prefix, $n) = @_;
	$node->safe_psql('postgres', qq{
		DO \$\$ BEGIN
		  FOR i IN 1..$n LOOP
		    EXECUTE format('CREATE TABLE $schema.%I (id int PRIMARY KEY, fence bigint, v text)', '$prefix' || i);
		    EXECUTE format('CREATE TRIGGER f BEFORE UPDATE ON $schema.%I FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger(''fence'')', '$prefix' || i);
		    EXECUTE format('INSERT INTO $schema.%I VALUES (1, 1, ''x'')', '$prefix' || i);
		  END LOOP;
		END \$\$;}, extra_params => [ '-U', $role ]);
}

# As ROLE: one refused (unfenced) write to each of SCHEMA.PREFIX1..N, in that order.
sub refuse
{
	my ($role, $schema, $prefix, $n) = @_;
	$node->safe_psql('postgres', qq{
		DO \$\$ BEGIN
		  FOR i IN 1..$n LOOP
		    BEGIN
		      EXECUTE format('UPDATE $schema.%I SET v = ''y''', '$prefix' || i);
		    EXCEPTION WHEN SQLSTATE 'FL002' THEN NULL;
		    END;
		  END LOOP;
		END \$\$;}, extra_params => [ '-U', $role ]);
}

sub stats
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', $sql);
}

my $total = q{SELECT sum(unfenced_rejected) FROM fencelock.table_stats};
my $rows = q{SELECT count(*) FROM fencelock.table_stats WHERE "table" IS NOT NULL};

# mallory fills every slot and more with throwaway tables.
make_tables('mallory', 'm', 't', 20);
refuse('mallory', 'm', 't', 20);
is(stats($rows), '15', 'mallory\'s 20 tables: 15 rows of their own (16 slots, one the overflow row)');
is(stats($total), '20', 'and no refusal is lost: the evicted tables are in the overflow row');

# alice's table still gets its own row, and keeps it while mallory goes on.
make_tables('alice', 'a', 'acct', 1);
refuse('alice', 'a', 'acct', 1);
is(stats(q{SELECT unfenced_rejected FROM fencelock.table_stats WHERE "table" = 'a.acct1'::regclass}),
	'1', 'another role\'s table gets its own row although mallory filled the slots');
refuse('mallory', 'm', 't', 20) for 1 .. 3;
is(stats(q{SELECT unfenced_rejected FROM fencelock.table_stats WHERE "table" = 'a.acct1'::regclass}),
	'1', 'mallory refusing writes on all 20 tables again and again does not evict it');
is(stats($total), '81', 'every refusal is counted in this database (20 * 4 + 1)');

# Slots of dropped tables are given back: after mallory drops its tables, the next new table
# finds every one of their rows gone, their counts in the overflow row.
$node->safe_psql('postgres', 'DROP SCHEMA m CASCADE', extra_params => [ '-U', 'mallory' ]);
make_tables('alice', 'a', 'b', 1);
sleep(1.1);    # reclaiming runs at most once a second (mallory's refusals just looked)
refuse('alice', 'a', 'b', 1);
is( stats(q{SELECT count(*) FROM fencelock.read_table_stats() AS s
	WHERE s.relid IS NOT NULL AND NOT EXISTS (SELECT FROM pg_class AS c WHERE c.oid = s.relid)}),
	'0', 'no row is left for a dropped table');
is(stats(q{SELECT unfenced_rejected FROM fencelock.table_stats WHERE "table" IS NULL}), '80',
	'their counts are in the overflow row');
is(stats($total), '82', 'and the database\'s total is kept');

# Now alice, the only role with tables, can use every slot.
make_tables('alice', 'a', 'c', 14);
refuse('alice', 'a', 'c', 14);
is(stats($rows), '15', 'the freed slots serve the remaining tables');
is(stats(q{SELECT count(*) FROM fencelock.table_stats WHERE "table"::text ~ '^a\.(acct1|b1|c)'}), '15',
	'all of them alice\'s (15 tables, 15 rows)');

# A dropped database's rows are given back too (seen from any database).
$node->safe_psql('postgres', 'CREATE DATABASE tmpdb OWNER alice');
$node->safe_psql('tmpdb', 'CREATE EXTENSION fencelock');
$node->safe_psql('tmpdb', q{
	CREATE TABLE x (id int PRIMARY KEY, fence bigint, v text);
	CREATE TRIGGER f BEFORE UPDATE ON x FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger('fence');
	INSERT INTO x VALUES (1, 1, 'x');
	DO $$ BEGIN UPDATE x SET v = 'y'; EXCEPTION WHEN SQLSTATE 'FL002' THEN NULL; END $$;});
is($node->safe_psql('tmpdb', 'SELECT count(*) FROM fencelock.table_stats WHERE "table" IS NOT NULL'),
	'1', 'a table of another database has its row (it evicted one of alice\'s in postgres)');
is(stats($rows), '14', 'one row fewer here');
$node->safe_psql('postgres', 'DROP DATABASE tmpdb');
sleep(1.1);    # reclaiming runs at most once a second
make_tables('alice', 'a', 'd', 1);
refuse('alice', 'a', 'd', 1);
is(stats($rows), '15', 'the dropped database\'s row was given back: a new table here took it without evicting');

fl_no_crash($node, 'table_stats slots');
$node->stop;
done_testing();
