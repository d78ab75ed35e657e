#!/usr/bin/perl
# check-house.pl TREE [SRCDIR]: the structure doc/design.md promises, checked on a built tree: its
# objects TREE/src/**/*.o (read with nm) and its sources SRCDIR/src/**/*.[ch] (SRCDIR is TREE
# unless a VPATH build names its source tree).  A file is named by its path under src/
# (store/rule.c); the assembly's files are the top-level ones (fencelock.c, shmem.h).
#
#   - calls go down @ORDER below: a file may call a file of its own folder or of a folder below
#     it; siblings (folders on one row) do not call each other, and no folder calls into the
#     assembly (whose own files may call each other: fencelock.c calls shmem.c).  A folder that
#     @ORDER does not name is a finding.  A call is an undefined text symbol of one object that another object defines as
#     text (a call or a function's address); a use of another file's read-only data (a const
#     table) counts as a call.  The finding names the symbol;
#   - includes go down the same order: every #include "..." of src/**/*.[ch] that names a file of
#     src/ names it by its folder ("store/rule.h"); a plain name is only for the shared top-level
#     headers (%SHARED_HEADER; the assembly's other headers, shmem.h, only from the assembly) and
#     PostgreSQL's own headers (anything that is not a file of src/);
#   - no writable global shared between files: a variable an object defines writable (nm's B, D,
#     C, G, S outside .data.rel.ro, which is read-only once loaded) that another object uses,
#     except the settings' variables, whose names are read from src/settings.h;
#   - no cycle in the graph of calls between files;
#   - no function exported by a file that no other file calls (it should be static), except the
#     SQL-callable entry points (PG_FUNCTION_INFO_V1) and the module's own;
#   - no src/ file over 1000 lines;
#   - one file sets the shared-memory hooks.
#
# Prints each finding and exits 1 if there is any.  Needs nm (binutils).
# scripts/check-house-selftest.sh plants a violation of each rule and sees it found.
use strict;
use warnings;
use File::Find;

# The order, top to bottom: '' is the assembly (src/*.c, src/*.h); folders on one row are
# siblings.  Calls and includes only go down.
my @ORDER = ([''], [qw(lease claim)], ['fence'], ['store'], ['wait'], ['observe'], ['base']);
# Top-level headers any file may include by their plain name; the assembly's other headers
# (shmem.h) are the assembly's own.
my %SHARED_HEADER = map { $_ => 1 } qw(fencelock.h compat.h settings.h preload.h);

