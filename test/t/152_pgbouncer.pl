# Behind PgBouncer in transaction pooling mode (2 server connections shared by several clients),
# leases behave exactly as over direct connections: a lease belongs to its owner token, not to a
# server session, so one client connection can acquire and others renew, write under the fence
# and release.  The same script, run over direct connections and through the pooler, gives the
# same transcript; concurrent clients through the pooler never receive the same fence twice.
#
# Contrast: a session-level advisory lock belongs to the server session.  Through the pooler,
# the session that took it is handed to other clients, which then "hold" it too.
use strict;
use warnings FATAL => 'all';

use FencelockTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my ($pgbouncer) = grep { -x } ((map { "$_/pgbouncer" } split /:/, $ENV{PATH}), '/usr/sbin/pgbouncer');
plan skip_all => 'pgbouncer is not installed' unless $pgbouncer;

my $node = fl_node('bouncer');
my $dir = $node->basedir;
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $host = $node->host;
my $pg_port = $node->port;
my $user = $node->safe_psql('postgres', 'SELECT current_user');

append_to_file("$dir/userlist.txt", qq{"$user" ""\n});
append_to_file("$dir/pgbouncer.ini", <<"EOT");
[databases]
postgres = host=$host port=$pg_port dbname=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = 2
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 50
server_round_robin = 0
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
admin_users = $user
EOT
my ($bout, $berr) = ('', '');
our $bouncer = IPC::Run::start([ $pgbouncer, "$dir/pgbouncer.ini" ],
	'<' => \undef, '>' => \$bout, '2>' => \$berr);
END { $bouncer->kill_kill if $bouncer && $bouncer->pumpable; }
my $via_bouncer = "host=127.0.0.1 port=$port dbname=postgres user=$user";
my $direct = $node->connstr('postgres');

my $up = 0;
foreach (1 .. 100)
{
	my ($out) = run_command([ 'psql', '-XAtq', '-d', $via_bouncer, '-c', 'SELECT 1' ]);
	$up = $out eq '1' and last;
	select(undef, undef, undef, 0.1);
}
BAIL_OUT("pgbouncer did not start: $berr") unless $up;

$node->safe_psql('postgres', q{
	CREATE TABLE orders (id text PRIMARY KEY, status text, last_fence bigint);
	CREATE TRIGGER fence BEFORE UPDATE ON orders FOR EACH ROW
	    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
	INSERT INTO orders VALUES ('direct', 'open', NULL), ('pooled', 'open', NULL);
});

# Several clients through the pooler share 2 server sessions.
my @c = map { fl_client($via_bouncer) } 1 .. 4;
my %pids;
foreach my $round (1 .. 3)
{
	$pids{ $_->query('SELECT pg_backend_pid()') }++ foreach @c;
}
cmp_ok(scalar(keys %pids), '<=', 2, '4 pooled clients ran on at most 2 server sessions');

