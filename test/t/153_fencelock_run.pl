# fencelock-run (bin/, doc/fencelock-run.md) against a node of its own:
#   - a run holds the lease while its command runs; a second run on the resource exits busy (75,
#     or the -E code) and with -w waits and runs after the first;
#   - the command sees FENCELOCK_FENCE = fencelock.current_fence() and a fenced UPDATE with it
#     passes the fence trigger, while the same fence is rejected once a later run took over;
#   - a lease taken over while the command runs (fencelock-run frozen with SIGSTOP past the TTL,
#     or the lease released behind its back) ends the command and exits 76;
#   - the lease is released when the command exits; the command's status passes through
#     (128+N for signal N); SIGHUP is forwarded; a server restart is survived by reconnecting;
#   - bad flags print usage and exit 64; an unreachable server exits 77.
# The binary is $ENV{FENCELOCK_RUN}, else fencelock-run in pg_config --bindir.
use strict;
use warnings;

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('fencelock_run');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencelock');

my $bin = $ENV{FENCELOCK_RUN} // $node->config_data('--bindir') . '/fencelock-run';
BAIL_OUT("fencelock-run not found at $bin: build and install it, or set FENCELOCK_RUN")
  unless -x $bin;
$bin = abs_path($bin);

# fencelock-run, and the psql inside the commands, connect with the usual environment.
$ENV{PGHOST}     = $node->host;
$ENV{PGPORT}     = $node->port;
$ENV{PGDATABASE} = 'postgres';
delete $ENV{$_} for qw(PGSERVICE PGOPTIONS PGCONNECT_TIMEOUT PGTARGETSESSIONATTRS);

my $dir = abs_path(PostgreSQL::Test::Utils::tempdir);
my $psql = $node->config_data('--bindir') . '/psql';
my $timeout = $PostgreSQL::Test::Utils::timeout_default;
# Under nohup (or any parent that ignores SIGHUP) the commands would inherit SIGHUP ignored, and a
# shell cannot trap a signal ignored on entry: the forwarding test would wait for its timeout.
# The commands start with the default disposition, as from a login shell.
$SIG{HUP} = 'DEFAULT';

# Run to the end: (exit code, stdout, stderr); exit code 128+N for signal N.
sub run_fl
{
	my @args = @_;
	my ($out, $err) = ('', '');
	print("# Running: fencelock-run " . join(' ', @args) . "\n");
	IPC::Run::run([ $bin, @args ], '<', \undef, '>', \$out, '2>', \$err,
		IPC::Run::timeout($timeout));
	my $st = $?;
	note("stderr:\n$err") if $err ne '';
	return (($st & 127) ? 128 + ($st & 127) : $st >> 8, $out, $err);
}

# Start in the background; finish_fl() collects it like run_fl().
sub start_fl
{
	my @args = @_;
	my %run = (out => '', err => '');
	print("# Starting: fencelock-run " . join(' ', @args) . "\n");
	$run{h} = IPC::Run::start([ $bin, @args ], '<', \undef, '>', \$run{out}, '2>', \$run{err},
		IPC::Run::timeout($timeout));
	return \%run;
}

sub finish_fl
{
	my ($run) = @_;
	$run->{h}->finish;
	my $st = $run->{h}->full_result(0);
	note("stderr:\n$run->{err}") if $run->{err} ne '';
	return (($st & 127) ? 128 + ($st & 127) : $st >> 8, $run->{out}, $run->{err});
}

# Wait (bounded) until a command has written a file; return its contents.
sub wait_for_file
{
	my ($path) = @_;
	for (my $i = 0; $i < $timeout * 20; $i++)
	{
		if (-s $path)
		{
			my $text = slurp_file($path);
			chomp $text;
			return $text;
		}
		usleep(50_000);
	}
	die "timed out waiting for $path";
}

sub lease_state
{
	my ($resource) = @_;
	return $node->safe_psql('postgres',
		"SELECT state FROM fencelock.leases WHERE resource = '$resource'");
}