my %rank;
for my $i (0 .. $#ORDER) { $rank{$_} = $i for @{ $ORDER[$i] } }

my $tree = shift // '.';
my $srcdir = shift // $tree;

# Files under DIR/src ending in one of the suffixes, named by their path under src/.
sub files_under {
	my ($dir, $re) = @_;
	my %name;
	return %name unless -d "$dir/src";
	find({ no_chdir => 1, wanted => sub {
		return unless -f $_ && /$re/;
		(my $n = $File::Find::name) =~ s{^\Q$dir\E/src/}{};
		$name{$n} = $File::Find::name;
	} }, "$dir/src");
	return %name;
}

my %objs = files_under($tree, qr/\.o$/);
die "check-house: no objects in $tree/src (build first)\n" unless %objs;
my %srcs = files_under($srcdir, qr/\.[ch]$/);

sub folder { return $_[0] =~ m{^([^/]+)/} ? $1 : '' }

my @findings;

# Folders the order does not know.
my %folders = map { folder($_) => 1 } keys %objs, keys %srcs;
for my $d (sort grep { !exists $rank{$_} } keys %folders) {
	push @findings, "src/$d/ is not in check-house's order (\@ORDER in scripts/check-house.pl)";
}

# Why a reference from file F to file G goes against the order (undef when it does not).
# S says what F does ("store/rule.c calls fl_x of lease/lease.c").
sub against_order {
	my ($f, $g, $s) = @_;
	my ($a, $b) = (folder($f), folder($g));
	return undef if $a eq $b;
	return undef unless exists $rank{$a} && exists $rank{$b};
	return "$s: nothing calls into the assembly (src/*.c)" if $b eq '';
	return undef if $rank{$a} < $rank{$b};
	return "$s: $a and $b are siblings" if $rank{$a} == $rank{$b};
	return "$s: $a is below $b";
}

# Symbols, from nm's System V format (its section tells .data.rel.ro from writable data).
my (%text, %rodata, %rwdata, %uses);    # file => {symbol => 1}
my %obj_name = map { $objs{$_} => $_ =~ s/\.o$/.c/r } keys %objs;
$text{$_} = {} for values %obj_name;
open(my $nm, '-|', 'nm', '-f', 'sysv', map { $objs{$_} } sort keys %objs) or die "check-house: nm: $!\n";
my $c;
while (<$nm>) {
	if (/^Symbols from (.*):$/) { $c = $obj_name{$1} // die "check-house: nm names $1\n"; next }
	my ($sym, undef, $class, undef, undef, undef, $section) = map { s/^\s+|\s+$//gr } split /\|/, $_, -1;
	next unless defined $c && defined $section && $class =~ /^[A-Z]$/;
	if ($class eq 'T') { $text{$c}{$sym} = 1 }
	elsif ($class eq 'U') { $uses{$c}{$sym} = 1 }
	elsif ($class eq 'R' || ($class eq 'D' && $section =~ /^\.data\.rel\.ro/)) { $rodata{$c}{$sym} = 1 }
	elsif ($class =~ /^[BDCGS]$/) { $rwdata{$c}{$sym} = 1 }
}
close $nm or die "check-house: nm failed\n";
my (%text_owner, %ro_owner, %rw_owners);
for my $f (keys %text) { $text_owner{$_} = $f for keys %{ $text{$f} } }
for my $f (keys %rodata) { $ro_owner{$_} = $f for keys %{ $rodata{$f} } }
for my $f (sort keys %rwdata) { push @{ $rw_owners{$_} }, $f for keys %{ $rwdata{$f} } }

# The settings' variables: every "extern TYPE name;" of src/settings.h.
my %setting;
if (open(my $fh, '<', "$srcdir/src/settings.h")) {
	while (<$fh>) { $setting{$1} = 1 if /^\s*extern\s[^(;]*?\b(\w+)\s*(?:\[[^\]]*\])?\s*;/ }
	close $fh;
}

# Calls (and uses of read-only data) between files; writable globals shared.
my (%edge, %why);
for my $f (sort keys %uses) {
	for my $sym (sort keys %{ $uses{$f} }) {
		if (my $g = $text_owner{$sym} // $ro_owner{$sym}) {
			next if $g eq $f;
			$edge{$f}{$g} = 1;
			push @{ $why{"$f $g"} }, $sym;
		}
		elsif (my $owners = $rw_owners{$sym}) {
			next if $setting{$sym};
			push @findings, "$f uses $sym, a writable global of @$owners (only the settings of "
			  . "src/settings.h may be shared)";
		}
	}
}
for my $sym (sort grep { @{ $rw_owners{$_} } > 1 } keys %rw_owners) {
	push @findings, "$sym is a writable global defined in each of @{ $rw_owners{$sym} }";
}

sub why {
	my @s = @{ $why{"$_[0] $_[1]"} };
	return $s[0] . (@s > 1 ? ' (and ' . (@s - 1) . ' more)' : '');
}

# Calls go down.
for my $f (sort keys %edge) {
	for my $g (sort keys %{ $edge{$f} }) {
		my $verb = $text_owner{ $why{"$f $g"}[0] } ? 'calls' : 'uses';
		my $bad = against_order($f, $g, "$f $verb " . why($f, $g) . " of $g");
		push @findings, $bad if $bad;
	}
}

# Includes go down.  The compiler looks for "name.h" beside the including file first, then in
# src/ (-I), then in PostgreSQL's include directories.
sub normal {
	my @p;
	for (split m{/}, $_[0]) { next if $_ eq '.' || $_ eq ''; $_ eq '..' ? pop @p : push @p, $_ }
	return join '/', @p;
}
for my $f (sort keys %srcs) {
	my $dir = $f =~ m{^(.*/)} ? $1 : '';
	open(my $fh, '<', $srcs{$f}) or die "check-house: $srcs{$f}: $!\n";
	while (my $line = <$fh>) {
		next unless $line =~ /^\s*#\s*include\s+"([^"]+)"/;
		my $inc = $1;
		my $beside = normal("$dir$inc");
		my $at = "$f:$.: #include \"$inc\"";
		if ($dir ne '' && $inc !~ m{/} && $srcs{$beside}) {
			push @findings, "$at: name the folder (\"$beside\")";
		}
		elsif ($inc =~ m{(^|/)\.\.?/} && $srcs{$beside}) {
			push @findings, "$at: name it from src/ (\"$beside\")";
		}
		elsif ($inc !~ m{/} && $srcs{$inc}) {    # a top-level header
			push @findings, "$at: $inc is the assembly's own (only src/*.c include it)"
			  if !$SHARED_HEADER{$inc} && $dir ne '';
		}
		elsif ($srcs{$inc}) {
			my $bad = against_order($f, $inc, "$f:$. includes $inc");
			push @findings, $bad if $bad;
		}
	}
	close $fh;
}

# Cycles: depth-first search, reporting each back edge's cycle once.
my (%state, @stack, %seen_cycle);
sub visit {
	my ($f) = @_;
	$state{$f} = 1;
	push @stack, $f;
	for my $g (sort keys %{ $edge{$f} || {} }) {
		if (($state{$g} // 0) == 1) {
			my @cycle = (@stack[(grep { $stack[$_] eq $g } 0 .. $#stack)[0] .. $#stack], $g);
			my $key = join ' ', sort @cycle[0 .. $#cycle - 1];
			next if $seen_cycle{$key}++;
			push @findings, 'call cycle: '
			  . join(' -> ', map { $_ < $#cycle ? "$cycle[$_] [" . why($cycle[$_], $cycle[$_ + 1]) . ']' : $cycle[$_] } 0 .. $#cycle);
		}
		elsif (!$state{$g}) { visit($g) }
	}
	pop @stack;
	$state{$f} = 2;
}
visit($_) for grep { !$state{$_} } sort keys %text;

# Exports nobody else calls.
my %used_elsewhere;
for my $f (keys %uses) { $used_elsewhere{$_} = 1 for keys %{ $uses{$f} } }
for my $f (sort keys %text) {
	for my $sym (sort keys %{ $text{$f} }) {
		next if $used_elsewhere{$sym};
		next if $sym =~ /^(fencelock_|pg_finfo_|_PG_init$|Pg_magic_func$)/;
		push @findings, "$f exports $sym, which no other file calls (make it static)";
	}
}

# File sizes, and the shared-memory hooks.
my @hooks;
for my $f (sort keys %srcs) {
	open(my $fh, '<', $srcs{$f}) or die "check-house: $srcs{$f}: $!\n";
	local $/;
	my $text = <$fh>;
	close $fh;
	my $n = () = $text =~ /^/mg;
	push @findings, "$f has $n lines (over 1000)" if $n > 1000;
	push @hooks, $f if $f =~ /\.c$/ && $text =~ /\bshmem_(request|startup)_hook\s*=[^=]/;
}
push @findings, "the shared-memory hooks are set in " . scalar(@hooks) . " files: @hooks" if @hooks > 1;

print "check-house: $_\n" for @findings;
printf "check-house: %d files, %d calls between them, %s\n", scalar(keys %text),
  scalar(map { keys %$_ } values %edge), @findings ? scalar(@findings) . " findings" : 'clean';
exit(@findings ? 1 : 0);
