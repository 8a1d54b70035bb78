#!/usr/bin/perl
# SPDX-License-Identifier: MIT
# Section 3 man pages for vsched's public functions, one page a function,
# written from the doc comment above each declaration in the headers.
#
#   gen-man3.pl [--version V] [--date D] [--check] OUTDIR HEADER...
#
# A public function is a VSCHED_API declaration, or a documented static
# inline one, whose name starts with vsched_ but not vsched__ (those are
# the inline fast paths' entry points into the library, not API). Each page
# has NAME, LIBRARY, SYNOPSIS (its header and its prototype), DESCRIPTION,
# RETURN VALUE, CONTEXT (the calling thread) and SEE ALSO.
#
# RETURN VALUE is the comment's @return text; CONTEXT is its "Context:"
# text, or the headers' short forms: a sentence starting "Any thread" or
# "vCPU thread", or "(any thread)". A comment without @return gives its
# first sentence when that names the value ("The vCPU's id (>= 0) or
# VSCHED_EINVAL."). What a comment does not state (a gap) the page says
# is not stated; --check writes no page and prints the gaps, one line a
# function, for test/install/check-man.sh to compare with doc/man/gaps.txt.
# A public function without a doc comment is an error (exit 1).
# Only perl-base is used (Essential on Debian).
use strict;
use warnings;

my ($version, $date, $check) = ('', '', 0);
while (@ARGV && $ARGV[0] =~ /^--/) {
	my $o = shift @ARGV;
	if ($o eq '--version') { $version = shift @ARGV; }
	elsif ($o eq '--date') { $date = shift @ARGV; }
	elsif ($o eq '--check') { $check = 1; }
	else { die "gen-man3.pl: unknown option $o\n"; }
}
my $out = shift @ARGV or die "usage: gen-man3.pl [--version V] [--date D] [--check] OUTDIR HEADER...\n";
my @headers = @ARGV or die "gen-man3.pl: no header given\n";

my (@funcs, $errors, @fallbacks);
$errors = 0;

