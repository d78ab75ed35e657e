# Issue 35, defect 1: resource privileges fail open after a cancelled first check.  A session
# whose first privilege check was cancelled (its own statement_timeout, a client's cancel, a
# pooled connection's first call) kept the privilege cache "valid, no prefixes" for the rest of
# its life: cache_build marked it valid before it had read fencelock.resource_grants.  The
# review saw 99 of 100 fresh sessions take, renew and release names reserved to another role.
#
# Here 40 fresh sessions of an ordinary role each make their first check under a 1 ms
# statement_timeout (with 3,000 grants, reading them takes longer than that), then, without the
# timeout, try the reserved name: every one must be refused (42501); where the timeout lands
# varies.  Then, deterministically, first checks cancelled while they wait for a lock on the
# grants, followed by every entry point that checks.  Then a cache built inside a
# REPEATABLE READ transaction, from a snapshot older than a grant committed meanwhile: it must not
# be kept (before: the name stayed open to the session after the transaction).
use strict;
use warnings FATAL => 'all';

use FencelockTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('privcancel');
$node->safe_psql('postgres', q{
	CREATE ROLE app;
	CREATE ROLE mallory LOGIN;
	GRANT USAGE ON SCHEMA fencelock TO mallory;
	SELECT fencelock.grant_resources('order-', 'app');
	SELECT count(fencelock.grant_resources('filler-' || i || '-', 'app'))
	  FROM generate_series(1, 3000) AS i});

# A RESET under the 1 ms timeout may itself be cancelled: three, then SHOW says whether one ran.
my ($cancelled, $open, $refused, $inconclusive) = (0, 0, 0, 0);
foreach my $i (1 .. 40)
{
	my ($out, $err) = ('', '');
	$node->psql('postgres', qq{
		\\set VERBOSITY verbose
		SET statement_timeout = '1ms';
		SELECT fencelock.acquire('order-$i', 'mallory', '1 hour');
		RESET statement_timeout;
		RESET statement_timeout;
		RESET statement_timeout;
		SHOW statement_timeout;
		SELECT 'taken' FROM fencelock.acquire('order-$i', 'mallory', '1 hour') AS f
		 WHERE f IS NOT NULL;
		SELECT 'renewed' WHERE fencelock.renew('order-$i', 'mallory', '1 hour');},
		stdout => \$out, stderr => \$err, on_error_stop => 0,
		extra_params => [ '-U', 'mallory' ]);
	$cancelled++ if $err =~ /\A[^\n]*ERROR:  57014/;
	if ($out =~ /taken|renewed/)
	{
		$open++;
		diag("session $i took or renewed order-$i: out <$out> err <$err>");
	}
	elsif ($out !~ /^0$/m)
	{
		$inconclusive++;
	}
	elsif ((() = $err =~ /ERROR:  42501: permission denied for resource "order-$i"/g) >= 2)
	{
		$refused++;
	}
	else
	{
		diag("session $i: out <$out> err <$err>");
	}
}
note("$cancelled of 40 first checks were cancelled by the timeout, $inconclusive inconclusive");
cmp_ok($cancelled, '>', 0, 'the 1 ms timeout cancelled first checks');
is($open, 0, 'no session whose first check was cancelled takes or renews a reserved name');
is($refused + $inconclusive, 40, 'every session is refused the reserved name (42501)');
is($node->safe_psql('postgres', q{SELECT count(*) FROM fencelock.lease WHERE resource LIKE 'order-%'}),
	'0', 'no reserved name was granted to the other role');

# Deterministically: the first check waits for a lock on fencelock.resource_grants (a superuser's
# open LOCK TABLE) and its statement_timeout cancels it there, in the middle of the build.  Then,
# the lock gone, every entry point of that session is refused the reserved names.
my $locker = fl_client($node->connstr('postgres'));
foreach my $first (qw(acquire acquire_shared renew))
{
	$locker->query('BEGIN; LOCK TABLE fencelock.resource_grants IN ACCESS EXCLUSIVE MODE');
	my $m = fl_client($node->connstr('postgres') . ' user=mallory');
	$m->query(q{SET statement_timeout = '300ms'});
	my (undef, $err) = $m->query(qq{SELECT fencelock.$first('order-lock', 'mallory', '1 hour')});
	like($err, qr/57014/, "$first: the first check is cancelled while it reads the grants");
	$locker->query('COMMIT');
	$m->query('RESET statement_timeout');
	foreach my $call (
		q{fencelock.acquire('order-lock', 'mallory', '1 hour')},
		q{fencelock.acquire('order-lock', 'mallory', '1 hour', wait => '10 ms')},
		q{fencelock.acquire_shared('order-lock', 'mallory', '1 hour')},
		q{fencelock.acquire_permit('order-lock', 'mallory', '1 hour', 2)},
		q{fencelock.acquire_xact('order-lock', 'mallory')},
		q{fencelock.acquire_all(ARRAY['order-lock'], 'mallory')},
		q{fencelock.renew('order-lock', 'mallory', '1 hour')},
		q{fencelock.release('order-lock', 'mallory')},
		q{fencelock.assert_fence('order-lock', 1)})
	{
		(undef, $err) = $m->query("SELECT $call");
		like($err, qr/42501: permission denied for resource "order-lock"/,
			"after a cancelled first $first: $call is refused");
	}
	$m->quit;
}
$locker->quit;
is($node->safe_psql('postgres', q{SELECT count(*) FROM fencelock.lease WHERE resource LIKE 'order-%'}),
	'0', 'no reserved name was granted to the other role');

# A cache built from a REPEATABLE READ snapshot older than a grant committed since: used for that
# check at most, never kept for the session.
my $a = fl_client($node->connstr('postgres') . ' user=mallory');
my (undef, $err) = $a->query(q{SELECT fencelock.acquire('open-0', 'm', '1 hour')});
is($err, '', 'the session builds its cache');
$a->query(q{BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM fencelock.resource_privileges});
$node->safe_psql('postgres', q{SELECT fencelock.grant_resources('late-', 'app')});
# The first lock on the lease table in this transaction processes the grant's invalidation.
$a->query(q{SELECT fencelock.acquire('open-1', 'm', '1 hour')});
$a->query(q{SELECT fencelock.acquire('late-1', 'm', '1 hour')});
$a->query('ROLLBACK');
(undef, $err) = $a->query(q{SELECT fencelock.acquire('late-2', 'm', '1 hour')});
like($err, qr/42501: permission denied for resource "late-2"/,
	'after the repeatable read transaction the grant committed meanwhile is in force');
$a->quit;

fl_no_crash($node, 'privcancel');
done_testing();
