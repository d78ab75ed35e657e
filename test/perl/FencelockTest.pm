# FencelockTest — helpers shared by fencelock's TAP tests (test/t/0[1-4]*.pl).
#
# Every test starts its own nodes: fl_node() gives one with fencelock in shared_preload_libraries,
# started, with the extension created.
package FencelockTest;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

our @EXPORT =
  qw(fl_node fl_error fl_lease_digest fl_no_crash fl_parse_rows fl_client fl_background fl_colliding_name
  fl_wait_for);

# fl_node(NAME, init => {...}, conf => "extra lines", start => 0, create => 0)
sub fl_node
{
	my ($name, %opt) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);

	$node->init(%{ $opt{init} // {} });
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'fencelock'\n" . ($opt{conf} // ''));
	return $node if defined $opt{start} && !$opt{start};
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION fencelock')
	  unless defined $opt{create} && !$opt{create};
	return $node;
}

# fl_error(NODE, DB, SQL, %psql_params): run SQL (in one psql, VERBOSITY verbose) and return
# (sqlstate, message) of its first error, or () when it raised none.  psql_params go to
# PostgreSQL::Test::Cluster::psql (e.g. extra_params => ['-U', 'app']).
sub fl_error
{
	my ($node, $db, $sql, %params) = @_;
	my ($out, $err) = ('', '');

	$node->psql($db, "\\set VERBOSITY verbose\n$sql",
		stdout => \$out, stderr => \$err, on_error_stop => 1, %params);
	return ($1, $2) if $err =~ /ERROR:  ([0-9A-Z]{5}): ([^\n]*)/;
	return ();
}

# A digest of every lease row and of the fence floor: equal digests, unchanged tables.
sub fl_lease_digest
{
	my ($node, $db) = @_;
	return $node->safe_psql($db // 'postgres', q{
		SELECT md5(
		    (SELECT coalesce(string_agg(l::text, E'\n' ORDER BY l.resource), '')
		       FROM fencelock.lease AS l)
		    || '/' ||
		    (SELECT coalesce(string_agg(f::text, ','), '') FROM fencelock.fence_floor AS f))});
}

# The server did not crash: no backend died of a signal (which would make the postmaster
# restart everything) and the node still answers.
sub fl_no_crash
{
	my ($node, $what) = @_;
	my $log = slurp_file($node->logfile);

	unlike($log, qr/terminated by signal|was terminated by exception|TRAP:|PANIC:/,
		"$what: no backend crashed");
	is($node->safe_psql('postgres', 'SELECT 1'), '1', "$what: the server still answers");
}

# Rows of psql -XAt output ("a|b|c" lines) as array refs.
sub fl_parse_rows
{
	my ($out) = @_;
	return map { [ split /\|/, $_, -1 ] } grep { $_ ne '' } split /\n/, $out;
}

# fl_background(NODE, NAME, SQL...): psql in the background on NODE's postgres database with
# application_name NAME, running each SQL (-c) in one session; returns { h => the IPC::Run
# handle, out => \stdout, err => \stderr, name => NAME }.
sub fl_background
{
	my ($node, $name, @sql) = @_;
	my ($out, $err) = ('', '');
	local $ENV{PGAPPNAME} = $name;
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-q', '-d', $node->connstr('postgres'), map { ('-c', $_) } @sql ],
		'<', \undef, '>', \$out, '2>', \$err);
	return { h => $h, out => \$out, err => \$err, name => $name };
}

# fl_wait_for(NODE, SQL, WANT, SECS): run SQL on NODE's postgres database every 50 ms, up to SECS
# seconds (default timeout_default), until it returns WANT; returns the last value.
sub fl_wait_for
{
	my ($node, $sql, $want, $secs) = @_;
	my $got = '';
	for (my $t = 0; $t < ($secs // $PostgreSQL::Test::Utils::timeout_default) * 20; $t++)
	{
		$got = $node->safe_psql('postgres', $sql);
		return $got if $got eq $want;
		usleep(50_000);
	}
	return $got;
}

# fl_client(CONNSTR): a psql session kept open on any connection string (a node, or a pooler in
# front of it), for tests that need several client connections at once.
#   $c->query(SQL) returns (stdout, stderr) of SQL, errors in VERBOSITY verbose ("ERROR:  FL001: ...");
#   $c->quit.
sub fl_client
{
	my ($connstr) = @_;
	my $self = bless { in => '', out => '', err => '', n => 0 }, 'FencelockTest::Client';

	$self->{timer} = IPC::Run::timer($PostgreSQL::Test::Utils::timeout_default);
	$self->{run} = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $connstr, '-f', '-' ],
		'<' => \$self->{in}, '>' => \$self->{out}, '2>' => \$self->{err}, $self->{timer});
	$self->query('\set VERBOSITY verbose');
	return $self;
}