# --- usage: -h/--help, -V, and every bad flag exits 64 with a message and the usage line ---

program_help_ok($bin);
program_version_ok($bin);
program_options_handling_ok($bin);

# --- the man page: installed where man(1) finds it for a program on PATH, well-formed, and
# naming every option --help lists (it is generated from doc/fencelock-run.md) ---
SKIP:
{
	my $page = abs_path(dirname($bin) . '/..') . '/share/man/man1/fencelock-run.1';
	skip 'fencelock-run was not installed by make install', 4
	  if defined $ENV{FENCELOCK_RUN};
	ok(-f $page, "man page installed at $page");
	my ($help) = (run_fl('--help'))[1];
	my $roff = slurp_file($page);
	(my $plain = $roff) =~ s/\\-/-/g;
	my @missing = grep { index($plain, $_) < 0 } ($help =~ /(--[a-z][a-z-]+)/g);
	is("@missing", '', 'man page names every long option of --help');
	skip 'groff or man is not installed', 2 unless -x '/usr/bin/groff' && -x '/usr/bin/man';
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'groff', '-man', '-ww', '-z', $page ], '>', \$out, '2>', \$err);
	is($err, '', 'man page formats without a warning');
	local $ENV{PATH} = dirname($bin) . ":$ENV{PATH}";
	local $ENV{MANPATH};
	delete $ENV{MANPATH};
	IPC::Run::run([ 'man', '-w', 'fencelock-run' ], '>', \$out, '2>', \$err);
	is($out =~ s/\s+$//r, abs_path($page), 'man fencelock-run finds it through PATH');
}

my @bad = (
	[ [], qr/no resource given/, 'no arguments' ],
	[ [ '-r', 'x' ], qr/no command given/, 'missing command' ],
	[ [ '-t', '30s', 'true' ], qr/no resource given/, 'missing -r' ],
	[ [ '-r' ], qr/option -r requires an argument/, 'missing argument' ],
	[ [ '-r', 'x', '-t', '10x', 'true' ], qr/invalid duration "10x" for -t/, 'bad TTL unit' ],
	[ [ '-r', 'x', '-t', '0', 'true' ], qr/at least 100ms/, 'zero TTL' ],
	[ [ '-r', 'x', '-t', '-5s', 'true' ], qr/invalid duration "-5s"/, 'negative TTL' ],
	[ [ '-r', 'x', '-w', '1.s', 'true' ], qr/invalid duration "1.s" for -w/, 'bad -w' ],
	[ [ '-r', 'x', '-k', '5 s', 'true' ], qr/invalid duration "5 s" for -k/, 'bad -k' ],
	[ [ '-r', 'x', '-E', '256', 'true' ], qr/invalid exit code "256"/, '-E out of range' ],
	[ [ '-r', 'x', '-r', 'y', 'true' ], qr/option -r given more than once/, 'repeated -r' ],
	[ [ '-r', '', 'true' ], qr/resource name must not be empty/, 'empty resource' ],
	[ [ '-r', 'x', '-o', 'o' x 257, 'true' ], qr/longer than 256 bytes/, 'owner too long' ],
	[ [ '-r', 'x', '-d', 'host=/x nonsense=1', 'true' ], qr/invalid connection string/,
		'bad connection string' ],
	[ [ '--no-such-flag', '-r', 'x', 'true' ], qr/invalid option "--no-such-flag"/,
		'unknown option' ]);
foreach my $case (@bad)
{
	my ($args, $re, $name) = @$case;
	my ($rc, $out, $err) = run_fl(@$args);
	is($rc, 64, "usage: $name exits 64");
	like($err, qr/^fencelock-run: /, "usage: $name: message prefixed");
	like($err, $re, "usage: $name: says what is wrong");
	like($err, qr/^Usage: fencelock-run /m, "usage: $name: prints usage");
}

# --- cannot connect: 77, once and after waiting ---

