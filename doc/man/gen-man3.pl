#!/usr/bin/perl
# SPDX-License-Identifier: MIT
# Section 3 man pages for vsched's public functions, one page a function,
# written from the doc comment above each declaration in the headers.
#
#   gen-man3.pl [--version V] [--date D] [--docdir D] [--check] OUTDIR HEADER...
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
#
# Each public type (a struct or enum defined in a header, a function
# pointer typedef) gets a page too, NAME.3type (section 3type, as the
# Linux man-pages project files types): its definition as the header has
# it, members' comments included, its doc comment, and SEE ALSO the
# functions that take it or name it or its constants; a function's page
# names the types it takes the same way.
#
# --docdir D: where README.md, the guides (doc/*.md) and the adoption
# examples (examples/adopt/*.c, in D/examples) are installed; a page whose
# text names one of them, or a source file (lib/...), says so in NOTES.
# Only perl-base is used (Essential on Debian).
use strict;
use warnings;

my ($version, $date, $check, $docdir) = ('', '', 0, '');
while (@ARGV && $ARGV[0] =~ /^--/) {
	my $o = shift @ARGV;
	if ($o eq '--version') { $version = shift @ARGV; }
	elsif ($o eq '--date') { $date = shift @ARGV; }
	elsif ($o eq '--check') { $check = 1; }
	elsif ($o eq '--docdir') { $docdir = shift @ARGV; }
	else { die "gen-man3.pl: unknown option $o\n"; }
}
my $out = shift @ARGV or die "usage: gen-man3.pl [--version V] [--date D] [--docdir D] [--check] OUTDIR HEADER...\n";
my @headers = @ARGV or die "gen-man3.pl: no header given\n";

my (@funcs, @types, $errors, @fallbacks, %filedoc, %maps, %mapdoc, %macros);
$errors = 0;