# PostgreSQL's hash_bytes_extended (its common/hashfn.c, Bob Jenkins' lookup3), as far as the
# collision needs it: the state after the seed and a name's first 12-byte block.
sub fl_rot32 { my ($x, $k) = @_; return (($x << $k) | ($x >> (32 - $k))) & 0xffffffff; }

sub fl_mix
{
	my ($a, $b, $c) = @_;
	$a = ($a - $c) & 0xffffffff; $a ^= fl_rot32($c, 4);  $c = ($c + $b) & 0xffffffff;
	$b = ($b - $a) & 0xffffffff; $b ^= fl_rot32($a, 6);  $a = ($a + $c) & 0xffffffff;
	$c = ($c - $b) & 0xffffffff; $c ^= fl_rot32($b, 8);  $b = ($b + $a) & 0xffffffff;
	$a = ($a - $c) & 0xffffffff; $a ^= fl_rot32($c, 16); $c = ($c + $b) & 0xffffffff;
	$b = ($b - $a) & 0xffffffff; $b ^= fl_rot32($a, 19); $a = ($a + $c) & 0xffffffff;
	$c = ($c - $b) & 0xffffffff; $c ^= fl_rot32($b, 4);  $b = ($b + $a) & 0xffffffff;
	return ($a, $b, $c);
}

sub fl_state_after_first_block
{
	my ($len, $seed, $block) = @_;
	my ($a, $b, $c) = ((0x9e3779b9 + $len + 3923095) & 0xffffffff) x 3;

	if ($seed != 0)
	{
		$a = ($a + ($seed >> 32)) & 0xffffffff;
		$b = ($b + ($seed & 0xffffffff)) & 0xffffffff;
		($a, $b, $c) = fl_mix($a, $b, $c);
	}
	my @w = unpack('V3', $block);
	return fl_mix(map { ($_->[0] + $_->[1]) & 0xffffffff } [ $a, $w[0] ], [ $b, $w[1] ], [ $c, $w[2] ]);
}

# fl_colliding_name(VICTIM, SEED): a name other than VICTIM (at least 24 bytes), of its length
# and with the same hash_bytes_extended under SEED (a database OID: the wait queue's hash before
# 0.4.0; 452_queue_hash_collision.pl, 850_hostile_input.pl): a random printable first block, and a second block that cancels the difference.  Every
# byte is 0x01..0x7f, valid in any server encoding.
sub fl_colliding_name
{
	my ($victim, $seed) = @_;
	my $len = length $victim;
	my @x = fl_state_after_first_block($len, $seed, substr($victim, 0, 12));
	my @x2 = unpack('V3', substr($victim, 12, 12));

	for (;;)
	{
		my $first = join '', map { chr(0x21 + int(rand(94))) } 1 .. 12;
		next if $first eq substr($victim, 0, 12);
		my @y = fl_state_after_first_block($len, $seed, $first);
		my $second = pack('V3', map { ($x[$_] + $x2[$_] - $y[$_]) & 0xffffffff } 0 .. 2);
		next if $second =~ /[\x00\x80-\xff]/;
		return $first . $second . substr($victim, 24);
	}
}

package FencelockTest::Client;

sub query
{
	my ($self, $sql) = @_;
	my $mark = "fl_client: done " . ++$self->{n};

	$self->{timer}->start($PostgreSQL::Test::Utils::timeout_default);
	$self->{in} .= "$sql\n;\n\\echo '$mark'\n\\warn '$mark'\n";
	$self->{run}->pump until $self->{out} =~ /\Q$mark\E\n/ && $self->{err} =~ /\Q$mark\E\n/;
	my ($out, $err) = ($self->{out}, $self->{err});
	$out =~ s/\Q$mark\E\n//;
	$err =~ s/\Q$mark\E\n//;
	($self->{out}, $self->{err}) = ('', '');
	chomp $out;
	return wantarray ? ($out, $err) : $out;
}

sub quit
{
	my ($self) = @_;
	$self->{in} .= "\\q\n";
	$self->{run}->finish;
}

1;