{
	my $nowhere = "host=$dir/no-server-here port=" . $node->port . " dbname=postgres";
	my ($rc, $out, $err) = run_fl('-d', $nowhere, '-r', 'x', '--', 'touch', "$dir/never");
	is($rc, 77, 'unreachable server: exit 77');
	like($err, qr/^fencelock-run: cannot connect to the server/, 'unreachable server: message');
	($rc, $out, $err) = run_fl('-d', $nowhere, '-w', '300ms', '-r', 'x', '--', 'true');
	is($rc, 77, 'unreachable server while waiting: exit 77');
	ok(!-e "$dir/never", 'unreachable server: command not run');
}

# --- the command's fence is the current one, and the fence trigger accepts it ---

$node->safe_psql(
	'postgres', q{
	CREATE TABLE orders (id int PRIMARY KEY, status text, last_fence bigint NOT NULL DEFAULT 0);
	INSERT INTO orders VALUES (1, 'new', 0);
	CREATE TRIGGER fence BEFORE UPDATE ON orders
		FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
});

my $scan = <<"EOS";
set -e
'$psql' -XAtq -v ON_ERROR_STOP=1 -c "SELECT fencelock.current_fence('order-scan') = \$FENCELOCK_FENCE" > '$dir/c-check'
'$psql' -XAtq -v ON_ERROR_STOP=1 -c "UPDATE orders SET status = 'scanned', last_fence = \$FENCELOCK_FENCE WHERE id = 1"
echo "\$FENCELOCK_RESOURCE|\$FENCELOCK_FENCE|\$FENCELOCK_OWNER|\$FENCELOCK_EXPIRES" > '$dir/c-env'
EOS
my $before = time();
my ($rc, $out, $err) = run_fl('-v', '-r', 'order-scan', '-t', '5s', '-o', 'owner-c', '--',
	'sh', '-c', $scan);
is($rc, 0, 'fenced command: exit 0');
like($err, qr/acquired "order-scan" as owner "owner-c": fence \d+/, '-v traces the grant');
like($err, qr/released "order-scan"/, '-v traces the release');
is(slurp_file("$dir/c-check"), "t\n", 'FENCELOCK_FENCE is fencelock.current_fence()');
my ($res, $fence, $owner, $expires) = split(/\|/, wait_for_file("$dir/c-env"));
is($res,   'order-scan', 'FENCELOCK_RESOURCE');
is($owner, 'owner-c',    'FENCELOCK_OWNER is the -o token');
like($fence, qr/^\d+$/, 'FENCELOCK_FENCE is a number');
ok($expires >= $before + 4 && $expires <= time() + 5,
	'FENCELOCK_EXPIRES is the Unix time the lease ends');
is($node->safe_psql('postgres', 'SELECT status, last_fence FROM orders'),
	"scanned|$fence", 'the fenced UPDATE went through');
is(lease_state('order-scan'), 'free', 'the lease is released at exit');

# a later run gets the next fence; the old one no longer passes the trigger
($rc, $out, $err) = run_fl('-r', 'order-scan', '--', 'sh', '-c',
	"echo \$FENCELOCK_FENCE > '$dir/c-next'");
is($rc, 0, 'second run: exit 0');
is(wait_for_file("$dir/c-next"), $fence + 1, 'second run: next fence');
my ($ret, $stdout, $stderr) = $node->psql('postgres',
	"UPDATE orders SET status = 'stale', last_fence = $fence - 1 WHERE id = 1");
isnt($ret, 0, 'an older fence is rejected by the trigger');
like($stderr, qr/fence/, 'rejection names the fence');

# a default owner is HOST:PID:RANDOM, new for each run
($rc, $out, $err) = run_fl('-r', 'owner-check', '--', 'sh', '-c', 'echo $FENCELOCK_OWNER');
like($out, qr/^[^:\s]+:\d+:[0-9a-f]{32}$/, 'default owner: HOST:PID:32 hex digits');

# --- the command's status passes through; the lease is released in every case ---

