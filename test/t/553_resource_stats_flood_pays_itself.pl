# Issue 35, defect 6: resource_stats' eviction took rows from the role with the most rows, so
# another role's throwaway names evicted the application's statistics: an application at 80 rows
# of 100 fell to 50 while a role with 20 flooded the table.  Now the role that brings the new names
# pays first: a role with rows gives up its own least recently used ones; only a role with no row
# yet takes from another, from the role with the most rows, down to its fair share
# (max_resources / roles with rows, the newcomer counted) and never below.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use FencelockTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('resflood', conf => "fencelock.max_resources = 100\n");
$node->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	CREATE ROLE mallory LOGIN;
	CREATE ROLE carol LOGIN;
	SELECT fencelock.resource_stats_reset();
});

sub sql
{
	my ($sql, $role) = @_;
	return $node->safe_psql('postgres', $sql, $role ? (extra_params => [ '-U', $role ]) : ());
}

# As ROLE: grant and release PREFIX1..N, one transaction each (or all in one with ONE).
sub names
{
	my ($role, $prefix, $from, $to) = @_;
	sql(qq{
		DO \$\$ BEGIN
		  FOR i IN $from..$to LOOP
		    PERFORM fencelock.acquire('$prefix' || i, 'o', '1 minute');
		    PERFORM fencelock.release('$prefix' || i, 'o');
		  END LOOP;
		END \$\$;}, $role);
}

sub rows_of
{
	my ($like) = @_;
	return sql(qq{SELECT count(*) FROM fencelock.resource_stats WHERE resource LIKE '$like'});
}

# The application names 80 resources, and uses them; mallory fills the last 20 rows.
names('app', 'app:', 1, 80);
names('mallory', 'junk:', 1, 20);
is(sql(q{SELECT resources FROM fencelock.resource_stats_info}), '100', 'the table is full');

# mallory floods: 300 throwaway names.  Each is paid with mallory's own rows.
names('mallory', 'junk:', 21, 320);
is(rows_of('app:%'), '80', "the application keeps its 80 rows through another role's flood");
is(sql(q{SELECT sum(grants) FROM fencelock.resource_stats WHERE resource LIKE 'app:%'}), '80',
	'with their counts');
is(rows_of('junk:%'), '20', 'mallory recycles her own 20');
is(sql(q{SELECT count(*) FROM fencelock.resource_stats WHERE resource = 'junk:320'}), '1',
	"mallory's newest name has its row");
cmp_ok(sql(q{SELECT evicted FROM fencelock.resource_stats_info}), '>=', 300,
	'the rows mallory gave up are counted');

# The application's new names are paid with its own least recently used rows.
names('app', 'app2:', 1, 10);
is(rows_of('app%'), '80', "the application's new names evict its own rows");
is(rows_of('app2:%'), '10', 'and they have theirs');
is(rows_of('junk:%'), '20', "mallory's rows stay");

# A role with no row takes from the role with the most rows (the application), only down to
# that role's fair share (100 / 3 roles = 33): its rows above it, a batch of 5 at a time.
names('carol', 'carol:', 1, 1);
is(rows_of('carol:%'), '1', 'a newcomer gets its row');
is(rows_of('app%'), '75', 'from the role with the most rows, a batch (5% of the table)');
is(rows_of('junk:%'), '20', 'not from a role under its fair share');
is(sql(q{SELECT resources FROM fencelock.resource_stats_info}), '96', 'the rest of the batch is free');

# Reset: the table empties, the rule starts again.
sql(q{SELECT fencelock.resource_stats_reset()});
is(sql(q{SELECT resources FROM fencelock.resource_stats_info}), '0', 'reset empties the table');

fl_no_crash($node, 'resource_stats eviction');
$node->stop;
done_testing();
