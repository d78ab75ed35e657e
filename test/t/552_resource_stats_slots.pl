# Issue 26: resource_stats' rows are cluster-wide (fencelock.max_resources, 20 here) and any role
# that may acquire can name new resources.  When the table is full, the role that brings the new
# name gives up its own least recently used rows (issue 35, defect 6: before, the role with the most
# rows did; 553 tests the flood that exploited it), so a role that fills it with throwaway names
# evicts only its own; evicted rows are counted.  fencelock.max_waiters set in postgresql.conf (3 here) is a
# ceiling for ordinary roles: they may tighten it, not loosen it; a superuser may.  With
# max_resources = 0 nothing is kept and leases work as before.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use FencelockTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('resslots',
	conf => "fencelock.max_resources = 20\nfencelock.max_waiters = 3\n");
$node->safe_psql('postgres', q{
	CREATE ROLE mallory LOGIN;
	CREATE ROLE alice LOGIN;
	SELECT fencelock.resource_stats_reset();
});

sub sql
{
	my ($sql, $role) = @_;
	return $node->safe_psql('postgres', $sql, $role ? (extra_params => [ '-U', $role ]) : ());
}

# As ROLE: grant and release PREFIX1..N, with BUSY busy attempts on each.
sub take
{
	my ($role, $prefix, $n, $busy) = @_;
	sql(qq{
		DO \$\$ BEGIN
		  FOR i IN 1..$n LOOP
		    PERFORM fencelock.acquire('$prefix' || i, 'o', '1 minute');
		    PERFORM fencelock.acquire('$prefix' || i, 'other', '1 minute') FROM generate_series(1, $busy);
		    PERFORM fencelock.release('$prefix' || i, 'o');
		  END LOOP;
		END \$\$;}, $role);
}

take('alice', 'alice:', 5, 2);
is(sql(q{SELECT count(*), sum(busy), sum(grants), sum(holds) FROM fencelock.resource_stats WHERE resource LIKE 'alice:%'}),
	'5|10|5|5', 'alice\'s five resources: their rows with busy attempts, grants and holds');

# mallory fills the table and more with throwaway names, one transaction each.
for my $i (1 .. 60)
{
	sql(qq{SELECT fencelock.acquire('junk:$i', 'm', '1 minute'); SELECT fencelock.release('junk:$i', 'm');}, 'mallory');
}
is(sql(q{SELECT count(*), sum(busy) FROM fencelock.resource_stats WHERE resource LIKE 'alice:%'}),
	'5|10', 'alice\'s rows survive 60 throwaway names of mallory\'s, with their counts');
my ($rows, $max, $evicted) = split /\|/,
  sql(q{SELECT resources, max_resources, evicted FROM fencelock.resource_stats_info});
ok($rows <= 20 && $max == 20, "at most max_resources rows ($rows of $max)");
ok($evicted >= 45, "mallory's evicted rows are counted ($evicted)");
is(sql(q{SELECT count(*) > 0 FROM fencelock.resource_stats WHERE resource = 'junk:60'}), 't',
	'the newest throwaway name has its row');
is(sql(q{SELECT grants FROM fencelock.resource_stats WHERE resource = 'junk:60'}), '1',
	'and its grant counted at commit');

# Now alice names more.  Issue 35 changed this on purpose: before, mallory (the most rows) gave
# hers up until both held about half; now alice, who brings the new names, pays with her own
# least recently used rows, and mallory's stay.
take('alice', 'alice2:', 14, 0);
my ($junk, $hers) = split /\|/, sql(q{SELECT count(*) FILTER (WHERE resource LIKE 'junk:%'),
	count(*) FILTER (WHERE resource NOT LIKE 'junk:%') FROM fencelock.resource_stats});
is("$junk|$hers", '15|5',
	"alice's new names evict her own rows, not the role with the most rows: mallory $junk, alice $hers");
is(sql(q{SELECT string_agg(resource, ',' ORDER BY resource) FROM fencelock.resource_stats WHERE resource LIKE 'alice%'}),
	'alice2:10,alice2:11,alice2:12,alice2:13,alice2:14', 'her least recently used ones went');

# fencelock.max_waiters from postgresql.conf (3) is an ordinary role's ceiling.
my ($state, $msg) = fl_error($node, 'postgres', 'SET fencelock.max_waiters = 4', extra_params => [ '-U', 'alice' ]);
is($state, '42501', 'alice may not raise fencelock.max_waiters above the server\'s 3');
($state) = fl_error($node, 'postgres', 'SET fencelock.max_waiters = 0', extra_params => [ '-U', 'alice' ]);
is($state, '42501', 'nor lift the cap (0)');
is(sql(q{SET fencelock.max_waiters = 2; SHOW fencelock.max_waiters}, 'alice'), '2', 'alice may lower it');
is(sql(q{SET fencelock.max_waiters = 0; SHOW fencelock.max_waiters}), '0', 'a superuser may lift it');
($state) = fl_error($node, 'postgres', q{ALTER ROLE alice SET fencelock.max_waiters = 10}, extra_params => [ '-U', 'alice' ]);
ok(defined $state, 'alice cannot loosen it for her own role either');

# Without per-resource statistics: no rows, leases as before.
$node->append_conf('postgresql.conf', "fencelock.max_resources = 0\n");
$node->restart;
is(sql(q{SELECT fencelock.acquire('after', 'o') IS NOT NULL, fencelock.release('after', 'o')}), 't|t',
	'max_resources = 0: leases work');
is(sql(q{SELECT count(*) FROM fencelock.resource_stats}), '0', 'and nothing is kept');
is(sql(q{SELECT resources, max_resources FROM fencelock.resource_stats_info}), '0|0', 'resource_stats_info says so');
is($node->safe_psql('postgres', q{SELECT size > 0 FROM pg_shmem_allocations WHERE name = 'fencelock resource stats'}),
	'', 'no shared memory for it');

fl_no_crash($node, 'resource_stats slots');
$node->stop;
done_testing();
