#!/bin/sh
# The man pages say what the code has:
# - vsched-vmm(1) names every option of examples/vmm/main.c's getopt table,
#   and no other;
# - vsched-bench(1) names every option its parsers compare argv with
#   (bench/*.c) and every benchmark (struct bench's .name), and no other;
# - every public function of the headers has a section 3 page naming its
#   header, with RETURN VALUE and CONTEXT sections, and there is no page
#   for anything else; the functions whose comment states no return value
#   or no calling thread are exactly those listed in doc/man/gaps.txt (a
#   header that gains the text must drop its line there);
# - vsched(7) names only pages that exist;
# - man(1) formats every page without a warning (where man is installed).
# usage: check-man.sh SOURCE_DIR BUILT_MAN_DIR HEADER...
set -eu
src=$1
man=$2
shift 2
status=0
fail() {
	echo "FAIL: $*"
	status=1
}

# The long options a page documents: --name tokens, roff escapes removed.
page_options() {
	sed 's/\\-/-/g; s/\\f[BIRP]//g' "$1" | grep -o -- '--[a-z][a-z-]*' | sort -u
}

# compare WHAT PAGE_LIST CODE_LIST
compare() {
	what=$1
	for o in $3; do
		printf '%s\n' "$2" | grep -qx -- "$o" || fail "$what: $o is in the code, not on the page"
	done
	for o in $2; do
		printf '%s\n' "$3" | grep -qx -- "$o" || fail "$what: $o is on the page, not in the code"
	done
}