# Read one header: every documented public function, in order.
sub parse_header {
	my ($path) = @_;
	(my $hdr = $path) =~ s{.*/include/}{};
	$hdr = "vsched/" . (split m{/}, $path)[-1] unless $hdr =~ m{^vsched/};
	open my $fh, '<', $path or die "$path: $!\n";
	my @lines = <$fh>;
	close $fh;
	my ($doc, $cond) = (undef, 0);
	for (my $i = 0; $i < @lines; $i++) {
		my $l = $lines[$i];
		if ($l =~ m{^\s*/\*\*(.*)$}) {
			# A doc comment: collect it up to */.
			my $text = $1;
			my $one = $text =~ s{\*/\s*$}{};
			my @c = ($text);
			while (!$one && ++$i < @lines) {
				my $c = $lines[$i];
				chomp $c;
				if ($c =~ s{\s*\*/\s*$}{}) {
					$c =~ s{^\s*\*? ?}{};
					push @c, $c;
					last;
				}
				$c =~ s{^\s*\* ?}{};
				$c =~ s{^\s*\*$}{};
				push @c, $c;
			}
			my $joined = join("\n", @c);
			if ($joined =~ /\@cond\b/) { $cond = 1; $doc = undef; next; }
			$doc = $joined;
			next;
		}
		if ($l =~ m{\@endcond}) { $cond = 0; $doc = undef; next; }
		next if $cond;
		next if $l =~ /^\s*$/ || $l =~ /^\s*#/;
		if ($l =~ /^\s*(VSCHED_API\s|static inline\s)/) {
			my $decl = $l;
			while ($decl !~ /[;{]/ && ++$i < @lines) {
				$decl .= $lines[$i];
			}
			$decl =~ s/\s*\{.*//s;
			$decl =~ s/;.*//s;
			$decl =~ s/^\s*VSCHED_API\s+//;
			$decl =~ s/\s+/ /g;
			$decl =~ s/\( /(/g;
			$decl =~ s/^\s+|\s+$//g;
			my ($name) = $decl =~ /\b(vsched_\w+)\s*\(/;
			if ($name && $name !~ /^vsched__/) {
				if (!defined $doc) {
					warn "$path: $name has no doc comment\n";
					$errors++;
				} elsif (!grep { $_->{name} eq $name } @funcs) {
					push @funcs, { name => $name, decl => $decl, doc => $doc,
						       header => $hdr };
				}
			}
		}
		$doc = undef;
	}
}

parse_header($_) for @headers;
die "gen-man3.pl: no public function found\n" unless @funcs;
my %have = map { $_->{name} => 1 } @funcs;

# Inline markup of the comments to roff.
sub inline {
	my ($t) = @_;
	$t =~ s/\\/\\e/g;
	$t =~ s/(^|[\s(,\[])-(?=[\w.])/$1\\-/g;
	$t =~ s/\*\*([^*]+)\*\*/\\fB$1\\fR/g;
	$t =~ s/`([^`]+)`/\\fI$1\\fR/g;
	$t =~ s/\b(vsched_\w+)\(\)/\\fB$1\\fR()/g;
	$t =~ s/\@p\s+(\w+)/\\fI$1\\fR/g;
	return $t;
}

# A paragraph's lines to roff: fill text, "- " items, @code blocks.
sub body {
	my ($text) = @_;
	my @r;
	my $code = 0;
	for my $l (split /\n/, $text) {
		if ($l =~ /^\s*\@code\b/) { push @r, '.PP', '.RS 4', '.nf'; $code = 1; next; }
		if ($l =~ /^\s*\@endcode\b/) { push @r, '.fi', '.RE'; $code = 0; next; }
		if ($code) {
			(my $c = $l) =~ s/\\/\\e/g;
			$c =~ s/-/\\-/g;
			$c =~ s/^([.'])/\\&$1/;
			push @r, $c;
			next;
		}
		if ($l =~ /^\s*$/) { push @r, '.PP'; next; }
		if ($l =~ /^\s*[-*]\s+(.*)/) {
			push @r, '.IP \(bu 2';
			$l = $1;
		} elsif ($l =~ /^\s*(\d+\.)\s+(.*)/) {
			push @r, ".IP $1 4";
			$l = $2;
		}
		$l =~ s/^\s+//;
		my $c = inline($l);
		$c =~ s/^([.'])/\\&$1/;
		push @r, $c;
	}
	while (@r && $r[0] eq '.PP') { shift @r; }
	while (@r && $r[-1] eq '.PP') { pop @r; }
	return @r;
}

sub sentences { my ($t) = @_; $t =~ s/\s+/ /g; return split /(?<=[.;])\s+(?=[A-Z])/, $t; }

# Split a comment into description, @param list, return value and
# context. Within a paragraph, "@return", "@param" and "Context:" each run
# to the next of them or to the paragraph's end; a sentence that starts
# "Any thread" is the context too (the headers' short form).
sub split_doc {
	my ($f) = @_;
	my (%r, @params, @desc, $ret, $ctx);
	for my $para (split /\n[ \t]*\n/, $f->{doc}) {
		my @d;
		for my $part (split /(?=\@returns?\b|\@param\b|(?<![\w])Context:)/, $para) {
			if ($part =~ /^\@returns?\s+(.*)/s) { $ret = defined $ret ? "$ret\n$1" : $1; }
			elsif ($part =~ /^\@param\s+(\w+)\s+(.*)/s) { push @params, [$1, $2]; }
			elsif ($part =~ /^Context:\s*(.*)/s) { $ctx = defined $ctx ? "$ctx\n$1" : $1; }
			else { push @d, $part; }
		}
		my $d = join('', @d);
		push @desc, $d if $d =~ /\S/;
	}
	if (!defined $ctx) {
		for my $t (\$ret, @desc ? \$desc[-1] : ()) {
			next unless defined $$t;
			if ($$t =~ s/(?:^|(?<=[.;])\s+)((?:Any|vCPU) thread\b[^.]*\.)//s) {
				$ctx = $1;
				last;
			}
		}
	}
	# "(any thread)" inside a sentence.
	$ctx = 'Any thread.' if !defined $ctx && grep { /\(any thread\)/ } @desc;
	$r{desc} = join("\n\n", map { s/^\s+|\s+$//gr } @desc);
	$r{params} = \@params;
	$r{context} = $ctx;
	$r{return} = $ret;
	if (!defined $r{return}) {
		my ($first, @rest) = sentences($r{desc});
		if (defined $first && ($first =~ /^(The|True|Name|Index)\b/ ||
				       $first =~ /\bor (NULL|VSCHED_E[A-Z]+)\.$/)) {
			# With the later sentences that give the value for a NULL
			# argument ("NULL for NULL.", "VSCHED_DEADLINE_NONE for a
			# NULL vm."): part of the return value too.
			my @null = grep { /^\S+ for (?:a )?NULL\b[^.]*\.$/ } @rest;
			$r{return} = join(' ', $first, @null);
			push @fallbacks, "$f->{name}: RETURN VALUE is the first sentence" .
				(@null ? " and the NULL case" : "") . ": $r{return}";
		}
	}
	for my $k (qw(return context)) {
		next if defined $r{$k} && $r{$k} =~ /\S/;
		push @{ $f->{gaps} }, $k;
		$r{$k} = "Not stated in the comment of this function in <$f->{header}>" .
			 " (the description above is all it says).";
	}
	return \%r;
}

my %byheader;
push @{ $byheader{$_->{header}} }, $_->{name} for @funcs;

sub page {
	my ($f, $d) = @_;
	my $name = $f->{name};
	# <vsched/kvm.h> and <vsched/kvmgov.h> are libvsched-kvm's.
	my $kvm = $f->{header} =~ m{^vsched/kvm(?:gov)?\.h$};
	my $lib = $kvm ? 'vsched-kvm' : 'vsched';
	(my $brief = (sentences($d->{desc}))[0] // $name) =~ s/\s+/ /g;
	$brief =~ s/\.$//;
	# A whatis line, not a paragraph: a long first sentence is cut before
	# its first parenthesis or colon.
	$brief =~ s/^(.{10,}?)(?: \(|: ).*/$1/ if length($brief) > 70;
	# A first sentence that ends inside a parenthesis (at its ";"): cut
	# before that parenthesis too.
	$brief =~ s/^(.{10,}?) \([^)]*$/$1/;
	$brief = inline($brief);
	$brief =~ s/\\f[BIR]//g;
	my @p;
	push @p, ".\\\" Generated by doc/man/gen-man3.pl from <$f->{header}>: edit the header.";
	push @p, ".TH " . uc($name) . " 3 \"$date\" \"vsched $version\" \"vsched Library Functions\"";
	push @p, '.nh', '.ad l';
	push @p, '.SH NAME', "$name \\- $brief";
	push @p, '.SH LIBRARY';
	push @p, "vsched (\\fIlib$lib\\fR, \\fB\\-l$lib\\fR; \\fBpkg\\-config \\-\\-cflags \\-\\-libs $lib\\fR)";
	push @p, '.SH SYNOPSIS', '.nf', ".B #include <$f->{header}>", '.PP';
	(my $proto = "$f->{decl};") =~ s/\\/\\e/g;
	$proto =~ s/-/\\-/g;
	# The prototype: on one line if it fits, else broken after commas and
	# indented under the first parameter.
	if (length($f->{decl}) <= 72) {
		push @p, ".B \"$proto\"";
	} else {
		my ($head, @args) = split /(?<=[(,])\s*/, $proto;
		my $line = $head;
		my $ind = ' ' x length($f->{decl} =~ s/\(.*//sr) . ' ';
		for my $a (@args) {
			if (length($line) + length($a) + 1 > 72 && $line ne $head) {
				push @p, ".B \"$line\"";
				$line = $ind . $a;
			} else {
				$line .= ($line eq $head ? '' : ' ') . $a;
			}
		}
		push @p, ".B \"$line\"";
	}
	push @p, '.fi';
	push @p, '.SH DESCRIPTION', body($d->{desc});
	if (@{ $d->{params} }) {
		for my $pa (@{ $d->{params} }) {
			push @p, '.TP', "\\fI$pa->[0]\\fR", body($pa->[1]);
		}
	}
	push @p, '.SH RETURN VALUE', body($d->{return});
	push @p, '.SH CONTEXT', body(ucfirst $d->{context});
	my %see;
	for my $ref ($f->{doc} =~ /\b(vsched_\w+)\(\)/g) {
		$see{$ref} = 1 if $have{$ref} && $ref ne $name;
	}
	$see{$_} = 1 for grep { $_ ne $name } @{ $byheader{$f->{header}} };
	my @see = sort keys %see;
	push @p, '.SH SEE ALSO', join(",\n", map { ".BR $_ (3)" } @see) if @see;
	return join("\n", @p) . "\n";
}

my @pages;
for my $f (@funcs) {
	my $d = split_doc($f);
	push @pages, [$f->{name}, page($f, $d)];
}
if ($check) {
	# The gaps (sorted), for test/install/check-man.sh to compare with
	# doc/man/gaps.txt; the short forms taken as return value, on stderr.
	print STDERR "note: $_\n" for @fallbacks;
	print "$_->{name}: no " . join(" and no ", @{ $_->{gaps} }) . "\n"
		for sort { $a->{name} cmp $b->{name} } grep { $_->{gaps} } @funcs;
	printf STDERR "%d public functions, %d with a gap, %d errors\n",
		scalar @funcs, scalar(grep { $_->{gaps} } @funcs), $errors;
	exit($errors ? 1 : 0);
}
exit 1 if $errors;
mkdir $out unless -d $out;
for my $p (@pages) {
	my $file = "$out/$p->[0].3";
	open my $fh, '>', "$file.tmp" or die "$file: $!\n";
	print $fh $p->[1];
	close $fh or die "$file: $!\n";
	rename "$file.tmp", $file or die "$file: $!\n";
}
printf "gen-man3.pl: %d pages in %s\n", scalar @pages, $out;
