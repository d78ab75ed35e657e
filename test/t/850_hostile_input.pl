# Bad input at scale: a generated set of hostile calls — NULLs, empty, huge and odd keys and owners
# (over the byte limits, control characters, multibyte, random Unicode), negative, zero, enormous
# and malformed TTLs, wrong types and arities, misused fence triggers (AFTER, STATEMENT, INSERT,
# DELETE, TRUNCATE, INSTEAD OF, missing, system, dropped and non-integer columns, bad options),
# an unprivileged role reaching for the tables, and (issue 20) MERGE at any depth, names that
# collide in the wait queue's hash, two-phase commit and sessions that end under errors and
# locks.  Each one gets a clear error with the
# documented SQLSTATE (never XX000, the internal-error class), the server does not crash, and no
# lease row or fence floor changes.
use strict;
use warnings FATAL => 'all';

use Encode ();
use Time::HiRes ();
use FencelockTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('hostile', init => { extra => [ '--encoding=UTF8', '--locale=C' ] },
	conf => "max_prepared_transactions = 10\n");

# Leases to protect: a held one (the functions are called on it with bad arguments, so a missing
# check would change it), an expired one, a free one, and a fence floor.
$node->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	SELECT fencelock.acquire('hostile:gone', 'w1', '1 hour');
	SELECT fencelock.release('hostile:gone', 'w1');
	SELECT fencelock.purge('0');
	SELECT fencelock.acquire('hostile:held', 'holder', '1 hour');
	SELECT fencelock.acquire('hostile:expired', 'old', '1 millisecond');
	SELECT fencelock.acquire('hostile:free', 'w1', '1 hour');
	SELECT fencelock.release('hostile:free', 'w1');
});

# Tables with misused fence triggers.
$node->safe_psql('postgres', q{
	CREATE TABLE t (id int PRIMARY KEY, last_fence bigint, f_text text, f_num numeric,
	                f_bool bool, f_arr bigint[], f_gone bigint);
	INSERT INTO t VALUES (1, 5, '5', 5, true, '{5}', 5);
	CREATE VIEW v AS SELECT * FROM t;
	CREATE TABLE t_after (LIKE t);       INSERT INTO t_after SELECT * FROM t;
	CREATE TABLE t_stmt (LIKE t);        INSERT INTO t_stmt SELECT * FROM t;
	CREATE TABLE t_ins (LIKE t);
	CREATE TABLE t_del (LIKE t);         INSERT INTO t_del SELECT * FROM t;
	CREATE TABLE t_trunc (LIKE t);
	CREATE TABLE t_constraint (LIKE t);  INSERT INTO t_constraint SELECT * FROM t;
	CREATE TRIGGER a AFTER UPDATE ON t_after FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
	CREATE TRIGGER s BEFORE UPDATE ON t_stmt FOR EACH STATEMENT EXECUTE FUNCTION fencelock.fence_trigger();
	CREATE TRIGGER i BEFORE INSERT ON t_ins FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
	CREATE TRIGGER d BEFORE DELETE ON t_del FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
	CREATE TRIGGER tr BEFORE TRUNCATE ON t_trunc FOR EACH STATEMENT EXECUTE FUNCTION fencelock.fence_trigger();
	CREATE CONSTRAINT TRIGGER c AFTER UPDATE ON t_constraint DEFERRABLE INITIALLY DEFERRED
	    FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
	CREATE TRIGGER io INSTEAD OF UPDATE ON v FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
});
my %column_trigger = (
	missing => [ q{'no_such_column'}, '42703' ],
	empty_name => [ q{''}, '42703' ],
	system_ctid => [ q{'ctid'}, '42703' ],
	system_xmin => [ q{'xmin'}, '42703' ],
	dropped => [ q{'f_gone'}, '42703' ],
	text => [ q{'f_text'}, '42804' ],
	numeric => [ q{'f_num'}, '42804' ],
	boolean => [ q{'f_bool'}, '42804' ],
	array => [ q{'f_arr'}, '42804' ],
	bad_option => [ q{'last_fence', 'sticky'}, '22023' ],
	upper_option => [ q{'last_fence', 'STRICT'}, '22023' ],
	empty_option => [ q{'last_fence', ''}, '22023' ],
	option_first => [ q{'strict'}, '42703' ],
	strict => [ q{'last_fence', 'strict'}, undef ],
	plain => [ q{'last_fence'}, undef ],
);
foreach my $name (sort keys %column_trigger)
{
	$node->safe_psql('postgres', qq{
		CREATE TABLE t_$name (LIKE t); INSERT INTO t_$name SELECT * FROM t;
		CREATE TRIGGER fence BEFORE UPDATE ON t_$name FOR EACH ROW
		    EXECUTE FUNCTION fencelock.fence_trigger($column_trigger{$name}[0]);});
}
$node->safe_psql('postgres', 'ALTER TABLE t_dropped DROP COLUMN f_gone');

# The cases: [what, SQL on one line, expected SQLSTATE].
my @cases;
sub case { push @cases, [@_]; }

my $held = q{'hostile:held'};
my $holder = q{'holder'};
my $ttl = q{'1 minute'};

my @bad_resources = (
	[ 'NULL resource', 'NULL', '22004' ],
	[ 'empty resource', q{''}, '22023' ],
	[ '1025-byte literal resource', q{'} . ('k' x 1025) . q{'}, '54000' ],
	[ '1025 control characters', q{(SELECT string_agg(chr(1 + i % 31), '') FROM generate_series(1, 1025) AS i)}, '54000' ],
	[ '513 two-byte characters (1026 bytes)', q{repeat('é', 513)}, '54000' ],
	[ '342 three-byte characters (1026 bytes)', q{repeat('€', 342)}, '54000' ],
	[ '257 four-byte characters (1028 bytes)', q{repeat('😀', 257)}, '54000' ],
	[ '10 MB resource', q{repeat('x', 10 * 1024 * 1024)}, '54000' ],
	[ '1 MB of key separators', q{repeat(':\\', 512 * 1024)}, '54000' ],
);
my @bad_owners = (
	[ 'NULL owner', 'NULL', '22004' ],
	[ 'empty owner', q{''}, '22023' ],
	[ '257-byte owner', q{repeat('o', 257)}, '54000' ],
	[ '129 two-byte characters (258 bytes)', q{repeat('é', 129)}, '54000' ],
	[ '65 four-byte characters (260 bytes)', q{repeat('😀', 65)}, '54000' ],
	[ '1 MB owner', q{repeat('o', 1024 * 1024)}, '54000' ],
);
my @bad_ttls = (
	[ 'NULL ttl', 'NULL', '22004' ],
	[ 'zero ttl', q{'0'}, '22023' ],
	[ 'negative ttl', q{'-1 second'}, '22023' ],
	[ 'negative microsecond', q{'-1 microsecond'}, '22023' ],
	[ 'month minus 30 days (zero)', q{'1 month -30 days'}, '22023' ],
	[ 'day minus a day and a microsecond', q{'1 day -24:00:00.000001'}, '22023' ],
	[ 'just above max_ttl', q{'86400.000001 seconds'}, '22023' ],
	[ 'a month', q{'1 month'}, '22023' ],
	[ '178 million years', q{'178000000 years'}, '22023' ],
	[ 'minus 178 million years', q{'-178000000 years'}, '22023' ],
	[ 'int32-max days', q{'2147483647 days'}, '22023' ],
	[ 'int32-min days', q{'-2147483648 days'}, '22023' ],
	[ 'int32-max days and int64-ish hours', q{'2147483647 days 2562047788 hours'}, '22023' ],
	[ 'days and months overflowing together', q{'178000000 years 2147483647 days'}, '22023' ],
	[ 'interval out of range', q{'300000000 years'}, '22008' ],
	[ 'malformed ttl', q{'soon'}, '22007' ],
);