# The lease protocol, as a list of [client number, SQL]; the transcript is each client's output
# and error SQLSTATE, per step.
sub run_script
{
	my ($tag, @clients) = @_;
	my @steps = (
		[ 0, "SELECT fencelock.acquire('$tag:job', '$tag-a', '30 seconds')" ],
		[ 1, "SELECT fencelock.acquire('$tag:job', '$tag-b', '30 seconds')" ],
		[ 1, "SELECT fencelock.renew('$tag:job', '$tag-a', '30 seconds')" ],
		[
			2, "BEGIN; SELECT fencelock.assert_fence('$tag:job', 1);
			    UPDATE orders SET status = 'closing', last_fence = 1 WHERE id = '$tag'; COMMIT;"
		],
		[ 3, "SELECT fencelock.release('$tag:job', '$tag-a')" ],
		[ 1, "SELECT fencelock.acquire('$tag:job', '$tag-b', '30 seconds')" ],
		[ 2, "UPDATE orders SET status = 'closed', last_fence = 2 WHERE id = '$tag'" ],
		[ 0, "UPDATE orders SET status = 'stale', last_fence = 1 WHERE id = '$tag'" ],
		[ 0, "SELECT fencelock.assert_fence('$tag:job', 1)" ],
		[ 0, "SELECT fencelock.release('$tag:job', '$tag-a')" ],
		[ 3, "SELECT fencelock.renew('$tag:job', '$tag-b', '30 seconds')" ],
		[ 2, "SELECT fence, state, status, last_fence FROM fencelock.leases, orders
		       WHERE resource = '$tag:job' AND id = '$tag'" ],
		[ 0, "SELECT fencelock.release('$tag:job', '$tag-b')" ],
		[ 3, "SELECT fencelock.current_fence('$tag:job'), fencelock.acquire('$tag:job', '$tag-c')" ],
	);
	my @transcript;
	foreach my $s (@steps)
	{
		my ($out, $err) = $clients[ $s->[0] ]->query($s->[1]);
		my ($state) = $err =~ /ERROR:  ([0-9A-Z]{5}):/;
		push @transcript, "client $s->[0]: " . ($state ? "ERROR $state" : $out);
	}
	return join("\n", @transcript);
}

my @d = map { fl_client($direct) } 1 .. 4;
my $direct_transcript = run_script('direct', @d);
my $pooled_transcript = run_script('pooled', @c);
is($direct_transcript, join("\n",
		'client 0: 1', 'client 1: ', 'client 1: t', 'client 2: ', 'client 3: t', 'client 1: 2',
		'client 2: ', 'client 0: ERROR FL001', 'client 0: ERROR FL001', 'client 0: f',
		'client 3: t', 'client 2: 2|held|closed|2', 'client 0: t', 'client 3: 2|3'),
	'over direct connections: acquire, renew and release from other connections, stale writes refused');
is($pooled_transcript, $direct_transcript, 'through pgbouncer: the same transcript');

# Advisory locks: the lock taken by client 0 stays with its server session, which the pooler
# hands to other clients; over direct connections nobody else gets it.
is($c[0]->query('SELECT pg_try_advisory_lock(42)'), 't', 'pooled client 0 takes advisory lock 42');
my $also = 0;
foreach my $try (1 .. 3)
{
	$also += $_->query('SELECT pg_try_advisory_lock(42)') eq 't' ? 1 : 0 foreach @c[ 1 .. 3 ];
}
cmp_ok($also, '>', 0,
	"through pgbouncer, other clients also \"hold\" advisory lock 42 ($also of 9 tries)");
is($d[0]->query('SELECT pg_try_advisory_lock(43)'), 't', 'direct client 0 takes advisory lock 43');
is(join('', map { $_->query('SELECT pg_try_advisory_lock(43)') } @d[ 1 .. 3 ]),
	'fff', 'over direct connections, other clients do not get it');
$_->quit foreach @c, @d;
$node->safe_psql('postgres',
	q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()});

# Concurrent clients through the pooler: every grant is recorded in its own transaction.
# Each client releases right after, so every grant is a new one: per resource the fences are
# exactly 1..N, none received twice.
$node->safe_psql('postgres', 'CREATE TABLE grants (resource text, fence bigint, client int)');
append_to_file("$dir/grants.sql", <<'EOT');
\set r random(1, 3)
INSERT INTO grants SELECT 'pgb:r' || :r, f, :client_id FROM fencelock.acquire('pgb:r' || :r, 'client-' || :client_id, '10 seconds') AS f WHERE f IS NOT NULL;
SELECT fencelock.release('pgb:r' || :r, 'client-' || :client_id);
EOT
$node->command_ok(
	[ 'pgbench', '-n', '-c', '6', '-j', '2', '-t', '50', '-f', "$dir/grants.sql", $via_bouncer ],
	'pgbench: 6 clients, 300 acquire/release pairs through pgbouncer');
is( $node->safe_psql('postgres', q{
		SELECT count(*) FILTER (WHERE n = distinct_fences AND n = top AND top = fencelock.current_fence(resource)),
		       count(*), sum(n) > 0
		  FROM (SELECT resource, count(*) AS n, count(DISTINCT fence) AS distinct_fences,
		               max(fence) AS top
		          FROM grants GROUP BY resource) AS g}),
	'3|3|t',
	'through pgbouncer, the fences granted for each resource are exactly 1..N, each to one client');

$bouncer->signal('INT');
$bouncer->finish;
fl_no_crash($node, 'pgbouncer');
done_testing();
