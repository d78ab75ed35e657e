# Issue 35, the class search after defect 6: table_stats' slots were evicted by the same rule as
# resource_stats' rows, the owner with the most slots paying, so any role with TEMP could create
# fenced temporary tables, have writes to them refused, and take an application's rows: with
# fencelock.max_tables = 16, an application at 10 rows fell while another role with 5 flooded.
# Now the eviction rule of observe/stats.h (one rule for both tables): the owner of the new table pays
# first, with its own least recently refused tables; only an owner with no row yet takes from
# the owner with the most, down to its fair share (max_tables / owners with rows, the newcomer
# counted) and never below.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use FencelockTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('tableflood', conf => "fencelock.max_tables = 16\n");
$node->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	CREATE ROLE mallory LOGIN;
	CREATE ROLE carol LOGIN;
	CREATE SCHEMA a AUTHORIZATION app;
	CREATE SCHEMA c AUTHORIZATION carol;
	SELECT fencelock.stats_reset();
});

# SQL that makes tables SCHEMA.PREFIXfrom..to with the fence trigger and one row, and has one
# write to each refused (unfenced), in that order.
sub flood_sql
{
	my ($schema, $prefix, $from, $to) = @_;
	my $temp = $schema eq 'pg_temp' ? 'TEMP' : '';
	return qq{
		DO \$\$ BEGIN
		  FOR i IN $from..$to LOOP
		    EXECUTE format('CREATE $temp TABLE $schema.%I (id int PRIMARY KEY, fence bigint, v text)', '$prefix' || i);
		    EXECUTE format('CREATE TRIGGER f BEFORE UPDATE ON $schema.%I FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger(''fence'')', '$prefix' || i);
		    EXECUTE format('INSERT INTO $schema.%I VALUES (1, 1, ''x'')', '$prefix' || i);
		    BEGIN
		      EXECUTE format('UPDATE $schema.%I SET v = ''y''', '$prefix' || i);
		    EXCEPTION WHEN SQLSTATE 'FL002' THEN NULL;
		    END;
		  END LOOP;
		END \$\$;};
}

sub flood
{
	my ($role, @args) = @_;
	$node->safe_psql('postgres', flood_sql(@args), extra_params => [ '-U', $role ]);
}

sub sql
{
	return $node->safe_psql('postgres', $_[0]);
}

sub rows_of
{
	my ($owner) = @_;
	return sql(qq{SELECT count(*) FROM fencelock.table_stats AS s JOIN pg_class AS c ON c.oid = s."table"
		WHERE c.relowner = '$owner'::regrole});
}

my $total = q{SELECT sum(unfenced_rejected) FROM fencelock.table_stats};
my $app_counts = q{SELECT sum(unfenced_rejected) FROM fencelock.table_stats AS s
	JOIN pg_class AS c ON c.oid = s."table" WHERE c.relowner = 'app'::regrole};

# The application's 10 tables have their rows.  mallory, with no schema of her own, only TEMP,
# takes 5 of the 6 rows left with temporary tables (her session stays open, so they live).
flood('app', 'a', 't', 1, 10);
is(rows_of('app'), '10', 'the application has a row per table');
my $mallory = $node->background_psql('postgres', extra_params => [ '-U', 'mallory' ]);
$mallory->query_safe(flood_sql('pg_temp', 'junk', 1, 5));
is(rows_of('mallory'), '5', "mallory's temporary tables have rows too");
is(sql(q{SELECT count(*) FROM fencelock.table_stats}), '15', '15 of the 16 rows are taken');

# mallory floods: 60 more throwaway temporary tables.  Each is paid with her own rows.
$mallory->query_safe(flood_sql('pg_temp', 'junk', 6, 65));
is(rows_of('app'), '10',
	"the application keeps its 10 rows through another role's flood of temporary tables");
is(sql($app_counts), '10', 'with their counts');
is(rows_of('mallory'), '5', 'mallory recycles her own 5');
is(sql(q{SELECT count(*) FROM fencelock.table_stats AS s JOIN pg_class AS c ON c.oid = s."table"
	WHERE c.relname = 'junk65'}), '1', "mallory's newest table has its row");
is(sql(q{SELECT unfenced_rejected FROM fencelock.table_stats WHERE "table" IS NULL}), '60',
	'the rows mallory gave up are counted in the overflow row');
is(sql($total), '75', 'every refusal is counted in this database (10 + 65)');

# The application's new tables are paid with its own least recently refused rows.
flood('app', 'a', 'n', 1, 2);
is(rows_of('app'), '10', "the application's new tables evict its own rows");
is(sql(q{SELECT count(*) FROM fencelock.table_stats WHERE "table" IN ('a.n1'::regclass, 'a.n2'::regclass)}),
	'2', 'and they have theirs');
is(sql(q{SELECT count(*) FROM fencelock.table_stats WHERE "table" IN ('a.t1'::regclass, 'a.t2'::regclass)}),
	'0', 'the two least recently refused went');
is(rows_of('mallory'), '5', "mallory's rows stay");

# An owner with no row takes one from the owner with the most rows (the application, above its
# fair share of 16 / 3 owners = 5), then pays for its next tables itself.
flood('carol', 'c', 'x', 1, 4);
is(rows_of('carol'), '1', 'a newcomer gets a row, and its next tables evict its own');
is(rows_of('app'), '9', 'taken from the owner with the most rows');
is(rows_of('mallory'), '5', 'not from an owner at its fair share');
is(sql($total), '81', 'no refusal is lost (10 + 65 + 2 + 4)');

$mallory->quit;
fl_no_crash($node, 'table_stats eviction');
$node->stop;
done_testing();