# vsched-vmm: the getopt_long table.
code=$(awk '/struct option options\[\]/ { t = 1; next } t && /^\};/ { t = 0 }
	t && match($0, /\{ "[a-z-]+"/) { s = substr($0, RSTART + 3, RLENGTH - 4); print "--" s }' \
	"$src/examples/vmm/main.c" | sort -u)
[ -n "$code" ] || fail "vsched-vmm: no option found in examples/vmm/main.c"
compare vsched-vmm.1 "$(page_options "$man/man1/vsched-vmm.1")" "$code"
echo "vsched-vmm.1: $(echo $code | wc -w) options"

# vsched-bench: strcmp(argv[i], "--x") in every parser, and the benchmarks.
code=$(cat "$src"/bench/*.c | grep -o 'strcmp(argv\[i\], "--[a-z-]*")' |
	sed 's/.*"\(--[a-z-]*\)")/\1/' | sort -u)
[ -n "$code" ] || fail "vsched-bench: no option found in bench/*.c"
compare vsched-bench.1 "$(page_options "$man/man1/vsched-bench.1")" "$code"
benches=$(awk '/^const struct bench bench_[a-z_]+ = \{/ { t = 1; next } t && /^\};/ { t = 0 }
	t && match($0, /\.name = "[a-z0-9_-]+"/) { print substr($0, RSTART + 9, RLENGTH - 10) }' \
	"$src"/bench/*.c | sort -u)
[ -n "$benches" ] || fail "vsched-bench: no benchmark found in bench/*.c"
paged=$(awk '/^\.SH BENCHMARKS/ { t = 1; next } /^\.SH/ { t = 0 }
	t && prev == ".TP" && /^\.B / { print $2 } { prev = $0 }' "$man/man1/vsched-bench.1" | sort -u)
compare "vsched-bench.1 benchmarks" "$paged" "$benches"
echo "vsched-bench.1: $(echo $code | wc -w) options, $(echo $benches | wc -w) benchmarks"

# Section 3: one page a public function, each with its header, return value
# and calling thread; the gaps are the known ones.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
perl "$src/doc/man/gen-man3.pl" --check "$tmp" "$@" > "$tmp/gaps" 2> "$tmp/notes" ||
	{ cat "$tmp/notes"; fail "gen-man3.pl --check"; }
known=$src/doc/man/gaps.txt
case " $* " in
*/kvm.h\ *) cp "$known" "$tmp/known" ;;
*) grep -v '^vsched_kvm_' "$known" > "$tmp/known" || true ;;
esac
if ! diff -u "$tmp/known" "$tmp/gaps"; then
	fail "the functions whose comment lacks a return value or calling thread changed: update doc/man/gaps.txt (+ a new gap, - a header that now says it)"
fi
# One awk over every page: its .TH names it, it names its header, it has
# RETURN VALUE and CONTEXT.
npages=$(ls "$man"/man3/*.3 2>/dev/null | wc -l)
[ "$npages" -gt 0 ] || fail "no section 3 page in $man/man3"
bad=$(awk '
	FNR == 1 {
		if (f) check()
		f = FILENAME; n = f; sub(/.*\//, "", n); sub(/\.3$/, "", n)
		th = inc = rv = ctx = 0
	}
	$1 == ".TH" && $2 == toupper(n) && $3 == "3" { th = 1 }
	/^\.B #include <vsched\/[a-z]+\.h>/ { inc = 1 }
	/^\.SH RETURN VALUE/ { rv = 1 }
	/^\.SH CONTEXT/ { ctx = 1 }
	function check() {
		if (!th) print n ".3: .TH does not name it"
		if (!inc) print n ".3 names no header"
		if (!rv) print n ".3 has no RETURN VALUE"
		if (!ctx) print n ".3 has no CONTEXT"
	}
	END { if (f) check() }' "$man"/man3/*.3)
[ -z "$bad" ] || fail "$bad"
total=$(sed -n 's/^\([0-9]*\) public functions.*/\1/p' "$tmp/notes")
[ "$npages" = "$total" ] || fail "$npages section 3 pages for $total public functions"
# Each documented function of the headers has its page (the other way).
for h in "$@"; do
	grep -o 'VSCHED_API[^(]*\bvsched_[a-z0-9_]*(' "$h" | grep -o 'vsched_[a-z0-9_]*($' |
		tr -d '(' | grep -v '^vsched__' || true
done | sort -u > "$tmp/api"
while read -r f; do
	[ -f "$man/man3/$f.3" ] || fail "$f has no page"
done < "$tmp/api"
echo "section 3: $npages pages, $(wc -l < "$tmp/api") exported public functions, $(wc -l < "$tmp/gaps") known gaps"

# Section 3type: one page a public type (struct, enum, function pointer
# typedef) of the headers, its .TH naming it, its definition in SYNOPSIS.
for h in "$@"; do
	sed -n 's/^\(struct\|enum\) \(vsched_[a-z0-9][a-z0-9_]*\) {.*/\2/p
		s/^typedef .*(\*\(vsched_[a-z0-9][a-z0-9_]*\)).*/\1/p' "$h"
done | sort -u > "$tmp/types"
[ -s "$tmp/types" ] || fail "no public type found in the headers"
sed -n 's/^type: //p' "$tmp/notes" | sort > "$tmp/typed"
diff -u "$tmp/types" "$tmp/typed" || fail "the generator's types are not the headers' types"
while read -r t; do
	p=$man/man3/$t.3type
	[ -f "$p" ] || { fail "$t has no page"; continue; }
	grep -q "^\.TH $(echo "$t" | tr a-z A-Z) 3type " "$p" || fail "$t.3type: .TH does not name it"
	grep -q "^\(struct\|enum\|typedef\).*$(echo "$t" | sed 's/_/\\_/g;s/\\_/_/g')" "$p" ||
		fail "$t.3type: no definition in SYNOPSIS"
done < "$tmp/types"
[ "$(ls "$man"/man3/*.3type | wc -l)" = "$(wc -l < "$tmp/types")" ] ||
	fail "$(ls "$man"/man3/*.3type | wc -l) section 3type pages for $(wc -l < "$tmp/types") public types"
echo "section 3type: $(wc -l < "$tmp/types") pages, one a public type"

# vsched(7): every page it names in bold with a section exists.
p7=$man/man7/vsched.7
[ -f "$p7" ] || fail "no vsched.7"
n7=0
for ref in $(sed -n 's/^\.BR \(vsched[a-z0-9_\\-]*\) (\(3\|3type\|1\)).*/\1.\2/p
	s/.*\\fB\(vsched_[a-z0-9_]*\)\\fR(\(3type\|3\)).*/\1.\2/p' "$p7" | sed 's/\\-/-/g' | sort -u); do
	n7=$((n7 + 1))
	case $ref in
	*.1) [ -f "$man/man1/$ref" ] || fail "vsched.7 names $ref, which does not exist" ;;
	*) [ -f "$man/man3/$ref" ] || fail "vsched.7 names $ref, which does not exist" ;;
	esac
done
[ "$n7" -gt 20 ] || fail "vsched.7 names only $n7 pages"
echo "section 7: vsched.7 names $n7 pages"

# Formatting: groff's warnings, all of them, at man's 80 columns (lintian
# reports man's as errors). One groff for all pages: man(1) per page costs
# about a second each.
if command -v groff >/dev/null 2>&1; then
	w=$(groff -man -ww -z -Tutf8 -rLL=80n -Kutf8 "$man"/man1/*.1 "$man"/man3/*.3 \
		"$man"/man3/*.3type "$man"/man7/*.7 2>&1 || echo "groff failed")
	[ -z "$w" ] || fail "groff: $w"
	echo "groff -ww: every page clean"
else
	echo "groff not installed: formatting not checked"
fi
[ "$status" = 0 ] && echo OK
exit $status
