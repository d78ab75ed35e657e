#!/usr/bin/perl
# The doc-test: every ```sql block of README.md and doc/*.md, run in order against a cluster
# started with shared_preload_libraries = 'fencelock', each file in a database of its own, and
# the outcomes the text states compared with what happens.  The conventions (doc/testing.md,
# "The doc-test"):
#
#   SELECT fencelock.acquire('r', 'a');   -- 1        a value: the one row's one column
#   SELECT fencelock.renew('r', 'a');     -- true: …  (true/false/t/f, an integer, NULL, 'text';
#                                                      prose may follow after ':' ';' or ',')
#   SELECT state, fence FROM t;                       a row: columns separated by ' | '
#   --  done | 2
#   UPDATE t SET fence = 1;                           an error: its SQLSTATE (required), and the
#   -- ERROR:  fence 1 is older than … (FL001)        message when written after "ERROR:"
#
# The outcome is the comment after the statement on its last line, or the comment line right
# below it.  A statement that states no outcome must succeed.  A block preceded by
#   <!-- doc-test: skip (the reason) -->
# is not run (and reported as skipped, with the reason).  A file with no CREATE EXTENSION
# fencelock statement gets the extension before its first block.
#
#   perl scripts/doc-test.pl [FILE...]    (default: README.md doc/*.md; libpq's PG* variables
#                                         name the cluster; psql from PATH)
#
# Prints "ok N - FILE:LINE ..." / "not ok N - ..." per statement and skipped block, then
# "doc-test: N passed, M failed, K blocks skipped"; exit status 0 only when none failed.  Drops
# its databases and the roles the snippets created afterwards (KEEP=1 keeps the databases).
use strict;
use warnings;
use File::Basename qw(dirname basename);
use File::Temp qw(tempfile);

chdir(dirname(__FILE__) . '/..') or die "chdir: $!";
my @files = @ARGV ? @ARGV : ('README.md', sort glob('doc/*.md'));

my ($n, $passed, $failed, $skipped) = (0, 0, 0, 0);

sub report
{
	my ($ok, $what, @detail) = @_;
	$n++;
	if ($ok) { $passed++; print "ok $n - $what\n"; }
	else
	{
		$failed++;
		print "not ok $n - $what\n";
		print map { "#   $_\n" } @detail;
	}
}

sub psql_cmd
{
	my ($db, @args) = @_;
	my @cmd = ('psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', $db, @args);
	my $out = qx{@{[ join ' ', map { "'" . s/'/'\\''/gr . "'" } @cmd ]}};
	die "psql failed: @cmd\n" if $?;
	return $out;
}

