#!/usr/bin/perl
# check-house.pl TREE: the structure doc/design.md promises, checked on a built tree (TREE/src/*.o).
#
#   - no cycle in the graph of calls between src/ files (a call is an undefined text symbol of one
#     object that another defines; settings' variables are data, not calls);
#   - no function exported by a file that no other file calls (it should be static), except the
#     SQL-callable entry points (PG_FUNCTION_INFO_V1) and the module's own;
#   - no src/ file over 1000 lines;
#   - one file sets the shared-memory hooks.
#
# Prints each finding and exits 1 if there is any.  Needs nm (binutils).
use strict;
use warnings;

my $tree = shift // '.';
my @objs = sort glob("$tree/src/*.o");
die "check-house: no objects in $tree/src (build first)\n" unless @objs;

my (%defines, %uses);    # file => {symbol => 1}
for my $o (@objs) {
	(my $f = $o) =~ s{.*/}{};
	$f =~ s/\.o$/.c/;
	open(my $nm, '-|', 'nm', '-P', $o) or die "check-house: nm $o: $!\n";
	while (<$nm>) {
		my ($sym, $type) = split;
		next unless defined $type;
		$defines{$f}{$sym} = 1 if $type eq 'T';
		$uses{$f}{$sym}    = 1 if $type eq 'U';
	}
	close $nm;
}
my %owner;
for my $f (keys %defines) { $owner{$_} = $f for keys %{ $defines{$f} } }

my (%edge, %why);
for my $f (keys %uses) {
	for my $sym (keys %{ $uses{$f} }) {
		my $g = $owner{$sym} or next;
		next if $g eq $f;
		$edge{$f}{$g} = 1;
		$why{"$f $g"} //= $sym;
	}
}

my @findings;

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
			  . join(' -> ', map { $_ < $#cycle ? "$cycle[$_] ($why{\"$cycle[$_] $cycle[$_+1]\"})" : $cycle[$_] } 0 .. $#cycle);
		}
		elsif (!$state{$g}) { visit($g) }
	}
	pop @stack;
	$state{$f} = 2;
}
visit($_) for grep { !$state{$_} } sort keys %defines;

# Exports nobody else calls.
my %used_elsewhere;
for my $f (keys %uses) { $used_elsewhere{$_} = 1 for keys %{ $uses{$f} } }
for my $f (sort keys %defines) {
	for my $sym (sort keys %{ $defines{$f} }) {
		next if $used_elsewhere{$sym};
		next if $sym =~ /^(fencelock_|pg_finfo_|_PG_init$|Pg_magic_func$)/;
		push @findings, "$f exports $sym, which no other file calls (make it static)";
	}
}

# File sizes.
for my $src (sort glob("$tree/src/*.c"), glob("$tree/src/*.h")) {
	open(my $fh, '<', $src) or die;
	my $n = 0;
	$n++ while <$fh>;
	close $fh;
	(my $f = $src) =~ s{.*/}{};
	push @findings, "$f has $n lines (over 1000)" if $n > 1000;
}

# The shared-memory hooks.
my @hooks;
for my $src (sort glob("$tree/src/*.c")) {
	open(my $fh, '<', $src) or die;
	local $/;
	my $text = <$fh>;
	close $fh;
	(my $f = $src) =~ s{.*/}{};
	push @hooks, $f if $text =~ /\bshmem_(request|startup)_hook\s*=[^=]/;
}
push @findings, "the shared-memory hooks are set in " . scalar(@hooks) . " files: @hooks" if @hooks > 1;

print "check-house: $_\n" for @findings;
printf "check-house: %d files, %d calls between them, %s\n", scalar(keys %defines),
  scalar(map { keys %$_ } values %edge), @findings ? scalar(@findings) . " findings" : 'clean';
exit(@findings ? 1 : 0);
