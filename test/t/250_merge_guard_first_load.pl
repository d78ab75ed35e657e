# Issue 20, defect 7, without shared_preload_libraries: the fence trigger learns which statement
# fires it (a MERGE with an UPDATE action that leaves the fence column alone is refused, FL002,
# when the row's fence does not change) from hooks the library installs when it is loaded.  A
# session loads it on its first use of fencelock, often the fence trigger itself, in the middle of
# a statement: a MERGE run by a function as the session's first use passed, unchecked.  Now:
#   - such a MERGE is refused; so is, as the safe answer, an UPDATE run by a function that keeps
#     the row's fence, as the session's first use (the trigger cannot tell it from the MERGE),
#     with a hint that says how to load fencelock first;
#   - the client's own statement is told exactly: a first-use UPDATE keeping its fence passes, a
#     first-use MERGE of that kind is refused;
#   - once loaded (an earlier statement, session_preload_libraries), every statement is told
#     exactly;
#   - a logical replication worker that loads fencelock while applying an UPDATE applies it (the
#     fence trigger passes replicated changes, checked on the publisher: 252_logical_replica_sync).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use FencelockTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('merge_first_load');
$node->init(allows_streaming => 'logical');
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION fencelock;
	CREATE TABLE t (id int PRIMARY KEY, v text, f bigint);
	CREATE TRIGGER fence BEFORE UPDATE ON t FOR EACH ROW
	    EXECUTE FUNCTION fencelock.fence_trigger('f');
	INSERT INTO t VALUES (1, 'start', 5);
	CREATE FUNCTION merge_unfenced() RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
	    MERGE INTO t USING (VALUES (1)) s(id) ON t.id = s.id
	        WHEN MATCHED AND false THEN UPDATE SET f = 0
	        WHEN MATCHED THEN UPDATE SET v = 'merged';
	END $$;
	CREATE FUNCTION update_same_fence() RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
	    UPDATE t SET v = 'updated', f = 5;
	END $$;
});

# Run SQL in a new session (fencelock not loaded yet), going on after errors: each error as
# "SQLSTATE: detail | hint", in order.
sub session_errors
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	my @errors;

	$node->psql('postgres', "\\set VERBOSITY verbose\n$sql",
		stdout => \$out, stderr => \$err, on_error_stop => 0);
	while ($err =~ /ERROR:  ([0-9A-Z]{5}): [^\n]*\n(?:DETAIL:  ([^\n]*)\n)?(?:HINT:  ([^\n]*)\n)?/g)
	{
		push @errors, "$1: " . ($2 // '') . ' | ' . ($3 // '');
	}
	return @errors;
}

sub row { return $node->safe_psql('postgres', q{SELECT v || '/' || f FROM t WHERE id = 1}); }

my $unloaded = 'FL002: fencelock was loaded while this statement ran, so the trigger cannot tell '
  . 'whether the statement is a MERGE with an UPDATE action that does not assign the fence '
  . 'column; the fence did not change. | Load fencelock before the statement: add it to '
  . 'shared_preload_libraries or session_preload_libraries, or call one of its functions, such '
  . 'as fencelock.current_fence, in an earlier statement of the session.';
my $partial = 'FL002: The MERGE has an UPDATE action that does not assign the fence column, and '
  . 'PostgreSQL reports the columns of all its UPDATE actions together. | Set column "f" to the '
  . 'fence of the lease this write is made under.';

is($node->safe_psql('postgres',
	"SELECT count(*) FROM pg_settings WHERE name = 'fencelock.max_ttl'"), '0',
	'a new session has not loaded fencelock');

# The defect: a function's MERGE as the session's first use of fencelock.
is_deeply([ session_errors('SELECT merge_unfenced()') ], [$unloaded],
	'a MERGE run by a function as the first use is refused, with how to load fencelock first');
is(row(), 'start/5', '... and the row is unchanged');

# The safe answer costs this: a function's UPDATE that keeps the fence, as the first use.
is_deeply([ session_errors('SELECT update_same_fence()') ], [$unloaded],
	'a function\'s UPDATE that keeps the fence, as the first use, is refused too');
is(row(), 'start/5', '... and the row is unchanged');