($rc) = run_fl('-r', 'status', '--', 'sh', '-c', 'exit 3');
is($rc, 3, 'exit status passes through');
($rc) = run_fl('-r', 'status', '--', 'sh', '-c', 'kill -TERM $$');
is($rc, 128 + 15, 'death by SIGTERM: 143');
($rc, $out, $err) = run_fl('-r', 'status', '--', "$dir/no-such-command");
is($rc, 127, 'command not found: 127');
like($err, qr/cannot run/, 'command not found: message');
is(lease_state('status'), 'free', 'lease released after a failing command');

# --- two runs on one resource: the second is busy, or with -w runs after the first ---

{
	my $first = start_fl('-r', 'batch', '-o', 'owner-a', '--', 'sh', '-c',
		"echo \$FENCELOCK_FENCE > '$dir/a-fence'; "
		  . "while [ ! -e '$dir/a-go' ]; do sleep 0.05; done");
	my $a_fence = wait_for_file("$dir/a-fence");
	is(lease_state('batch'), 'held', 'first run holds the lease');

	($rc, $out, $err) = run_fl('-r', 'batch', '--', 'touch', "$dir/b-ran");
	is($rc, 75, 'second run while held: exit 75');
	like($err, qr/resource "batch" is busy: held by role "[^"]+" with fence \d+/,
		'busy: names the holding role and fence');
	unlike($err, qr/owner-a/, 'busy: never prints the holder\'s owner token (the capability to release)');
	ok(!-e "$dir/b-ran", 'busy: command not run');
	($rc) = run_fl('-E', '9', '-r', 'batch', '--', 'touch', "$dir/b-ran");
	is($rc, 9, 'busy with -E 9: exit 9');
	($rc, $out, $err) = run_fl('-w', '200ms', '-r', 'batch', '--', 'touch', "$dir/b-ran");
	is($rc, 75, 'busy after waiting 200ms: exit 75');
	like($err, qr/gave up after 200ms/, 'busy after waiting: says so');

	my $waiter = start_fl('-w', '60s', '-r', 'batch', '--', 'sh', '-c',
		"echo \$FENCELOCK_FENCE > '$dir/c-fence'");
	usleep(300_000);
	ok(!-e "$dir/c-fence", 'waiter does not run while the first holds the lease');
	open(my $fh, '>', "$dir/a-go") or die;
	close($fh);
	($rc) = finish_fl($first);
	is($rc, 0, 'first run: exit 0');
	($rc, $out, $err) = finish_fl($waiter);
	is($rc, 0, 'waiter: exit 0 once the first released');
	is(wait_for_file("$dir/c-fence"), $a_fence + 1, 'waiter ran with the next fence');
	ok(!-e "$dir/b-ran", 'no busy run ever ran its command');
}

# --- lease taken over while fencelock-run is frozen past the TTL: command stopped, exit 76 ---

{
	my $run = start_fl('-v', '-r', 'steal', '-t', '1s', '-k', '5s', '--', 'sh', '-c',
		"trap 'echo term > \"$dir/d-term\"; exit 1' TERM; echo \$PPID > '$dir/d-pid'; "
		  . 'while :; do sleep 0.1; done');
	my $pid = wait_for_file("$dir/d-pid");
	kill 'STOP', $pid;
	$node->poll_query_until('postgres',
		"SELECT fencelock.acquire('steal', 'thief', '1 minute') IS NOT NULL")
	  or die 'the lease never expired';
	my $thief = $node->safe_psql('postgres', "SELECT fencelock.current_fence('steal')");
	kill 'CONT', $pid;
	($rc, $out, $err) = finish_fl($run);
	is($rc, 76, 'taken over while frozen: exit 76');
	like($err, qr/lost the lease on "steal"/, 'taken over: reports the loss');
	is(wait_for_file("$dir/d-term"), 'term', 'taken over: command got SIGTERM');
	is($node->safe_psql('postgres',
			"SELECT owner || ' ' || fence FROM fencelock.leases WHERE resource = 'steal'"),
		"thief $thief", 'the new holder keeps the lease');
}