foreach my $r (@bad_resources)
{
	case("acquire: $r->[0]", "SELECT fencelock.acquire($r->[1], $holder, $ttl);", $r->[2]);
	case("renew: $r->[0]", "SELECT fencelock.renew($r->[1], $holder, $ttl);", $r->[2]);
	case("release: $r->[0]", "SELECT fencelock.release($r->[1], $holder);", $r->[2]);
	case("current_fence: $r->[0]", "SELECT fencelock.current_fence($r->[1]);", $r->[2]);
	case("assert_fence: $r->[0]", "SELECT fencelock.assert_fence($r->[1], 1);", $r->[2]);
}
foreach my $o (@bad_owners)
{
	case("acquire: $o->[0]", "SELECT fencelock.acquire($held, $o->[1], $ttl);", $o->[2]);
	case("renew: $o->[0]", "SELECT fencelock.renew($held, $o->[1], $ttl);", $o->[2]);
	case("release: $o->[0]", "SELECT fencelock.release($held, $o->[1]);", $o->[2]);
}
foreach my $t (@bad_ttls)
{
	case("acquire: $t->[0]", "SELECT fencelock.acquire($held, $holder, $t->[1]);", $t->[2]);
	case("acquire of a free resource: $t->[0]", "SELECT fencelock.acquire('hostile:free', 'w2', $t->[1]);", $t->[2]);
	case("acquire of a new resource: $t->[0]", "SELECT fencelock.acquire('hostile:new', 'w2', $t->[1]);", $t->[2]);
	case("renew: $t->[0]", "SELECT fencelock.renew($held, $holder, $t->[1]);", $t->[2]);
}
# Odd keys that are valid in themselves, with an invalid ttl: the key is never stored.
foreach my $k (
	[ 'control characters', q{(SELECT string_agg(chr(i), '') FROM generate_series(1, 31) AS i)} ],
	[ 'a 1024-byte key (the limit)', q{repeat('k', 1024)} ],
	[ '512 two-byte characters (1024 bytes)', q{repeat('é', 512)} ],
	[ 'quotes and backslashes', q{E'\'\\\\";--'} ],
	[ 'a single space', q{' '} ],
	[ 'right-to-left and zero-width characters', q{E'\u202Ekey\u200B'} ])
{
	case("acquire: $k->[0] with a negative ttl", "SELECT fencelock.acquire($k->[1], 'w2', '-1 second');", '22023');
	case("acquire: $k->[0] with a NULL owner", "SELECT fencelock.acquire($k->[1], NULL);", '22004');
}
# Random Unicode keys and owners (NUL-free), fixed seed.  Over the byte limit: 54000; else a bad ttl: 22023.
srand(20241129);
my @pool = ([ 0x20, 0x7e ], [ 0x01, 0x1f ], [ 0x80, 0xff ], [ 0x300, 0x36f ], [ 0x4e00, 0x9fff ],
	[ 0x1f600, 0x1f64f ], [ 0xfff0, 0xfffd ]);
foreach my $i (1 .. 60)
{
	my $len = 1 + int(rand($i % 2 ? 1400 : 400));
	my $s = join('', map { my $r = $pool[ int(rand(@pool)) ]; chr($r->[0] + int(rand($r->[1] - $r->[0] + 1))) } 1 .. $len);
	my $bytes = Encode::encode('UTF-8', $s);
	my $sql = "convert_from('\\x" . unpack('H*', $bytes) . "'::bytea, 'UTF8')";
	my $n = length($bytes);
	case("random key $i ($n bytes)", "SELECT fencelock.acquire($sql, 'w2', '0');", $n > 1024 ? '54000' : '22023');
	case("random owner $i ($n bytes)", "SELECT fencelock.renew($held, $sql, '-1 day');", $n > 256 ? '54000' : '22023');
}
case('invalid UTF-8 key', q{SELECT fencelock.acquire(convert_from('\xc3'::bytea, 'UTF8'), 'w2');}, '22021');

# Fences and idle intervals.
case('assert_fence: NULL fence', "SELECT fencelock.assert_fence($held, NULL);", '22004');
my $held_fence = $node->safe_psql('postgres', "SELECT fencelock.current_fence($held)");
case("assert_fence: $_ on a held lease of fence $held_fence", "SELECT fencelock.assert_fence($held, $_);", 'FL001')
  foreach (0, -1, $held_fence - 1, $held_fence + 1, '-9223372036854775808', '9223372036854775807');
case('assert_fence: a resource never issued', "SELECT fencelock.assert_fence('hostile:never', 1);", 'FL001');
case('assert_fence: a purged resource', "SELECT fencelock.assert_fence('hostile:gone', 1);", 'FL001');
case('purge: NULL idle', 'SELECT fencelock.purge(NULL);', '22004');
case("purge: $_", "SELECT fencelock.purge('$_');", '22023')
  foreach ('-1 second', '-1 day', '-1 month', '1 month -40 days', '-178000000 years');

# Keys.
case('key: NULL part', 'SELECT fencelock.key(NULL);', '22004');
case('key: NULL array', 'SELECT fencelock.key(VARIADIC NULL::text[]);', '22004');
case('key: a NULL among parts', q{SELECT fencelock.key('a', NULL, 'b');}, '22004');
case('key: no parts', q{SELECT fencelock.key(VARIADIC '{}'::text[]);}, '22023');
case('key: two-dimensional parts', q{SELECT fencelock.key(VARIADIC '{{a,b},{c,d}}'::text[]);}, '22023');

# Wrong types and arities.
case('acquire(int, int)', 'SELECT fencelock.acquire(1, 2);', '42883');
case('acquire with an integer ttl', q{SELECT fencelock.acquire('r', 'o', 5);}, '42883');
case('acquire with one argument', q{SELECT fencelock.acquire('r');}, '42883');
case('acquire with seven arguments', q{SELECT fencelock.acquire('r', 'o', '1 s', 1, 2, 3, 4);}, '42883');
case('acquire with an array', q{SELECT fencelock.acquire(ARRAY['r'], 'o');}, '42883');
case('renew with a boolean', q{SELECT fencelock.renew('r', true);}, '42883');
case('release with a json', q{SELECT fencelock.release('r', '{}'::json);}, '42883');
case('assert_fence with text', q{SELECT fencelock.assert_fence('r', 'one');}, '22P02');
case('assert_fence with numeric', q{SELECT fencelock.assert_fence('r', 1.5);}, '42883');
case('assert_fence with a fence over int8', q{SELECT fencelock.assert_fence('r', '9223372036854775808');}, '22003');
case('purge with an integer', 'SELECT fencelock.purge(5);', '42883');
case('purge with malformed text', q{SELECT fencelock.purge('soon');}, '22007');
case('key with integers', 'SELECT fencelock.key(1, 2);', '42883');
case('current_fence of an integer', 'SELECT fencelock.current_fence(NULL::int);', '42883');
case('fence_trigger called directly', 'SELECT fencelock.fence_trigger();', '39P01');

# Misused triggers, and fenced writes that must be refused.
case('AFTER UPDATE trigger', 'UPDATE t_after SET last_fence = 6;', '39P01');
case('FOR EACH STATEMENT trigger', 'UPDATE t_stmt SET last_fence = 6;', '39P01');
case('BEFORE INSERT trigger', 'INSERT INTO t_ins SELECT * FROM t;', '39P01');
case('BEFORE DELETE trigger', 'DELETE FROM t_del;', '39P01');
case('BEFORE TRUNCATE trigger', 'TRUNCATE t_trunc;', '39P01');
case('deferred constraint trigger', 'UPDATE t_constraint SET last_fence = 6;', '39P01');
case('INSTEAD OF trigger on a view', 'UPDATE v SET last_fence = 6;', '39P01');
foreach my $name (sort keys %column_trigger)
{
	next unless defined $column_trigger{$name}[1];
	case("trigger column $name", "UPDATE t_$name SET last_fence = 6;", $column_trigger{$name}[1]);
}
case('fenced write: NULL fence', 'UPDATE t_plain SET last_fence = NULL;', 'FL002');
case('fenced write: fence column not assigned', 'UPDATE t_plain SET f_text = $$x$$;', 'FL002');
case('fenced write: older fence', 'UPDATE t_plain SET last_fence = 4;', 'FL001');
case('fenced write: int8 minimum', 'UPDATE t_plain SET last_fence = -9223372036854775808;', 'FL001');
case('fenced write: equal fence, strict', 'UPDATE t_strict SET last_fence = 5;', 'FL001');