# The client's own statement is told exactly.
is_deeply([ session_errors(q{UPDATE t SET v = 'client', f = 5}) ], [],
	'the client\'s own UPDATE keeping the fence, as the first use, passes');
is(row(), 'client/5', '... and is applied');
is_deeply([ session_errors(q{MERGE INTO t USING (VALUES (1)) s(id) ON t.id = s.id
	WHEN MATCHED AND false THEN UPDATE SET f = 0 WHEN MATCHED THEN UPDATE SET v = 'top'}) ],
	[$partial], 'the client\'s own MERGE with an unfenced action, as the first use, is refused');
is_deeply([ session_errors(q{MERGE INTO t USING (VALUES (1)) s(id) ON t.id = s.id
	WHEN MATCHED AND false THEN UPDATE SET f = 0 WHEN MATCHED THEN UPDATE SET v = 'merge', f = 5}) ],
	[], 'the client\'s own MERGE whose every UPDATE action sets the fence passes');
is(row(), 'merge/5', '... and is applied');

# Loaded by an earlier statement (of the same transaction too): every later one is told exactly.
is_deeply([ session_errors(q{SELECT fencelock.current_fence('any'); SELECT update_same_fence();}) ],
	[], 'after an earlier statement loaded fencelock, the function\'s UPDATE passes');
is(row(), 'updated/5', '... and is applied');
is_deeply([ session_errors(q{BEGIN; SELECT fencelock.current_fence('any');
	SELECT merge_unfenced(); COMMIT;}) ], [$partial],
	'after an earlier statement of the transaction loaded it, the function\'s MERGE is refused');
is_deeply([ session_errors(q{SELECT merge_unfenced(); SELECT update_same_fence();
	SELECT merge_unfenced();}) ], [ $unloaded, $partial ],
	'after a refused first use the session\'s next statements are told exactly');
is(row(), 'updated/5', '... the rows as they should be');

# session_preload_libraries loads it before the first statement.
$node->safe_psql('postgres', "ALTER DATABASE postgres SET session_preload_libraries = 'fencelock'");
is_deeply([ session_errors('SELECT update_same_fence(); SELECT merge_unfenced();') ], [$partial],
	'with session_preload_libraries a function\'s first UPDATE passes and its MERGE is refused');
$node->safe_psql('postgres', 'ALTER DATABASE postgres RESET session_preload_libraries');

# A subscriber without preload, its fence trigger ENABLE ALWAYS: the apply worker loads fencelock
# while applying an UPDATE that keeps the fence, and applies it.
$node->safe_psql('postgres', q{
	CREATE DATABASE sub;
	CREATE TABLE pub_t (id int PRIMARY KEY, v text, f bigint);
	INSERT INTO pub_t VALUES (1, 'start', 5);
	CREATE PUBLICATION p FOR TABLE pub_t;
	SELECT pg_create_logical_replication_slot('s', 'pgoutput');
});
$node->safe_psql('sub', q{
	CREATE EXTENSION fencelock;
	CREATE TABLE pub_t (id int PRIMARY KEY, v text, f bigint);
	CREATE TRIGGER fence BEFORE UPDATE ON pub_t FOR EACH ROW
	    EXECUTE FUNCTION fencelock.fence_trigger('f');
	ALTER TABLE pub_t ENABLE ALWAYS TRIGGER fence;
});
my $connstr = $node->connstr('postgres') =~ s/'/''/gr;
$node->safe_psql('sub', qq{
	CREATE SUBSCRIPTION s CONNECTION '$connstr' PUBLICATION p
	    WITH (create_slot = false, slot_name = 's');
});
$node->wait_for_subscription_sync($node, 's', 'sub');
$node->safe_psql('postgres', "UPDATE pub_t SET v = 'same fence', f = 5");
$node->wait_for_catchup('s');
is($node->safe_psql('sub', "SELECT v || '/' || f FROM pub_t"), 'same fence/5',
	'the apply worker applies an UPDATE that keeps the fence when it loads fencelock');
$node->safe_psql('postgres', "UPDATE pub_t SET v = 'older fence', f = 4");
$node->wait_for_catchup('s');
is($node->safe_psql('sub', "SELECT v || '/' || f FROM pub_t"), 'older fence/4',
	'... and any other replicated change: the publisher checks, the subscriber applies');
$node->stop;
done_testing();