# --- lease released behind its back: renew fails, command killed after the grace, exit 76 ---

{
	my $run = start_fl('-r', 'yank', '-o', 'victim', '-t', '2s', '-k', '300ms', '--', 'sh',
		'-c', "trap '' TERM; echo \$\$ > '$dir/e-pid'; while :; do sleep 0.1; done");
	my $child = wait_for_file("$dir/e-pid");
	is($node->safe_psql('postgres', "SELECT fencelock.release('yank', 'victim')"),
		't', 'lease released by someone else');
	($rc, $out, $err) = finish_fl($run);
	is($rc, 76, 'renew says not held: exit 76');
	like($err, qr/lost the lease on "yank" .*no longer held/, 'renew refused: reports the loss');
	ok(!kill(0, $child), 'a command ignoring SIGTERM is killed after the grace period');
}

# --- renew and release name the run's grant (issue 22): the same owner's newer grant, made
# behind the run's back, is neither renewed nor released by it ---

{
	my $run = start_fl('-r', 'regrant', '-o', 'same-owner', '-t', '2s', '-k', '300ms', '--', 'sh',
		'-c', "trap '' TERM; echo \$\$ > '$dir/g-pid'; while :; do sleep 0.1; done");
	wait_for_file("$dir/g-pid");
	my $newer = $node->safe_psql('postgres',
		"SELECT fencelock.release('regrant', 'same-owner') AND true, "
		  . "fencelock.acquire('regrant', 'same-owner', '1 min')");
	like($newer, qr/^t\|\d+$/, 'the same owner released and took the lease again');
	($rc, $out, $err) = finish_fl($run);
	is($rc, 76, 'renew naming the old fence is refused: exit 76');
	is($node->safe_psql('postgres',
			"SELECT owner, fence FROM fencelock.lease WHERE resource = 'regrant' "
			  . "AND expires_at > now()"),
		'same-owner|' . (split /\|/, $newer)[1], 'the newer grant is still held, not released');
}

# --- SIGHUP (like SIGINT, SIGTERM) is forwarded; the lease is released after ---

{
	my $run = start_fl('-r', 'signals', '--', 'sh', '-c',
		"trap 'echo hup > \"$dir/f-hup\"; exit 7' HUP; echo \$PPID > '$dir/f-pid'; "
		  . 'while :; do sleep 0.1; done');
	my $pid = wait_for_file("$dir/f-pid");
	kill 'HUP', $pid;
	($rc) = finish_fl($run);
	is($rc, 7, 'forwarded SIGHUP: the command\'s exit status');
	is(wait_for_file("$dir/f-hup"), 'hup', 'the command got SIGHUP');
	is(lease_state('signals'), 'free', 'lease released after a forwarded signal');
}

# --- a server restart during the run: fencelock-run reconnects and keeps renewing ---

{
	my $run = start_fl('-v', '-r', 'restart', '-t', '9s', '--', 'sh', '-c',
		"echo started > '$dir/g-started'; while [ ! -e '$dir/g-go' ]; do sleep 0.1; done");
	wait_for_file("$dir/g-started");
	$node->restart;
	my $after = $node->safe_psql('postgres',
		"SELECT expires_at FROM fencelock.leases WHERE resource = 'restart'");
	$node->poll_query_until('postgres',
		"SELECT expires_at > '$after' FROM fencelock.leases WHERE resource = 'restart'")
	  or die 'the lease was not renewed after the restart';
	open(my $fh, '>', "$dir/g-go") or die;
	close($fh);
	($rc, $out, $err) = finish_fl($run);
	is($rc, 0, 'server restart: the command finishes normally');
	like($err, qr/reconnected to the server/, 'server restart: reconnected');
	is(lease_state('restart'), 'free', 'server restart: lease released at exit');
}

$node->stop;
done_testing();