# The statements of a block: [text, first line, last line, outcome or undef].
sub statements
{
	my ($file, $lines, $first) = @_;    # the block's lines; $first: the file line of the first
	my @st;
	my ($cur, $start, $depth) = ('', undef, 0);
	my ($in_quote, $in_ident, $dollar, $in_block) = (0, 0, undef, 0);
	for (my $i = 0; $i < @$lines; $i++)
	{
		my $line = $lines->[$i];
		if ($cur eq '' && !defined $start && $line =~ /^\s*(--.*)?$/) { next; }
		if ($cur eq '' && $line =~ /^\s*\\/)
		{
			push @st, [ $line, $first + $i, $first + $i, undef ];    # a psql meta-command
			next;
		}
		$start //= $first + $i;
		my $pos = 0;
		my $ended;
		while ($pos < length $line)
		{
			my $rest = substr($line, $pos);
			my $step = 1;
			if ($in_quote)
			{
				if ($rest =~ /^''/) { $step = 2; }
				elsif ($rest =~ /^'/) { $in_quote = 0; }
			}
			elsif ($in_ident) { $in_ident = 0 if $rest =~ /^"/; }
			elsif (defined $dollar)
			{
				if (index($rest, $dollar) == 0) { $step = length $dollar; undef $dollar; }
			}
			elsif ($in_block)
			{
				if ($rest =~ /^\*\//) { $step = 2; $in_block = 0; }
			}
			elsif ($rest =~ /^--/) { last; }
			elsif ($rest =~ /^\/\*/) { $in_block = 1; $step = 2; }
			elsif ($rest =~ /^'/) { $in_quote = 1; }
			elsif ($rest =~ /^"/) { $in_ident = 1; }
			elsif ($rest =~ /^(\$[A-Za-z_]*\$)/) { $dollar = $1; $step = length $1; }
			elsif ($rest =~ /^[(]/) { $depth++; }
			elsif ($rest =~ /^[)]/) { $depth--; }
			elsif ($rest =~ /^;/ && $depth == 0) { $ended = $pos; last; }
			$pos += $step;
		}
		if (!defined $ended)
		{
			$cur .= "$line\n";
			next;
		}
		$cur .= substr($line, 0, $ended + 1);
		my $trailing = substr($line, $ended + 1);
		report(0, "$file:" . ($first + $i) . ": one statement per line, please", $line)
		  if $trailing =~ /^\s*[^\s-]/;
		my $below = $i + 1 < @$lines ? $lines->[ $i + 1 ] : '';
		my $outcome;
		for my $c ($trailing, $below)
		{
			next unless $c =~ /^\s*--\s*(.*?)\s*$/;
			$outcome = parse_outcome($1);
			last if $outcome;
		}
		push @st, [ $cur, $start, $first + $i, $outcome ];
		($cur, $start, $depth) = ('', undef, 0);
	}
	push @st, [ $cur, $start, $first + $#$lines, undef ] if $cur =~ /\S/;
	return @st;
}

sub norm_value
{
	my ($v) = @_;
	$v =~ s/^\s+|\s+$//g;
	return 't' if $v =~ /^(true|t)$/i;
	return 'f' if $v =~ /^(false|f)$/i;
	return 'NULL' if $v eq 'NULL';
	$v =~ s/^'(.*)'$/$1/s and $v =~ s/''/'/g;
	return $v;
}

# An outcome comment (without its "--"), or undef for prose.
sub parse_outcome
{
	my ($c) = @_;
	if ($c =~ /^ERROR\b:?\s*(.*)$/)
	{
		my $rest = $1;
		my ($state) = $rest =~ /\((?:SQLSTATE\s+)?([0-9A-Z]{5})\)\s*$/;
		($state) = $rest =~ /^([0-9A-Z]{5})\b/ unless $state;
		return { error => undef, bad => "an ERROR outcome names no SQLSTATE: -- $c" } unless $state;
		(my $msg = $rest) =~ s/\s*\((?:SQLSTATE\s+)?[0-9A-Z]{5}\)\s*$//;
		$msg = '' if $msg eq $state;
		$msg =~ s/\s+/ /g;
		return { error => $state, message => $msg };
	}
	return { row => [ map { norm_value($_) } split /\|/, $c, -1 ] } if $c =~ / \| /;
	if ($c =~ /^(-?\d+|true|false|t|f|NULL|'(?:[^']|'')*')(?:$|[:;,]\s)/)
	{
		return { row => [ norm_value($1) ] };
	}
	return undef;
}

sub describe
{
	my ($o) = @_;
	return 'success' unless $o;
	return "ERROR $o->{error}" . ($o->{message} ? " \"$o->{message}\"" : '') if $o->{error};
	return join(' | ', @{ $o->{row} });
}

my (@dbs, %roles_before);
%roles_before = map { $_ => 1 } split /\n/, psql_cmd('postgres', '-c', 'SELECT rolname FROM pg_roles');

foreach my $file (@files)
{
	open(my $fh, '<', $file) or die "$file: $!";
	my @lines = <$fh>;
	close $fh;
	chomp @lines;

	# The blocks: [first line number, lines, skip reason].
	my (@blocks, $skip, $skip_line);
	for (my $i = 0; $i < @lines; $i++)
	{
		if ($lines[$i] =~ /^ {0,3}<!--\s*doc-test:\s*(.*?)\s*-->/)
		{
			my $d = $1;
			if ($d =~ /^skip\s*\((.+)\)$/) { ($skip, $skip_line) = ($1, $i + 1); }
			else { report(0, "$file:" . ($i + 1) . ": unknown doc-test marker", "<!-- doc-test: $d -->"); }
			next;
		}
		next unless $lines[$i] =~ /^( {0,3})```(\w*)\s*$/;    # (indented by 4: a code block)
		my ($indent, $lang) = ($1, $2);
		my $start = $i + 1;
		my @body;
		for ($i++; $i < @lines && $lines[$i] !~ /^\s*```\s*$/; $i++)
		{
			push @body, $lines[$i] =~ s/^\Q$indent\E//r;
		}
		if ($lang eq 'sql') { push @blocks, [ $start + 1, \@body, $skip ]; }
		elsif (defined $skip)
		{
			report(0, "$file:$skip_line: a doc-test skip marker not followed by a ```sql block");
		}
		undef $skip;
	}
	next unless @blocks;

	my $db = 'fl_doc_' . lc(basename($file, '.md') =~ s/\W/_/gr);
	my @run;
	push @dbs, $db;
	psql_cmd('postgres', '-c', 'SET client_min_messages = warning', '-c', "DROP DATABASE IF EXISTS $db",
		'-c', "CREATE DATABASE $db");
	my $has_create =
	  grep { !defined $_->[2] && grep { /^\s*CREATE EXTENSION\s+fencelock\b/i } @{ $_->[1] } } @blocks;
	push @run, [ "CREATE EXTENSION fencelock;", 0, 0, undef ] unless $has_create;
	foreach my $b (@blocks)
	{
		if (defined $b->[2])
		{
			$n++;
			$skipped++;
			print "ok $n - $file:$b->[0] # skip $b->[2]\n";
			next;
		}
		push @run, statements($file, $b->[1], $b->[0]);
	}

	# One psql session runs the file's statements, each followed by a line with its SQLSTATE.
	my ($sfh, $script) = tempfile('fl-doc-test-XXXXXX', TMPDIR => 1, UNLINK => 1);
	print $sfh "\\set ON_ERROR_STOP 0\n\\pset null NULL\n\\set SHOW_CONTEXT never\n";
	for my $k (0 .. $#run)
	{
		print $sfh "$run[$k][0]\n\\echo \@\@doc-test $k :SQLSTATE :LAST_ERROR_MESSAGE\n";
	}
	close $sfh;
	my @out = split /\n/, qx{psql -X -q -A -t -d $db -f $script 2>/dev/null};
	my (%rows, %state, %message);
	my @acc;
	foreach my $l (@out)
	{
		if ($l =~ /^\@\@doc-test (\d+) (\S+) ?(.*)$/)
		{
			($rows{$1}, $state{$1}, $message{$1}) = ([@acc], $2, $3);
			@acc = ();
		}
		else { push @acc, $l; }
	}
	for my $k (0 .. $#run)
	{
		my ($sql, $l0, $l1, $want) = @{ $run[$k] };
		my $what = $l0 ? "$file:$l0" : "$file: (setup) CREATE EXTENSION fencelock";
		(my $first = $sql) =~ s/\s+/ /g;
		$what .= ' ' . substr($first, 0, 60) if $l0;
		my $st = $state{$k} // '(no answer)';
		my $got = $st eq '00000' ? { row => [ map { norm_value($_) } split /\|/, ($rows{$k}[0] // ''), -1 ] }
		  : { error => $st, message => $message{$k} };
		my $nrows = scalar @{ $rows{$k} // [] };
		if ($want && $want->{bad}) { report(0, $what, $want->{bad}); next; }
		if (!$want)
		{
			report($st eq '00000', $what, "expected success, got ERROR $st: " . ($message{$k} // ''));
		}
		elsif ($want->{error})
		{
			(my $m = $message{$k} // '') =~ s/\s+/ /g;
			my $ok = $st eq $want->{error} && (!$want->{message} || $m eq $want->{message});
			report($ok, $what, "expected " . describe($want),
				"got " . ($st eq '00000' ? 'success' : "ERROR $st \"$m\""));
		}
		else
		{
			my $ok = $st eq '00000' && $nrows == 1 && join("\x1f", @{ $got->{row} }) eq join("\x1f", @{ $want->{row} });
			report($ok, $what, "expected one row: " . describe($want),
				"got " . ($st eq '00000' ? "$nrows row(s)" . ($nrows ? ', the first: ' . describe($got) : '') : "ERROR $st: $message{$k}"));
		}
	}
}

unless ($ENV{KEEP})
{
	psql_cmd('postgres', map { ('-c', "DROP DATABASE IF EXISTS $_") } @dbs) if @dbs;
	foreach my $r (split /\n/, psql_cmd('postgres', '-c', 'SELECT rolname FROM pg_roles'))
	{
		psql_cmd('postgres', '-c', qq{DROP ROLE "$r"}) unless $roles_before{$r};
	}
}
print "doc-test: $passed passed, $failed failed, $skipped blocks skipped\n";
exit($failed ? 1 : 0);