# Read one header: every documented public function, in order.
sub parse_header {
	my ($path) = @_;
	(my $hdr = $path) =~ s{.*/include/}{};
	$hdr = "vsched/" . (split m{/}, $path)[-1] unless $hdr =~ m{^vsched/};
	open my $fh, '<', $path or die "$path: $!\n";
	my @lines = <$fh>;
	close $fh;
	# X-macro maps (#define VSCHED_..._MAP(X) X(NAME, value, "text") ...):
	# what a type's definition expands them to, for its page.
	my $all = join('', @lines);
	my ($eown) = $all =~ /^#define VSCHED__EOWN (\d+)/m;
	while ($all =~ /^#define (VSCHED_\w+_MAP)\(X\)((?:.*\\\n)*.*)$/mg) {
		my ($map, $body) = ($1, $2);
		$body =~ s/\\\n/ /g;
		my @e;
		while ($body =~ /X\((\w+),\s*((?:[^,(]|\([^)]*\))+),\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\)/g) {
			my ($n, $v, $t) = ($1, $2, $3);
			$t =~ s/"\s*"//g;
			$t =~ s/^"|"$//g;
			$v =~ s/^-\(VSCHED__EOWN \+ (\d+)\)$/'-' . ($eown + $1)/e if defined $eown;
			push @e, [$n, $v, $t];
		}
		$maps{$map} = \@e;
	}
	# A map's own doc comment (what its codes mean, which are deprecated):
	# on the page of the type it expands into.
	while ($all =~ m{/\*\*((?:(?!\*/).)*?)\*/\s*\n#define (VSCHED_\w+_MAP)\(X\)}sg) {
		my ($c, $map) = ($1, $2);
		$c =~ s/^\s*\* ?//mg;
		$c =~ s/^\s+|\s+$//g;
		$mapdoc{$map} = $c;
	}
	# Documented constants (a doc comment, then #define VSCHED_NAME value):
	# in a CONSTANTS section of every page whose text names them
	# (VSCHED_CONTENTION_* names each one of that prefix).
	while ($all =~ m{/\*\*((?:(?!\*/).)*?)\*/\s*\n#define (VSCHED_[A-Z][A-Z0-9_]*)[ \t]+([^\n]+)}sg) {
		my ($c, $name, $v) = ($1, $2, $3);
		next if $name =~ /_MAP$/;
		$c =~ s/^\s*\* ?//mg;
		$c =~ s/^\s+|\s+$//g;
		$v =~ s/\s+$//;
		$macros{$name} = [$v, $c];
	}
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
			if ($joined =~ s/^\s*\@file\s+\S+\s*\n?//) {
				$joined =~ s/^\s*\@brief\s+//;
				$filedoc{$hdr} = $joined;
				$doc = undef;
				next;
			}
			$doc = $joined;
			next;
		}
		if ($l =~ m{\@endcond}) { $cond = 0; $doc = undef; next; }
		next if $cond;
		next if $l =~ /^\s*$/ || $l =~ /^\s*#/;
		# A public type: a struct or enum definition (to its "};"), or a
		# function pointer typedef (to its ";"), as the header has it.
		if ($l =~ /^(?:struct|enum) (vsched_[a-z0-9]\w*) \{/ ||
		    $l =~ /^typedef\b.*\(\*(vsched_[a-z0-9]\w*)\)/) {
			my $name = $1;
			my $end = $l =~ /^typedef/ ? qr/;\s*$/ : qr/^\};/;
			my @def = ($l);
			while ($def[-1] !~ $end && ++$i < @lines) {
				push @def, $lines[$i];
			}
			chomp @def;
			push @types, { name => $name, def => \@def, doc => $doc, header => $hdr }
				unless grep { $_->{name} eq $name } @types;
			$doc = undef;
			next;
		}
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
			pop @r if @r && $r[-1] eq '.PP'; # .IP starts its own paragraph
			push @r, '.IP \(bu 2';
			$l = $1;
		} elsif ($l =~ /^\s*(\d+\.)\s+(.*)/) {
			pop @r if @r && $r[-1] eq '.PP';
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

sub sentences { my ($t) = @_; $t =~ s/\s+/ /g; return split /(?<=[.;])\s+(?=[A-Z`])/, $t; }

# Split a comment into description, @param list, return value and
# context. Within a paragraph, "@return", "@param" and "Context:" each run
# to the next of them or to the paragraph's end; a sentence that starts
# "Any thread" is the context too (the headers' short form).
sub split_doc {
	my ($f) = @_;
	my (%r, @params, @desc, $ret, $ctx);
	for my $para (split /\n[ \t]*\n/, $f->{doc}) {
		my @d;
		for my $part (split /(?=\@returns?\b|\@param\b|(?<![\w])(?:Context:|States[ (:]|Syscalls:))/, $para) {
			if ($part =~ /^(?:States[ (:]|Syscalls:)/) {
				# A paragraph of its own, after any text before it.
				$d[-1] =~ s/\s+$// if @d;
				push @d, (join('', @d) =~ /\S/ ? "\n\n" : '') . $part;
			}
			elsif ($part =~ /^\@returns?\s+(.*)/s) { $ret = defined $ret ? "$ret\n$1" : $1; }
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

# The types a text names: by name, or by one of an enum's constants.
my %tconst; # constant -> type
for my $t (@types) {
	for my $l (@{ $t->{def} }) {
		$tconst{$1} = $t->{name} if $l =~ /^\s*(VSCHED_[A-Z0-9_]+)\s*[=,]/;
		if ($l =~ /^\s*(VSCHED_\w+_MAP)\(/ && $maps{$1}) {
			$tconst{"VSCHED_$_->[0]"} = $t->{name} for @{ $maps{$1} };
		}
	}
}
my %istype = map { $_->{name} => 1 } @types;
sub types_named {
	my ($text, $self) = @_;
	my %t;
	$t{$1} = 1 while $text =~ /\b(vsched_[a-z0-9]\w*)\b/g;
	my %r = map { $_ => 1 } grep { $istype{$_} } keys %t;
	while ($text =~ /\b(VSCHED_[A-Z0-9_]+)\b/g) {
		$r{$tconst{$1}} = 1 if $tconst{$1};
	}
	delete $r{$self} if defined $self;
	return sort keys %r;
}

# NOTES for a page whose text names README.md, a guide, an example or a
# source file.
sub notes {
	my ($text) = @_;
	my @n;
	if ($docdir ne '' && $text =~ m{\b(?:doc/[\w-]+\.md|README\.md)}) {
		push @n, "Names such as \\fIdoc/adopting.md\\fR are files of the vsched source tree: README.md and the guides (doc/*.md) are installed in \\fI$docdir\\fR.";
	}
	if ($docdir ne '' && $text =~ m{\bexamples/}) {
		push @n, "The adoption examples (the source tree's \\fIexamples/adopt\\fR) are installed in \\fI$docdir/examples\\fR.";
	}
	if ($text =~ m{\blib/[\w/]+\.[ch]\b}) {
		push @n, "Names under \\fIlib/\\fR are source files of the library (the vsched source tree).";
	}
	return @n ? ('.SH NOTES', join("\n.PP\n", @n)) : ();
}

my %byheader;
push @{ $byheader{$_->{header}} }, $_->{name} for @funcs;

# The whatis line: a text's first sentence, or `fallback`.
sub whatis {
	my ($text, $fallback) = @_;
	(my $brief = (sentences($text))[0] // '') =~ s/\s+/ /g;
	$brief =~ s/^ | $//g;
	$brief =~ s/\.$//;
	$brief = $fallback if $brief eq '';
	# A whatis line, not a paragraph: a long first sentence is cut before
	# its first parenthesis or colon; one that would leave too little to
	# say what it does ("Enter state") keeps a first parenthesis that
	# fits.
	if (length($brief) > 70) {
		(my $cut = $brief) =~ s/^(.{10,}?)(?: \(|: ).*/$1/;
		$cut = $1 if length($cut) < 24 && $brief =~ /^([^(]{10,}?\([^)]*\))/ &&
			     length($1) <= 80;
		$brief = $cut;
	}
	# A first sentence that ends inside a parenthesis (at its ";"): cut
	# before that parenthesis too.
	$brief =~ s/^(.{10,}?) \([^)]*$/$1/;
	$brief = inline($brief);
	$brief =~ s/\\f[BIR]//g;
	return $brief;
}

# A page's first lines, up to its SYNOPSIS's #include: section 3 or 3type.
# The CONSTANTS section of a page whose text is $text: each documented
# constant it names (a name ending in _* names every one of that prefix),
# with its value and doc comment.
sub constants {
	my ($text) = @_;
	my %n;
	for my $m ($text =~ /\b(VSCHED_[A-Z][A-Z0-9_]*\*?)/g) {
		if ($m =~ s/\*$//) { $n{$_} = 1 for grep { index($_, $m) == 0 } keys %macros; }
		elsif ($macros{$m}) { $n{$m} = 1; }
	}
	return () unless %n;
	my @r = ('.SH CONSTANTS');
	for my $m (sort keys %n) {
		(my $v = $macros{$m}[0]) =~ s/-/\\-/g;
		push @r, '.TP', "\\fB$m\\fR = $v", body($macros{$m}[1]);
	}
	return @r;
}

sub page_head {
	my ($name, $sect, $header, $brief) = @_;
	# <vsched/kvm.h> and <vsched/kvmgov.h> are libvsched-kvm's.
	my $lib = $header =~ m{^vsched/kvm(?:gov)?\.h$} ? 'vsched-kvm' : 'vsched';
	return (".\\\" Generated by doc/man/gen-man3.pl from <$header>: edit the header.",
		".TH " . uc($name) . " $sect \"$date\" \"vsched $version\" \"vsched Library Functions\"",
		'.nh', '.ad l',
		'.SH NAME', "$name \\- $brief",
		'.SH LIBRARY',
		"vsched (\\fIlib$lib\\fR, \\fB\\-l$lib\\fR; \\fBpkg\\-config \\-\\-cflags \\-\\-libs $lib\\fR)",
		'.SH SYNOPSIS', '.nf', ".B #include <$header>", '.PP');
}

sub page {
	my ($f, $d) = @_;
	my $name = $f->{name};
	my @p = page_head($name, 3, $f->{header}, whatis($d->{desc}, $name));
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
	# (not "VCPU thread": a lower-case word that is a name stays one)
	push @p, '.SH CONTEXT', body($d->{context} =~ /^vCPU\b/ ? $d->{context} : ucfirst $d->{context});
	my %see;
	for my $ref ($f->{doc} =~ /\b(vsched_\w+)\(\)/g) {
		$see{$ref} = 1 if $have{$ref} && $ref ne $name;
	}
	$see{$_} = 1 for grep { $_ ne $name } @{ $byheader{$f->{header}} };
	my @see = ((map { ".BR $_ (3type)" } types_named("$f->{decl}\n$f->{doc}")),
		   map { ".BR $_ (3)" } sort keys %see);
	push @p, notes($f->{doc});
	push @p, constants("$f->{decl}\n$f->{doc}");
	push @p, '.SH SEE ALSO', join(",\n", @see) if @see;
	return join("\n", @p) . "\n";
}

# A type's page: its definition as the header has it (an X-macro map
# expanded), its doc comment, the functions that take it or name it.
sub type_page {
	my ($t) = @_;
	my $name = $t->{name};
	my (@def, $mapped, @mapdocs);
	for my $l (@{ $t->{def} }) {
		next if $l =~ /^#(?:define|undef) VSCHED__/;
		if ($l =~ /^(\s*)(VSCHED_\w+_MAP)\(/ && $maps{$2}) {
			my $ind = $1;
			$mapped = 1;
			push @mapdocs, $mapdoc{$2} if $mapdoc{$2};
			push @def, map { "${ind}VSCHED_$_->[0] = $_->[1], /* $_->[2] */" } @{ $maps{$2} };
			next;
		}
		push @def, $l;
	}
	my $doc = $t->{doc} // '';
	# An X-macro's codes: the header's own account of them too.
	$doc .= "\n\n" . $filedoc{$t->{header}} if $mapped && $filedoc{$t->{header}};
	$doc .= "\n\n$_" for @mapdocs;
	my $kind = $t->{def}[0] =~ /^(struct|enum)/ ? "$1 $name" : $name;
	my @p = page_head($name, '3type', $t->{header},
			  whatis($doc, "the $kind of <$t->{header}>"));
	for my $l (@def) {
		(my $c = $l) =~ s/\\/\\e/g;
		$c =~ s/-/\\-/g;
		$c =~ s/\t/        /g;
		$c =~ s/^([.'])/\\&$1/;
		push @p, $c;
	}
	push @p, '.fi';
	push @p, '.SH DESCRIPTION';
	push @p, $doc =~ /\S/ ? body($doc) : ();
	push @p, '.PP' if $doc =~ /\S/;
	push @p, "The members' and constants' comments are in the synopsis above.";
	my (%fn, %ty);
	for my $f (@funcs) {
		$fn{$f->{name}} = 1 if grep { $_ eq $name } types_named($f->{decl});
	}
	# Functions that name it in their text, unless that is most of them
	# (every function names some error code).
	my @named = grep { my $f = $_; grep { $_ eq $name } types_named($f->{doc}) } @funcs;
	if (@named <= 12) { $fn{$_->{name}} = 1 for @named; }
	for my $o (@types) {
		next if $o->{name} eq $name;
		$ty{$o->{name}} = 1 if grep { $_ eq $name } types_named(join("\n", @{ $o->{def} }));
	}
	$ty{$_} = 1 for types_named(join("\n", @{ $t->{def} }), $name);
	$fn{$_} = 1 for grep { $have{$_} } $doc =~ /\b(vsched_\w+)\(\)/g;
	my @see = ((map { ".BR $_ (3type)" } sort keys %ty), map { ".BR $_ (3)" } sort keys %fn);
	push @p, notes(join("\n", $doc, @def));
	push @p, constants(join("\n", $doc, @def));
	push @p, '.SH SEE ALSO', join(",\n", @see) if @see;
	return join("\n", @p) . "\n";
}

my @pages;
for my $f (@funcs) {
	my $d = split_doc($f);
	push @pages, ["$f->{name}.3", page($f, $d)];
}
push @pages, ["$_->{name}.3type", type_page($_)] for @types;
if ($check) {
	# The gaps (sorted), for test/install/check-man.sh to compare with
	# doc/man/gaps.txt; the short forms taken as return value, on stderr.
	print STDERR "note: $_\n" for @fallbacks;
	print "$_->{name}: no " . join(" and no ", @{ $_->{gaps} }) . "\n"
		for sort { $a->{name} cmp $b->{name} } grep { $_->{gaps} } @funcs;
	printf STDERR "%d public functions, %d with a gap, %d errors\n",
		scalar @funcs, scalar(grep { $_->{gaps} } @funcs), $errors;
	print STDERR "type: $_->{name}\n" for @types;
	exit($errors ? 1 : 0);
}
exit 1 if $errors;
mkdir $out unless -d $out;
for my $p (@pages) {
	my $file = "$out/$p->[0]";
	open my $fh, '>', "$file.tmp" or die "$file: $!\n";
	print $fh $p->[1];
	close $fh or die "$file: $!\n";
	rename "$file.tmp", $file or die "$file: $!\n";
}
printf "gen-man3.pl: %d pages in %s (%d functions, %d types)\n", scalar @pages, $out,
	scalar @funcs, scalar @types;
