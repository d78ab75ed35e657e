#!/usr/bin/perl
# Every file a comment, a message or a document names must exist, and every Markdown link must
# lead somewhere: a file of the repository, and a heading of it when the link has an anchor.
# Reads the files git tracks (and untracked ones it does not ignore); prints each dangling
# reference as FILE:LINE: ... and exits 1 if there is any.
use strict;
use warnings;

my @files = split /\0/, `git ls-files -z --cached --others --exclude-standard`;
die "check-refs: not in a git checkout\n" if $? != 0;
my %exists = map { $_ => 1 } grep { -e $_ } @files;
my $top = qr{(?:doc|src|test|bench|bin|scripts|sql|mk|expected|examples|contrib|\.ci)};
my $bad = 0;

# The C identifiers the sources define or use, and the SQL objects the install scripts create:
# a document may name only those.
my (%c_word, %sql_object);
for my $f (grep { m{\.(c|h)$} } keys %exists) {
	open my $fh, '<', $f or next;
	local $/;
	my $src = <$fh>;
	$c_word{$_} = 1 for $src =~ /\b([A-Za-z_]\w*)\b/g;
}
for my $f (grep { m{^sql/.*\.sql$} } keys %exists) {
	open my $fh, '<', $f or next;
	local $/;
	my $sql = <$fh>;
	$sql_object{$_} = 1
	  for $sql =~ /CREATE\s+(?:OR\s+REPLACE\s+)?(?:FUNCTION|VIEW|TABLE|INDEX)\s+(?:fencelock\.)?(\w+)/gi;
}

# GitHub's anchor of a heading: lower case, punctuation other than '-' and '_' dropped,
# spaces turned into '-'.
sub slug {
	my $h = lc shift;
	$h =~ s/`//g;
	$h =~ s/[^\w\- ]//g;
	$h =~ s/ /-/g;
	return $h;
}

my %anchors;
sub anchors_of {
	my $file = shift;
	return $anchors{$file} if $anchors{$file};
	my %seen;
	open my $fh, '<', $file or return {};
	my $fence = 0;
	while (<$fh>) {
		$fence = !$fence if /^```/;
		next if $fence;
		next unless /^#+\s+(.*?)\s*$/;
		my $s = slug($1);
		my $n = $seen{"#count:$s"}++;
		$seen{ $n ? "$s-$n" : $s } = 1;
	}
	return $anchors{$file} = \%seen;
}

sub resolve {    # a path relative to the referring file's folder, or to the top
	my ($from, $path) = @_;
	(my $dir = $from) =~ s{[^/]*$}{};
	my $p = "$dir$path";
	1 while $p =~ s{(^|/)(?!\.\./)[^/]+/\.\./}{$1};
	$p =~ s{^\./}{};
	return $p;
}

sub complain {
	my ($file, $line, $what) = @_;
	print "$file:$line: $what\n";
	$bad++;
}

for my $file (sort keys %exists) {
	next unless $file =~ m{(\.(c|h|sh|sql|pl|pm|mk|md|spec|1)$|(^|/)Makefile$|^\.ci/run$)};
	next if $file =~ m{^expected/};   # test output quotes the tests' own input
	next if $file eq 'scripts/check-refs.pl';
	open my $fh, '<', $file or next;
	my $md = $file =~ /\.md$/;
	while (my $text = <$fh>) {
		# Markdown links to files of the repository, with or without an anchor.
		if ($md) {
			while ($text =~ /\]\(([^)\s]+)\)/g) {
				my $target = $1;
				next if $target =~ m{^[a-z]+:}i;    # http:, mailto:
				my ($path, $anchor) = split /#/, $target, 2;
				my $dest = $path eq '' ? $file : resolve($file, $path);
				if ($path ne '' && !-e $dest) {
					complain($file, $., "link to a missing file: $target");
				} elsif (defined $anchor && $dest =~ /\.md$/ && !anchors_of($dest)->{$anchor}) {
					complain($file, $., "link to a missing section: $target");
				}
			}
		}
		# fencelock's C functions and SQL objects named in documents.
		if ($md) {
			while ($text =~ /`((?:fl|fencelock)_\w+)(?:\(\))?`/g) {
				complain($file, $., "names a C identifier no source has: $1") unless $c_word{$1};
			}
			while ($text =~ /\bfencelock\.([a-z_]\w*)\s*\(/g) {
				complain($file, $., "names an SQL function no install script creates: fencelock.$1")
				  unless $sql_object{$1};
			}
		}
		# Paths named in prose and comments: a folder of the repository, then a file name.
		while ($text =~ m{(?<![\w./-])($top/[^\s'"`(),;|]+)}g) {
			my $path = $1;
			$path =~ s/[.:]+$//;
			next if $path =~ /[*<>\[\]\$?{}]|NNN|NAME|XXX/;    # patterns, variables, placeholders
			next if $path =~ m{^src/(test|include|backend)(/|$)};   # PostgreSQL's own source tree
			next if $path =~ m{^(bin|scripts|test/chaos)/[\w-]+$} && -e "$path.c"; # a built program
			next if $path =~ m{/$};
			next if $path =~ m{(^|/)node_modules/};   # installed by npm ci
			next if -e $path;
			my $rel = resolve($file, $path);
			next if -e $rel;
			complain($file, $., "names a missing file: $path");
		}
	}
	close $fh;
}
print "check-refs: ", ($bad ? "$bad dangling reference(s)" : "every reference resolves"), "\n";
exit($bad ? 1 : 0);