# Run them all in one psql, one case per line; psql reports each error with its line.
my $before = fl_lease_digest($node);
my $file = $node->basedir . '/hostile.sql';
append_to_file($file, join('', map { "$_->[1]\n" } @cases));
my ($out, $err) = ('', '');
$node->psql('postgres', undef, extra_params => [ '-v', 'VERBOSITY=verbose', '-f', $file ],
	stdout => \$out, stderr => \$err, on_error_stop => 0);
my %error;
while ($err =~ /^psql:[^\n]*?:(\d+): ERROR:  ([0-9A-Z]{5}): ([^\n]*)$/mg)
{
	$error{$1} = [ $2, $3 ];
}
my ($internal, $wrong, $elog) = (0, 0, 0);
foreach my $i (0 .. $#cases)
{
	my ($what, $sql, $want) = @{ $cases[$i] };
	my $got = $error{ $i + 1 };
	if (!$got)
	{
		fail("$what: raised no error");
		next;
	}
	note "$what: $got->[0]: $got->[1]";
	$internal++ if $got->[0] eq 'XX000';
	$elog++ if $got->[1] =~ /SPI_|cache lookup|unrecognized|unexpected|failed for/;
	next if $got->[0] eq $want && $got->[1] ne '';
	$wrong++;
	is("$got->[0]: $got->[1]", "$want: ...", "$what: SQLSTATE");
}
is($internal, 0, scalar(@cases) . ' hostile calls: none raised an internal error (XX000)');
is($wrong, 0, scalar(@cases) . ' hostile calls: each raised its documented SQLSTATE with a message');
is($elog, 0, scalar(@cases) . ' hostile calls: no message is an internal one (SPI, cache lookup)');
foreach my $i (grep { $cases[$_][0] =~ /^acquire: (int32-min days|minus 178 million years)$/ } 0 .. $#cases)
{
	like($error{ $i + 1 }[1], qr/not positive/, "$cases[$i][0]: the message says the ttl is not positive");
}
is(fl_lease_digest($node), $before, 'no lease row and no fence floor changed');

# An unprivileged role reaching past the functions.
my @denied = (
	'SELECT * FROM fencelock.lease',
	q{UPDATE fencelock.lease SET fence = 0},
	'DELETE FROM fencelock.lease',
	q{INSERT INTO fencelock.lease (resource, fence) VALUES ('x', 1)},
	'TRUNCATE fencelock.fence_floor',
	'UPDATE fencelock.fence_floor SET floor = 0',
	q{SELECT fencelock.purge('0')},
	'ALTER TABLE fencelock.lease DISABLE TRIGGER ALL',
	'DROP EXTENSION fencelock',
	q{SET fencelock.max_ttl = '30d'});
foreach my $sql (@denied)
{
	my ($state, $msg) = fl_error($node, 'postgres', $sql, extra_params => [ '-U', 'app' ]);
	is($state, '42501', "role app: $sql: permission denied ($msg)");
}
is(fl_lease_digest($node), $before, 'still no lease row and no fence floor changed');

# Odd but valid keys: handled, nothing stored.
is( $node->safe_psql('postgres', q{
		SELECT fencelock.current_fence(k) IS NULL, fencelock.release(k, 'nobody'), fencelock.renew(k, 'nobody')
		  FROM (VALUES (E'\u202Ekey\u200B'), (repeat('é', 512)), ((SELECT string_agg(chr(i), '') FROM generate_series(1, 31) AS i))) AS v(k)}),
	"t|f|f\nt|f|f\nt|f|f",
	'odd but valid keys: no fence, nothing to release or renew');
is(fl_lease_digest($node), $before, 'and no lease row changed');

# --- leases (issue 10) ---
# Pinning (finding 3): hostile calls by an unprivileged role that lose a race for a lease row, in
# a transaction it then leaves open.  Each call runs while the holder's transaction has the row
# changed; once the holder commits and the call returns, the holder's next call must not wait for
# the hostile transaction (lock_timeout would end it with 55P03).  Schema takeover (finding 4):
# what an unprivileged role or a database owner might do to redirect the statements fencelock
# runs as the extension's owner; each is refused, or leaves the statements on fencelock's tables.
{
	my $lease_holder = fl_client($node->connstr('postgres'));
	my $lease_app = fl_client($node->connstr('postgres') . ' user=app');

	# Send SQL to a client without waiting; wait for it later.
	my $lease_send = sub {
		my ($c, $sql) = @_;
		my $mark = "fl_client: done " . ++$c->{n};
		$c->{in} .= "$sql\n;\n\\echo '$mark'\n\\warn '$mark'\n";
		$c->{run}->pump_nb;
		return $mark;
	};
	my $lease_done = sub {
		my ($c, $mark) = @_;
		$c->{run}->pump_nb;
		return $c->{out} =~ /\Q$mark\E\n/ && $c->{err} =~ /\Q$mark\E\n/;
	};
	my $lease_wait = sub {
		my ($c, $mark) = @_;
		$c->{timer}->start($PostgreSQL::Test::Utils::timeout_default);
		$c->{run}->pump until $c->{out} =~ /\Q$mark\E\n/ && $c->{err} =~ /\Q$mark\E\n/;
		my ($out, $err) = ($c->{out}, $c->{err});
		($c->{out}, $c->{err}) = ('', '');
		$out =~ s/\Q$mark\E\n//;
		$err =~ s/\Q$mark\E\n//;
		return ($out, $err);
	};

	# [group, begin, hostile SQL as app]; %s is the resource.  Every call fails: one that is
	# granted the lease holds its row lock rightly, so none is made where the lease is free.
	my @pin = (
		[ 'grant', 'BEGIN', q{SELECT fencelock.acquire('%s', 'app-1')} ],
		[ 'grant', 'BEGIN', q{SELECT fencelock.acquire('%s', 'app-1', '1 hour')} ],
		[ 'grant', 'BEGIN', q{SELECT fencelock.acquire('%s', 'app-1', '1 hour', '0')} ],
		[ 'grant', 'BEGIN', q{SELECT fencelock.acquire('%s', 'app-1', '1 hour', '20 milliseconds')} ],
		[ 'grant', 'BEGIN', q{SELECT fencelock.acquire('%s', 'app-1', '1 millisecond')} ],
		[ 'grant', 'BEGIN', q{SELECT fencelock.acquire('%s', repeat('o', 256), '1 hour')} ],
		[ 'grant', 'BEGIN', q{SELECT fencelock.acquire_all(ARRAY['%s'], 'app-1')} ],
		[ 'grant', 'BEGIN', q{SELECT fencelock.acquire_all(ARRAY['%s', 'pin:zz-other'], 'app-1')} ],
		[ 'grant', 'BEGIN', q{SELECT fencelock.acquire_all(ARRAY['pin:00-other', '%s'], 'app-1', '1 hour', '20 milliseconds')} ],
		[ 'grant', 'BEGIN', q{SAVEPOINT s; SELECT fencelock.acquire('%s', 'app-1'); RELEASE SAVEPOINT s} ],
		[ 'grant', 'BEGIN', q{SELECT fencelock.acquire('%s', 'app-' || g) FROM generate_series(1, 5) AS g} ],
		[ 'grant', 'BEGIN', q{DO $$BEGIN PERFORM fencelock.acquire('%s', 'app-1'); EXCEPTION WHEN OTHERS THEN NULL; END$$} ],
		[ 'grant', 'BEGIN ISOLATION LEVEL REPEATABLE READ', q{SELECT fencelock.acquire('%s', 'app-1')} ],
		[ 'grant', 'BEGIN', q{SELECT fencelock.renew('%s', 'holder')} ],
		[ 'grant', 'BEGIN', q{SELECT fencelock.assert_fence('%s', 1)} ],
		[ 'owner', 'BEGIN', q{SELECT fencelock.renew('%s', 'holder')} ],
		[ 'owner', 'BEGIN', q{SELECT fencelock.renew('%s', 'holder', '1 hour')} ],
		[ 'owner', 'BEGIN', q{SELECT fencelock.release('%s', 'holder')} ],
		[ 'owner', 'BEGIN', q{SELECT fencelock.release_all(ARRAY['%s'], 'holder')} ],
		[ 'owner', 'BEGIN', q{SELECT fencelock.assert_fence('%s', fencelock.current_fence('%s'))} ],
		[ 'owner', 'BEGIN', q{SELECT fencelock.current_fence('%s')} ]);
	my $pinned = 0;
	my $i = 0;
	foreach my $case (@pin)
	{
		my ($group, $begin, $hostile) = @$case;
		my $r = sprintf('pin:%02d', ++$i);
		my $sql = $hostile =~ s/%s/$r/gr;

		# grant: the row is free and the holder takes it; owner: the holder holds it and releases.
		$lease_holder->query(qq{SELECT fencelock.acquire('$r', 'holder', '1 hour')});
		$lease_holder->query(qq{SELECT fencelock.release('$r', 'holder')}) if $group eq 'grant';
		$lease_holder->query('BEGIN');
		$lease_holder->query($group eq 'grant'
			? qq{SELECT fencelock.acquire('$r', 'holder', '1 hour')}
			: qq{SELECT fencelock.release('$r', 'holder')});
		$lease_app->query($begin);
		my $mark = $lease_send->($lease_app, $sql);
		# Until the hostile call waits for the holder's row (or has finished).
		for (my $n = 0; $n < 1000 && !$lease_done->($lease_app, $mark); $n++)
		{
			last if $node->safe_psql('postgres', q{
				SELECT count(*) FROM pg_stat_activity
				 WHERE usename = 'app' AND wait_event_type = 'Lock'}) ne '0';
			Time::HiRes::usleep(10_000);
		}
		$lease_holder->query('COMMIT');
		$lease_wait->($lease_app, $mark);
		$lease_holder->query(q{SET lock_timeout = '3s'});
		my ($out, $err) = $lease_holder->query($group eq 'grant'
			? qq{SELECT fencelock.renew('$r', 'holder', '1 hour')}
			: qq{SELECT fencelock.acquire('$r', 'next', '1 hour') IS NOT NULL});
		$lease_holder->query('RESET lock_timeout');
		$pinned++, diag("pinned by: $sql: $err") unless $out eq 't' && $err eq '';
		$lease_app->query('ROLLBACK');
	}
	is($pinned, 0, scalar(@pin) . ' hostile calls that lost a race left no lease row pinned');

	# Schema takeover: as app, and as the owner of a database the extension is installed in.
	$node->safe_psql('postgres', q{
		CREATE ROLE lease_dbo LOGIN;
		CREATE DATABASE lease_db OWNER lease_dbo;});
	$node->safe_psql('lease_db', 'CREATE EXTENSION fencelock');
	my @ddl = (
		'ALTER SCHEMA fencelock RENAME TO fl_taken',
		'ALTER SCHEMA fencelock OWNER TO CURRENT_USER',
		'DROP SCHEMA fencelock CASCADE',
		'CREATE TABLE fencelock.lease2 (x int)',
		'CREATE VIEW fencelock.v AS SELECT 1 AS x',
		'CREATE FUNCTION fencelock.now() RETURNS timestamptz LANGUAGE sql AS $$SELECT now()$$',
		'CREATE OPERATOR fencelock.= (LEFTARG = text, RIGHTARG = text, FUNCTION = texteq)',
		'CREATE TYPE fencelock.interval AS (x int)',
		'ALTER TABLE fencelock.lease RENAME TO lease_old',
		'ALTER TABLE fencelock.lease OWNER TO CURRENT_USER',
		'ALTER TABLE fencelock.lease ENABLE ROW LEVEL SECURITY',
		'CREATE POLICY p ON fencelock.lease USING (true)',
		'CREATE RULE r AS ON UPDATE TO fencelock.lease DO ALSO NOTHING',
		'CREATE TRIGGER t BEFORE UPDATE ON fencelock.lease FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger()',
		'COMMENT ON SCHEMA fencelock IS $$taken$$',
		'ALTER EXTENSION fencelock UPDATE',
		'DROP EXTENSION fencelock');
	my $refused = 0;
	foreach my $role ('app', 'lease_dbo')
	{
		foreach my $sql (@ddl)
		{
			my ($state, $msg) = fl_error($node, 'lease_db', $sql, extra_params => [ '-U', $role ]);
			$refused++ if defined $state && $state eq '42501';
			diag("role $role: $sql: " . ($state // 'accepted')) unless defined $state && $state eq '42501';
		}
	}
	is($refused, 2 * @ddl, 2 * @ddl . ' schema takeover statements by app and the database owner: all refused (42501)');

	# Shadowing by name: a temporary lease table and search_path do not redirect the statements.
	my ($out, $err) = ('', '');
	$node->psql('lease_db', q{
		CREATE TEMP TABLE lease (resource text, owner text, fence int8, acquired_at timestamptz,
		                         expires_at timestamptz, holder name, granted_how "char",
		                         lock_delay interval);
		SET search_path = pg_temp, public;
		SELECT fencelock.acquire('shadow', 'app-3') IS NOT NULL;
		SELECT count(*) FROM lease;}, stdout => \$out, stderr => \$err,
		extra_params => [ '-U', 'app' ]);
	is($out, "t\n0", 'a temporary lease table earlier in search_path is not used');

	# Installing into a schema the database owner made first is refused.
	$node->safe_psql('postgres', 'CREATE DATABASE lease_db2 OWNER lease_dbo');
	$node->safe_psql('lease_db2', 'CREATE SCHEMA fencelock', extra_params => [ '-U', 'lease_dbo' ]);
	my ($state) = fl_error($node, 'lease_db2', 'CREATE EXTENSION fencelock');
	is($state, '55000', "CREATE EXTENSION into the database owner's schema fencelock is refused");

	my $tried = @pin + 2 * @ddl + 2;
	note("leases (issue 10): $tried hostile inputs tried (pinning " . scalar(@pin)
		  . ', schema takeover ' . (2 * @ddl + 2) . ')');
	$lease_holder->quit;
	$lease_app->quit;
}

fl_no_crash($node, 'hostile input');

# --- task tables (issue 10) ---
# The crash class: claim's kept statements met by a schema renamed (or a table renamed, moved,
# dropped) and a table of the same name with other column types put in its place, by a role
# that owns only its schema; and poisoned values: fences and attempts at the types' limits,
# NULLs and odd states in the rows, wrong fences to the helpers.  Each claim returns the old
# table's own rows (never the new table's values under the old types), each helper refuses a
# wrong fence with FL001 leaving the row as it was, and the server does not crash.
my $task_inputs = 0;
$node->safe_psql('postgres', q{
	CREATE ROLE tq_owner LOGIN;
	GRANT CREATE ON DATABASE postgres TO tq_owner;
});
my @swap_types = ('text', 'bigint', 'integer', 'smallint', 'uuid', 'bytea', 'numeric',
	'timestamptz', 'boolean', 'bigint[]', 'jsonb', 'point', 'varchar(3)', 'name');
my @moves = (
	[ 'schema renamed', 'ALTER SCHEMA s%d RENAME TO s%d_old; CREATE SCHEMA s%d', 's%d_old.q' ],
	[ 'table renamed', 'ALTER TABLE s%d.q RENAME TO q_old', 's%d.q_old' ],
	[ 'table moved', 'CREATE SCHEMA s%d_m; ALTER TABLE s%d.q SET SCHEMA s%d_m', 's%d_m.q' ]);
my $n = 0;
foreach my $move (@moves)
{
	my ($what, $ddl, $old) = @$move;
	foreach my $new_type (@swap_types)
	{
		$n++;
		(my $old_name = $old) =~ s/%d/$n/g;
		(my $move_sql = $ddl) =~ s/%d/$n/g;
		my $sql = sprintf(q{
			SET ROLE tq_owner;
			CREATE SCHEMA s%d;
			CREATE TABLE s%d.q (id bigint PRIMARY KEY, state text NOT NULL DEFAULT 'ready',
			    lease_owner text, lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
			    fence bigint NOT NULL DEFAULT 0, payload text);
			SELECT fencelock.enable_tasks('s%d.q');
			INSERT INTO s%d.q (id, payload) VALUES (1, 'old-1'), (2, 'old-2'), (3, 'old-3');
			SELECT count(*) FROM fencelock.claim(NULL::s%d.q, 'w', '1 min', 1);
			SELECT fencelock.heartbeat('s%d.q', 1, 1);
			}, ($n) x 6)
		  . "$move_sql;\n"
		  . sprintf(q{
			CREATE TABLE s%d.q (id bigint PRIMARY KEY, state text NOT NULL DEFAULT 'ready',
			    lease_owner text, lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
			    fence bigint NOT NULL DEFAULT 0, payload %s);
			INSERT INTO s%d.q (id) VALUES (1), (2), (3);
			}, $n, $new_type, $n)
		  . qq{
			SELECT string_agg(id || ':' || payload, ',' ORDER BY id)
			  FROM fencelock.claim(NULL::$old_name, 'w', '1 min', 5);
			SELECT fencelock.heartbeat('$old_name', 2, 1), fencelock.complete('$old_name', 3, 1),
			       fencelock.fail('$old_name', 1, 1);
			SELECT string_agg(id || ':' || state || ':' || fence, ',' ORDER BY id) FROM $old_name;
			}
		  . sprintf(q{
			SELECT string_agg(id || ':' || state || ':' || fence, ',' ORDER BY id) FROM s%d.q;
			}, $n);
		my ($ret, $out, $err) = $node->psql('postgres', $sql);
		$task_inputs++;
		my @lines = split /\n/, $out;
		is_deeply(
			[ $ret, @lines[ -4 .. -1 ] ],
			[ 0, '2:old-2,3:old-3', 't|t|ready', '1:ready:1,2:running:1,3:done:1',
			  '1:ready:0,2:ready:0,3:ready:0' ],
			"task table, $what, payload text -> $new_type: the old table's rows only")
		  or diag($err);
	}
}

# Poisoned rows: claim never fails for them; each becomes dead with a warning, or is claimed.
$node->safe_psql('postgres', q{
	CREATE TABLE pq (id int PRIMARY KEY, state text, lease_owner text, lease_until timestamptz,
	                 attempt bigint, fence bigint, max_attempts int, run_after timestamptz,
	                 priority int, last_error text);
	SELECT fencelock.enable_tasks('pq');
	CREATE TABLE pq2 (id int PRIMARY KEY, state text, lease_owner text, lease_until timestamptz,
	                  attempt smallint, fence bigint);
	SELECT fencelock.enable_tasks('pq2');
});
my @poison = (
	[ 'fence at the maximum', q{fence => '9223372036854775807'}, 'dead' ],
	[ 'fence one below', q{fence => '9223372036854775806'}, 'dead' ],
	[ 'fence two below', q{fence => '9223372036854775805'}, 'running' ],
	[ 'fence at the minimum', q{fence => '-9223372036854775808'}, 'running' ],
	[ 'fence null', q{fence => NULL}, 'running' ],
	[ 'attempt at the maximum', q{attempt => '9223372036854775807'}, 'dead' ],
	[ 'attempt at the minimum', q{attempt => '-9223372036854775808'}, 'running' ],
	[ 'attempt null', q{attempt => NULL}, 'running' ],
	[ 'max_attempts negative', q{max_attempts => '-2147483648'}, 'dead' ],
	[ 'max_attempts at the maximum', q{max_attempts => '2147483647'}, 'running' ],
	[ 'priority at the minimum', q{priority => '-2147483648'}, 'running' ],
	[ 'lease_until -infinity, running', q{state => 'running', lease_until => '-infinity'}, 'running' ],
	[ 'lease_until infinity, running', q{state => 'running', lease_until => 'infinity'}, 'running' ],
	[ 'run_after -infinity', q{run_after => '-infinity'}, 'running' ],
	[ 'run_after infinity', q{run_after => 'infinity'}, 'ready' ],
	[ 'state null', q{state => NULL}, '<null>' ],
	[ 'state with a NUL-like escape', q{state => E'ready\\\\0'}, 'ready\\0' ],
	[ 'state in upper case', q{state => 'READY'}, 'READY' ],
	[ 'state dead', q{state => 'dead'}, 'dead' ]);
my $id = 0;
foreach my $p (@poison)
{
	my ($what, $set, $want) = @$p;
	$id++;
	my %col = (state => q{'ready'}, attempt => '0', fence => '0', max_attempts => '5',
		run_after => 'NULL', priority => '0', lease_until => 'NULL');
	while ($set =~ /(\w+) => ('[^']*'|E'[^']*'|NULL)/g) { $col{$1} = $2 }
	my $cols = join(', ', sort keys %col);
	my $vals = join(', ', map { $col{$_} } sort keys %col);
	$node->safe_psql('postgres', qq{
		TRUNCATE pq;
		INSERT INTO pq (id, $cols) VALUES ($id, $vals);
		INSERT INTO pq (id, priority) VALUES (1000, 100);
		UPDATE pq SET state = 'ready', fence = 0 WHERE id = 1000;});
	my ($ret, $out, $err) = $node->psql('postgres',
		qq{SELECT string_agg(id::text, ',' ORDER BY id) FROM fencelock.claim(NULL::pq, 'w', '1 min', 5);
		   SELECT coalesce(state, '<null>') FROM pq WHERE id = $id;});
	$task_inputs++;
	my @lines = split /\n/, $out;
	is($ret, 0, "poisoned row, $what: claim did not fail") or diag($err);
	like($lines[0] // '', qr/(^|,)1000$/, "poisoned row, $what: the good row was claimed");
	is($lines[1], $want, "poisoned row, $what: the row is $want");
	unlike($err, qr/ERROR/, "poisoned row, $what: no error");
	like($err, qr/WARNING:  task \(id\)=\($id\) of table "pq" cannot be claimed/,
		"poisoned row, $what: a warning names the row")
	  if $want eq 'dead' && $what !~ /max_attempts|state dead/;
}
# A smallint attempt at its maximum.
$node->safe_psql('postgres', q{
	INSERT INTO pq2 (id, state, attempt, fence) VALUES (1, 'ready', 32767, 0), (2, 'ready', 0, 0)});
is($node->safe_psql('postgres', q{
	SELECT string_agg(id::text, ',') FROM fencelock.claim(NULL::pq2, 'w', '1 min', 5);
	SELECT state FROM pq2 WHERE id = 1}), "2\ndead", 'smallint attempt at its maximum: made dead');
$task_inputs++;

# Wrong fences, ids and arguments to the helpers: refused, the rows unchanged.
$node->safe_psql('postgres', q{
	TRUNCATE pq;
	INSERT INTO pq (id, state, attempt, fence, max_attempts) VALUES (1, 'ready', 0, 0, 3);
	SELECT count(*) FROM fencelock.claim(NULL::pq, 'w', '1 min', 1);});
my $pq_before = $node->safe_psql('postgres', 'SELECT md5(string_agg(pq::text, \',\')) FROM pq');
my @fences = ('0', '2', '-1', '9223372036854775807', '-9223372036854775808', '1000000');
my @helpers = (
	[ 'heartbeat', q{fencelock.heartbeat('pq', 1, %s, '1 min')} ],
	[ 'complete',  q{fencelock.complete('pq', 1, %s)} ],
	[ 'fail',      q{fencelock.fail('pq', 1, %s, 'e', '1 s')} ],
	[ 'fail without a backoff', q{fencelock.fail('pq', 1, %s)} ]);
foreach my $h (@helpers)
{
	foreach my $f (@fences)
	{
		my ($state, $msg) = fl_error($node, 'postgres', 'SELECT ' . sprintf($h->[1], $f));
		$task_inputs++;
		is($state, 'FL001', "$h->[0] with fence $f: FL001 ($msg)");
	}
}
my @bad_args = (
	[ q{SELECT fencelock.complete('pq', 1, NULL)}, '22004' ],
	[ q{SELECT fencelock.complete('pq', NULL::int, 1)}, '22004' ],
	[ q{SELECT fencelock.complete('pq', 'x'::text, 1)}, '22P02' ],
	[ q{SELECT fencelock.complete('pq', 1e30, 1)}, '22003' ],
	[ q{SELECT fencelock.complete('pq', 99999999999, 1)}, '22003' ],
	[ q{SELECT fencelock.complete('pq', true, 1)}, '42804' ],
	[ q{SELECT fencelock.complete('pq', '{1}'::int[], 1)}, '42804' ],
	[ q{SELECT fencelock.heartbeat('pq', 1, 1, '-1 s')}, '22023' ],
	[ q{SELECT fencelock.heartbeat('pq', 1, 1, '1000000 years')}, '22023' ],
	[ q{SELECT fencelock.fail('pq', 1, 1, backoff => '-1 s')}, '22023' ],
	[ q{SELECT fencelock.fail('pq2', 1, 1, error => 'x')}, '42703' ],
	[ q{SELECT * FROM fencelock.claim(NULL::pq, 'w', '1 min', -2147483648)}, '22023' ],
	[ q{SELECT * FROM fencelock.claim(NULL::pq, repeat('w', 100000), '1 min', 1)}, '54000' ],
	[ q{SELECT * FROM fencelock.claim(NULL::pg_class, 'w', '1 min', 1)}, '55000' ],
	[ q{SELECT * FROM fencelock.claim(NULL::fencelock.task_tables, 'w', '1 min', 1)}, '42501' ]);
foreach my $b (@bad_args)
{
	my ($state, $msg) = fl_error($node, 'postgres', $b->[0],
		$b->[0] =~ /task_tables/ ? (extra_params => [ '-U', 'tq_owner' ]) : ());
	$task_inputs++;
	is($state // 'none', $b->[1], "$b->[0]: $b->[1] ($msg)");
}
is($node->safe_psql('postgres', 'SELECT md5(string_agg(pq::text, \',\')) FROM pq'), $pq_before,
	'the claimed row is unchanged by every refused call');
note "task tables: $task_inputs hostile inputs tried";
fl_no_crash($node, 'hostile task-table input');

# --- waiting (issue 10) ---
# Waiting misuse: absurd waits, waits inside REPEATABLE READ / SERIALIZABLE / read-only
# transactions, cancel, terminate and kill storms, and ghost waiters (clients killed while
# queued).  Each input returns (NULL while the lease is held) or raises its documented SQLSTATE;
# afterwards no backend is queued, no row lock is held, the held lease is still the holder's and
# no fence was issued.
{
	use IPC::Run ();
	use Time::HiRes qw(time);

	my $tried = 0;
	$node->safe_psql('postgres', q{SELECT fencelock.acquire('hostile:wait', 'holder', '1 hour')});
	my $before_wait = fl_lease_digest($node);

	# Absurd waits, for acquire and for acquire_all (whose free first resource must not stay
	# granted).  '' = no error (NULL at once or at the deadline); statement_timeout is 300 ms.
	my @waits = (
		[ 'NULL', '22004' ],
		[ q{'-1 second'}, '22023' ],
		[ q{'-1 microsecond'}, '22023' ],
		[ q{'1 month -31 days'}, '22023' ],
		[ q{'2147483647 days'}, '22023' ],
		[ q{'178000000 years'}, '22023' ],
		[ q{'-178000000 years'}, '22023' ],
		[ q{'2147483647 hours'}, '57014' ],
		[ q{'1000 years'}, '57014' ],
		[ q{'1 microsecond'}, '' ],
		[ q{'0'}, '' ],
		[ q{'-0 seconds'}, '' ],
		[ q{'1 month -30 days'}, '' ],
		[ q{'100 milliseconds'}, '' ]);
	foreach my $w (@waits)
	{
		my ($wait, $want) = @$w;
		foreach my $call (
			"SELECT fencelock.acquire('hostile:wait', 'w', '1 minute', ${wait}::interval)",
			"SELECT fencelock.acquire_all(ARRAY['hostile:wait', 'hostile:a-free'], 'w', '1 minute', ${wait}::interval)")
		{
			$tried++;
			my ($state, $msg) = fl_error($node, 'postgres', "SET statement_timeout = '300ms'; $call");
			is($state // '', $want, "wait $wait: " . ($want || 'no error') . ($msg ? " ($msg)" : ''));
		}
	}

	# Waits inside a transaction snapshot or a read-only transaction.
	foreach my $level ('REPEATABLE READ', 'SERIALIZABLE')
	{
		foreach my $c (
			[ q{SELECT fencelock.acquire('hostile:wait', 'w', '1 minute', '0')}, '' ],
			[ q{SELECT fencelock.acquire_all(ARRAY['hostile:a-free', 'hostile:wait'], 'w')}, '' ],
			[ q{SELECT fencelock.acquire('hostile:wait', 'w', '1 minute', '1 second')}, '0A000' ],
			[ q{SELECT fencelock.acquire_all(ARRAY['hostile:a-free', 'hostile:wait'], 'w', '1 minute', '1 second')}, '0A000' ],
			[ q{SELECT fencelock.acquire('hostile:wait', 'holder', '1 hour', '1 hour')}, '' ])
		{
			$tried++;
			my ($state, $msg) = fl_error($node, 'postgres',
				"BEGIN ISOLATION LEVEL $level; $c->[0]; ROLLBACK;");
			is($state // '', $c->[1], "$level: $c->[0]: " . ($c->[1] || 'no error') . ($msg ? " ($msg)" : ''));
		}
	}
	$tried++;
	my ($ro_state) = fl_error($node, 'postgres',
		q{BEGIN READ ONLY; SELECT fencelock.acquire('hostile:a-free', 'w', '1 minute', '1 second'); ROLLBACK;});
	is($ro_state, '25006', 'a waiting acquire in a read-only transaction: 25006');

	# Many waits in one statement, and a cancel caught again and again inside one session: the
	# backend leaves the queue each time.
	$tried += 50;
	is( $node->safe_psql('postgres', q{
		SELECT count(*) FROM generate_series(1, 50) AS g
		 WHERE fencelock.acquire('hostile:wait', 'w' || g, '1 minute', '2 milliseconds') IS NULL}),
		'50', '50 short waits in one statement: each NULL');
	# statement_timeout in a row of statements in one session: each cancel leaves the queue.
	$tried += 20;
	my ($cout, $cerr) = ('', '');
	$node->psql('postgres',
		"SET statement_timeout = '30ms';\n"
		  . "SELECT fencelock.acquire_all(ARRAY['hostile:a-free', 'hostile:wait'], 'w', '1 minute', '1 hour');\n" x 20,
		stdout => \$cout, stderr => \$cerr, on_error_stop => 0);
	my $cancels = () = $cerr =~ /canceling statement due to statement timeout/g;
	is($cancels, 20, '20 cancels (statement_timeout) in a row in one session: each ends its wait');
	is($node->safe_psql('postgres', "SELECT fencelock.waiters('hostile:wait')"), '0',
		'and nothing is left queued');

	# Storms from outside: waiters cancelled, terminated, or whose clients are killed.
	my $start = sub {
		my ($n) = @_;
		my @h;
		for my $i (1 .. $n)
		{
			my ($out, $err) = ('', '');
			push @h, IPC::Run::start(
				[ 'psql', '-X', '-q', '-A', '-t', '-d', $node->connstr('postgres'), '-c',
				  "SELECT fencelock.acquire_all(ARRAY['hostile:a-free', 'hostile:wait'], 'storm$i', '1 minute', '60 seconds')" ],
				'>', \$out, '2>', \$err);
		}
		$node->poll_query_until('postgres', "SELECT fencelock.waiters('hostile:wait') = $n")
		  or die "the $n storm waiters never queued";
		return @h;
	};
	foreach my $storm (
		[ 'cancel', 'SELECT pg_cancel_backend(pid)' ],
		[ 'terminate', 'SELECT pg_terminate_backend(pid)' ],
		[ 'kill -9 of the clients', undef ])
	{
		my ($what, $sql) = @$storm;
		my @h = $start->(6);
		$tried += 6;
		my $t0 = time;
		if ($sql)
		{
			$node->safe_psql('postgres', qq{
				$sql FROM pg_stat_activity
				 WHERE query LIKE '%storm%' AND pid <> pg_backend_pid() AND backend_type = 'client backend'}) for 1 .. 5;
		}
		else
		{
			$_->signal('KILL') for @h;
		}
		eval { $_->finish } for @h;
		$node->poll_query_until('postgres', "SELECT fencelock.waiters('hostile:wait') = 0")
		  or die "storm ($what): waiters stayed queued";
		cmp_ok(time - $t0, '<', 10, "storm ($what) of 6 waiters: the queue empties promptly");
	}

	is($node->safe_psql('postgres', q{
		SELECT count(*) FROM pg_locks WHERE locktype = 'tuple' OR (locktype = 'transactionid' AND NOT granted)}),
		'0', 'waiting misuse: no row lock is left');
	is(fl_lease_digest($node), $before_wait, 'waiting misuse: no lease changed, no fence issued');
	note "waiting (issue 10): $tried hostile inputs tried";
	fl_no_crash($node, 'waiting misuse');
}
# --- one statement mixing lease calls and lease-bound writes (issue 20) ---
# Each lease call inside the statement that writes under the lease (a VALUES list, a CTE, a SET
# list, a DELETE's WHERE), in each isolation level, as the superuser and as role app, on a lease
# with a row.  The grant a statement makes is the lease's latest fence, so the write carrying it
# is accepted (READ COMMITTED answered XX000); a call that answers false leaves the write without
# a fence (FL002), a fence below the grant is stale (FL001), and a DELETE needs a fence shown
# before it (FL002).  Nothing raises XX000, and an accepted row carries its lease's fence.
{
	my @calls = (    # an expression giving a fence: %L the lease, %O the owner
		q{fencelock.acquire(%L, %O, '1 hour')},
		q{fencelock.acquire(%L, %O, '1 hour', '100 milliseconds')},
		q{fencelock.acquire(%L, %O, '1 hour', '0', true)},
		q{(fencelock.acquire_all(ARRAY[%L], %O, '1 hour'))[1]},
		q{fencelock.acquire(%L, %O, '1 hour') - 1},
		q{CASE WHEN fencelock.renew(%L, %O, '1 hour') THEN fencelock.current_fence(%L) END},
		q{CASE WHEN fencelock.release(%L, %O) THEN fencelock.current_fence(%L) END});
	my @writes = (    # %E the expression, %I the new row's id
		q{INSERT INTO mix VALUES (%I, %L, %E)},
		q{WITH g AS (SELECT %E AS f) INSERT INTO mix SELECT %I, %L, g.f FROM g},
		q{UPDATE mix SET fence = %E WHERE lease = %L},
		q{DELETE FROM mix WHERE lease = %L AND %E IS NOT NULL});
	my $expect = sub {
		my ($call, $write) = @_;
		my $null = $call =~ /renew|release/;    # the call answers false: NULL
		return $null ? 'OK' : 'FL002' if $write =~ /^DELETE/;
		return 'FL002' if $null;
		return 'FL001' if $call =~ /- 1$/;
		return 'OK';
	};
	$node->safe_psql('postgres', q{
		CREATE TABLE mix (id int PRIMARY KEY, lease text, fence bigint);
		CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON mix FOR EACH ROW
			EXECUTE FUNCTION fencelock.fence_trigger('fence', 'lease_column=lease');
		GRANT SELECT, INSERT, UPDATE, DELETE ON mix TO app;
	});
	my (@mix, $setup);
	foreach my $level ('READ COMMITTED', 'REPEATABLE READ', 'SERIALIZABLE')
	{
		foreach my $role ('postgres', 'app')
		{
			foreach my $call (@calls)
			{
				foreach my $write (@writes)
				{
					my $n = @mix + 1;
					my $lease = "'mix:$n'";
					(my $e = $call) =~ s/%L/$lease/g;
					$e =~ s/%O/'w'/g;
					(my $sql = $write) =~ s/%E/$e/g;
					$sql =~ s/%L/$lease/g;
					$sql =~ s/%I/$n * 10 + 1/e;
					# A lease with a row, free, and a row of the table under it (fence 0).
					$setup .= "SELECT fencelock.acquire($lease, 'pre', '1 hour'), fencelock.release($lease, 'pre');\n"
					  . "INSERT INTO mix VALUES ($n * 10, $lease, 0);\n";
					push @mix, [ "$level, $role: $sql", $lease, $expect->($call, $write),
						"SET ROLE $role; BEGIN ISOLATION LEVEL $level; $sql; COMMIT; RESET ROLE;" ];
				}
			}
		}
	}
	$node->safe_psql('postgres', "ALTER TABLE mix DISABLE TRIGGER fence;\n$setup"
		  . 'ALTER TABLE mix ENABLE TRIGGER fence;');
	my $file = $node->basedir . '/mix.sql';
	append_to_file($file, join('', map { "$_->[3]\n" } @mix));
	my ($out, $err) = ('', '');
	$node->psql('postgres', undef, extra_params => [ '-v', 'VERBOSITY=verbose', '-f', $file ],
		stdout => \$out, stderr => \$err, on_error_stop => 0);
	my %error;
	while ($err =~ /^psql:[^\n]*?:(\d+): ERROR:  ([0-9A-Z]{5}): ([^\n]*)$/mg)
	{
		$error{$1} = [ $2, $3 ];
	}
	my ($internal, $wrong) = (0, 0);
	foreach my $i (0 .. $#mix)
	{
		my ($what, $lease, $want) = @{ $mix[$i] };
		my $got = $error{ $i + 1 } ? $error{ $i + 1 }[0] : 'OK';
		$internal++ if $got eq 'XX000';
		next if $got eq $want;
		$wrong++;
		is($got . ($error{ $i + 1 } ? ": $error{ $i + 1 }[1]" : ''), $want, $what);
	}
	is($internal, 0, scalar(@mix) . ' statements mixing lease calls and writes: no XX000');
	is($wrong, 0, scalar(@mix) . ' statements mixing lease calls and writes: each as expected');
	is($node->safe_psql('postgres', q{
		SELECT count(*) FROM mix WHERE fence <> 0
		   AND fence IS DISTINCT FROM fencelock.current_fence(lease)}),
		'0', 'every row written with a grant of its statement carries its lease\'s latest fence');
	fl_no_crash($node, 'lease calls and writes in one statement');
}
# --- safe in every backend (issue 20) ---
# Deep nesting (defect 7): a MERGE whose UPDATE action leaves the fence column alone is refused
# (FL002) at every depth, also past the 64 levels the guard once tracked; recursion until the
# stack runs out is an error (54001), not a crash.  The row stays as it was.
$node->safe_psql('postgres', q{
	CREATE TABLE deep (id int PRIMARY KEY, v text, last_fence bigint);
	INSERT INTO deep VALUES (1, 'start', 5);
	CREATE TRIGGER fence BEFORE UPDATE ON deep FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
	GRANT SELECT, UPDATE ON deep TO app;
	CREATE FUNCTION deep_merge(n int) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
		IF n > 0 THEN PERFORM deep_merge(n - 1); RETURN; END IF;
		MERGE INTO deep USING (SELECT 1 AS id) s ON deep.id = s.id
		 WHEN MATCHED THEN UPDATE SET v = 'merged';
	END $$;
});
foreach my $depth (0, 62, 63, 64, 65, 150)
{
	my ($state) = fl_error($node, 'postgres', "SELECT deep_merge($depth)",
		extra_params => [ '-U', 'app' ]);
	is($state // 'none', 'FL002', "an unfenced MERGE $depth levels deep is refused");
}
is((fl_error($node, 'postgres', 'SELECT deep_merge(1000000)', extra_params => [ '-U', 'app' ]))[0],
	'54001', 'recursion past the stack limit is an error');
is($node->safe_psql('postgres', 'SELECT v || last_fence FROM deep'), 'start5',
	'the deeply nested MERGEs changed nothing');

# Hash collisions (defect 9): a role holds a name whose wait-queue hash is the real resource's and
# keeps a waiter queued under it; a waiting acquire of the free real resource is granted at once.
{
	my $victim = 'hostile:collide:nightly-export-01';
	my $dboid = $node->safe_psql('postgres',
		"SELECT oid FROM pg_database WHERE datname = 'postgres'");
	my $forged = "convert_from('\\x" . unpack('H*', fl_colliding_name($victim, $dboid))
	  . "'::bytea, 'UTF8')";
	is($node->safe_psql('postgres', "SELECT hashtextextended('$victim', $dboid) = "
		  . "hashtextextended($forged, $dboid)"), 't', 'a colliding name, computed offline');
	$node->safe_psql('postgres', "SELECT fencelock.acquire($forged, 'squatter', '1 hour')",
		extra_params => [ '-U', 'app' ]);
	my ($out, $err) = ('', '');
	my $waiter = IPC::Run::start(
		[ 'psql', '-XAtq', '-U', 'app', '-d', $node->connstr('postgres'),
		  '-c', "SELECT fencelock.acquire($forged, 'queued', '1 minute', wait => '20 s')" ],
		'>' => \$out, '2>' => \$err);
	$node->poll_query_until('postgres', "SELECT fencelock.waiters($forged) = 1")
	  or die 'the squatter\'s waiter never queued';
	my $t0 = Time::HiRes::time();
	is($node->safe_psql('postgres',
		"SELECT fencelock.acquire('$victim', 'app', '1 minute', wait => '5 s') IS NOT NULL"),
		't', 'the real resource is granted to a waiting acquire');
	cmp_ok(Time::HiRes::time() - $t0, '<', 4, '... without waiting for its timeout');
	is($node->safe_psql('postgres', "SELECT fencelock.waiters('$victim')"), '0',
		'... and the colliding waiter is not counted as the real resource\'s');
	$node->safe_psql('postgres', "SELECT fencelock.release($forged, 'squatter')",
		extra_params => [ '-U', 'app' ]);
	$waiter->finish;
	like($out, qr/^\d+$/, 'the squatter\'s own waiter is served by its own release');
	$node->safe_psql('postgres', "SELECT fencelock.release('$victim', 'app')");
}

# Two-phase commit (defect 11): grants, releases, purges and lease-bound writes in prepared
# transactions.  A ROLLBACK PREPARED leaves the leases and the counts as they were; a COMMIT
# PREPARED counts once; a prepared session-bound grant belongs to the session that made it.
{
	my $digest = fl_lease_digest($node);
	my $stats = q{SELECT grants || '/' || releases FROM fencelock.stats};
	my $before = $node->safe_psql('postgres', $stats);
	foreach my $body (
		q{SELECT fencelock.acquire('hostile:2pc', 'w', '1 hour')},
		q{SELECT fencelock.acquire('hostile:held', 'holder', '1 hour')},
		q{SELECT fencelock.release('hostile:held', 'holder')},
		q{SELECT fencelock.renew('hostile:held', 'holder', '2 hours')},
		q{SELECT fencelock.purge('0')},
		q{SELECT fencelock.acquire_all(ARRAY['hostile:2pc-a', 'hostile:2pc-b'], 'w', '1 hour')})
	{
		$node->safe_psql('postgres', "BEGIN; $body; PREPARE TRANSACTION 'hostile_2pc';");
		$node->safe_psql('postgres', "ROLLBACK PREPARED 'hostile_2pc'");
	}
	is(fl_lease_digest($node), $digest, 'rolled-back prepared transactions changed no lease');
	is($node->safe_psql('postgres', $stats), $before, '... and counted nothing');
	# A session-bound grant prepared, committed by another session: bound to the session that
	# made it, held while that session lives and free once it ends.
	my $preparer = fl_client($node->connstr('postgres'));
	my ($ppid) = split /\n/, $preparer->query(q{SELECT pg_backend_pid();
		BEGIN; SELECT fencelock.acquire('hostile:2pc-s', 'w', '1 hour', '0', true) IS NOT NULL;
		PREPARE TRANSACTION 'hostile_2pc_s';});
	my $try = q{SELECT fencelock.acquire('hostile:2pc-s', 'other', '1 hour') IS NOT NULL};
	is($node->safe_psql('postgres', "COMMIT PREPARED 'hostile_2pc_s'; $try"), 'f',
		'a prepared session-bound grant, committed elsewhere, is held while its session lives');
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($ppid)");
	$node->poll_query_until('postgres',
		"SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $ppid)");
	is($node->safe_psql('postgres', $try), 't', '... and free once that session ended');
	$preparer->{run}->kill_kill;
	$node->safe_psql('postgres', q{SELECT fencelock.release('hostile:2pc-s', 'other')});
	$digest = fl_lease_digest($node);
	$before = $node->safe_psql('postgres', $stats);
	$node->safe_psql('postgres', q{BEGIN; SELECT fencelock.acquire('hostile:2pc', 'w', '1 hour');
		PREPARE TRANSACTION 'hostile_2pc'; COMMIT PREPARED 'hostile_2pc';});
	my ($g0, $r0) = split m{/}, $before;
	is($node->safe_psql('postgres', $stats), ($g0 + 1) . "/$r0", 'a committed one counts once');
	$node->safe_psql('postgres', q{SELECT fencelock.release('hostile:2pc', 'w')});
}

# Sessions that end under errors and locks (defects 1, 5, 6): a session-bound lease whose session
# ends read-only, in a failed transaction, with waiters queued, or while another transaction (a
# prepared one too) holds its row locked.  The backend ends at once, nothing crashes, and the
# lease is free for the next owner once nothing else holds its row.
{
	my @ends = (
		[ 'read-only', q{SET default_transaction_read_only = on;} ],
		[ 'in a failed transaction', q{BEGIN; SELECT 1/0;} ],
		[ 'with statement_timeout', q{SET statement_timeout = 1;} ],
		[ 'with its row locked by another transaction', '', 'lock' ],
		[ 'with its row locked by a prepared transaction', '', 'prepared' ]);
	foreach my $i (0 .. $#ends)
	{
		my ($what, $sql, $lock) = @{ $ends[$i] };
		my $r = "hostile:session:$i";
		my $holder = fl_client($node->connstr('postgres'));
		my $pid = $holder->query(qq{SELECT pg_backend_pid();
			SELECT fencelock.acquire('$r', 'h', '1 hour', '0', true) IS NOT NULL;});
		($pid) = split /\n/, $pid;
		my ($out, $err) = ('', '');
		my $waiter = IPC::Run::start(
			[ 'psql', '-XAtq', '-d', $node->connstr('postgres'),
			  '-c', "SELECT fencelock.acquire('$r', 'next', '1 minute', wait => '30 s')" ],
			'>' => \$out, '2>' => \$err);
		$node->poll_query_until('postgres', "SELECT fencelock.waiters('$r') = 1")
		  or die "no waiter for $r";
		my $locker;
		if ($lock)
		{
			$locker = fl_client($node->connstr('postgres'));
			$locker->query(qq{BEGIN; SELECT 1 FROM fencelock.lease WHERE resource = '$r' FOR UPDATE;}
				  . ($lock eq 'prepared' ? q{PREPARE TRANSACTION 'hostile_locker';} : ''));
		}
		$holder->query($sql) if $sql;
		my $t0 = Time::HiRes::time();
		$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
		ok($node->poll_query_until('postgres',
			"SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $pid)"),
			"a session ending $what ends");
		cmp_ok(Time::HiRes::time() - $t0, '<', 10, '... promptly');
		if ($lock)
		{
			$locker->query($lock eq 'prepared' ? q{COMMIT PREPARED 'hostile_locker'} : 'COMMIT');
			$locker->quit;
		}
		$waiter->finish;
		like($out, qr/^\d+$/, '... and its waiter gets the lease');
		$holder->{run}->kill_kill;
		$node->safe_psql('postgres', "SELECT fencelock.release('$r', 'next')");
	}
	fl_no_crash($node, 'sessions ending under errors and locks');
}
done_testing();
