#!/usr/bin/perl
# md2man.pl NAME SECTION VERSION < doc/NAME.md > NAME.SECTION
#
# Turns a manual written in Markdown (doc/fencelock-run.md) into a man page, so that the page
# `man` shows and the page on the web never drift apart.  Handles what that manual uses:
# headings, paragraphs, numbered and bulleted lists, pipe tables, fenced code blocks, `code`,
# **bold** and *italic*, and [links](target) (the link text is kept).
use strict;
use warnings;
use utf8;
binmode STDIN, ':encoding(UTF-8)';
binmode STDOUT, ':encoding(UTF-8)';

my ($name, $section, $version) = @ARGV;
die "usage: md2man.pl NAME SECTION VERSION < in.md > out.1\n" unless defined $version;

sub esc {    # roff-escape plain text
	my $t = shift;
	$t =~ s/\\/\\e/g;
	$t =~ s/^([.'])/\\&$1/;
	$t =~ s/-/\\-/g;
	$t =~ s/([^\x00-\x7f])/sprintf('\\[u%04X]', ord $1)/ge;
	return $t;
}

sub inline {
	my $t = esc(shift);
	$t =~ s/\[([^\]]+)\]\([^)]+\)/$1/g;
	$t =~ s/\*\*([^*]+)\*\*/\\fB$1\\fR/g;
	$t =~ s/`([^`]+)`/\\fB$1\\fR/g;
	$t =~ s/(?<![\w*])\*([^*\s][^*]*)\*(?!\w)/\\fI$1\\fR/g;
	$t =~ s/\A([.'])/\\&$1/;
	return $t;
}

my @out = (
	qq{.\\" Generated from doc/$name.md by scripts/md2man.pl; edit that file instead.},
	qq{.TH } . uc($name) . qq{ $section "" "fencelock $version" "fencelock"});
my @lines = <STDIN>;
chomp @lines;
my $i = 0;
my $title_seen = 0;
while ($i < @lines) {
	my $l = $lines[$i];
	if ($l =~ /^```/) {
		push @out, '.PP', '.RS 4', '.nf';
		$i++;
		while ($i < @lines && $lines[$i] !~ /^```/) {
			push @out, esc($lines[$i]);
			$i++;
		}
		push @out, '.fi', '.RE';
		$i++;
		next;
	}
	if ($l =~ /^# (.*)/) {    # the title: "name(1) — what it does"
		my $t = $1;
		$t =~ s/^\S+\(\d\)\s*[—-]\s*//;
		push @out, '.SH NAME', esc("$name - $t");
		$title_seen = 1;
		$i++;
		next;
	}
	if ($l =~ /^(#{2,}) (.*)/) {
		my ($level, $heading) = ($1, $2);
		push @out, ($level eq '##' ? '.SH ' . uc(esc($heading)) : '.SS ' . esc($heading));
		$i++;
		next;
	}
	if ($l =~ /^\|/) {    # a pipe table: header, separator, rows
		my @rows;
		while ($i < @lines && $lines[$i] =~ /^\|/) {
			push @rows, $lines[$i] unless $lines[$i] =~ /^\|[\s:|-]+\|$/;
			$i++;
		}
		for my $r (@rows[1 .. $#rows]) {
			my @cells = map { s/^\s+|\s+$//gr } split /(?<!\\)\|/, $r;
			shift @cells;
			push @out, '.TP', inline(shift @cells), inline(join(' ', @cells));
		}
		next;
	}
	if ($l =~ /^(\d+)\.\s+(.*)/ || $l =~ /^[-*]\s+(.*)/) {    # a list item, with its continuation
		my ($tag, $text) = defined $2 ? ("$1.", $2) : ("\\(bu", $1);
		$i++;
		while ($i < @lines && $lines[$i] =~ /^\s{2,}\S/) {
			$text .= ' ' . ($lines[$i] =~ s/^\s+//r);
			$i++;
		}
		push @out, ".IP $tag 4", inline($text);
		next;
	}
	if ($l =~ /^\s*$/) {
		$i++;
		next;
	}
	my $text = $l;    # a paragraph
	$i++;
	while ($i < @lines && $lines[$i] !~ /^\s*$/ && $lines[$i] !~ /^(```|#|\||\d+\.\s|[-*]\s)/) {
		$text .= ' ' . $lines[$i];
		$i++;
	}
	push @out, '.PP', inline($text);
}
die "md2man.pl: no '# title' line\n" unless $title_seen;
print join("\n", @out), "\n";
