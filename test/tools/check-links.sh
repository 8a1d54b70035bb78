#!/bin/sh
# Every reference in the project's Markdown resolves:
# - a relative link or image, [text](path) / [text](path#anchor) /
#   [ref]: path, names a file or directory that exists, relative to the
#   .md file (as GitHub reads it), and an anchor into a .md file names one
#   of its headings (GitHub's slug: lower case, punctuation dropped, spaces
#   to hyphens); links outside code blocks and code spans only;
# - a path named in the text, also in code (`lib/block.c`, doc/porting.md,
#   test/model/kick.pml, DESIGN.md): a word that starts with a top-level
#   directory of the tree (bench cmake doc examples include lib scripts
#   test .ci) or ends in .md exists, relative to the repository root or to
#   the .md file (a bare name.md also in doc/, the one doc directory). A word stops at the first character that cannot be in a
#   path (so `lib/arch/<arch>/arch.h` checks lib/arch/, and
#   build/bench/vsched-bench is not a bench/ path). CHANGELOG.md is exempt
#   from this second rule only: it names files as they were.
# URLs (scheme:) and pure anchors (#x) are not checked here.
# usage: test/tools/check-links.sh [SOURCE_DIR]   (exits 1 on any miss)
set -eu
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
cd "$root"
files=$(find . -name '*.md' -not -path './.git/*' -not -path './build*' \
	-not -path '*/node_modules/*' | sed 's|^\./||' | sort)
[ -n "$files" ] || { echo "no .md files under $root" >&2; exit 1; }

# Pass 1 (awk): print one line per reference, "KIND FILE LINE TARGET".
refs=$(for f in $files; do
	awk -v file="$f" '
	function emit(kind, t) { print kind, file, FNR, t }
	# The links of one line, outside code spans.
	function links(s,    i, rest, t) {
		gsub(/`[^`]*`/, "", s)
		rest = s
		while (match(rest, /\]\([^)]*\)/)) {
			t = substr(rest, RSTART + 2, RLENGTH - 3)
			rest = substr(rest, RSTART + RLENGTH)
			sub(/^[ \t]*</, "", t); sub(/>.*$/, "", t)
			sub(/[ \t].*$/, "", t)       # drop a "title"
			if (t != "") emit("link", t)
		}
		if (match(s, /^[ \t]*\[[^]]+\]:[ \t]*[^ \t]+/)) {
			t = substr(s, RSTART, RLENGTH)
			sub(/^[^]]*\]:[ \t]*/, "", t)
			emit("link", t)
		}
	}
	# The path-like words of one line.
	function mentions(s,    rest, t, seen) {
		gsub(/[A-Za-z][A-Za-z0-9+.-]*:\/\/[^ \t)>]*/, "", s) # URLs
		if (!fence) { # link targets: checked as links
			gsub(/\]\([^)]*\)/, "]", s)
			sub(/^[ \t]*\[[^]]+\]:[ \t]*[^ \t]+/, "", s)
		}
		split("", seen)
		rest = " " s
		while (match(rest, /[^A-Za-z0-9_.\/-](\.ci|bench|cmake|doc|examples|include|lib|scripts|test)\/[A-Za-z0-9_.\/+-]*/)) {
			t = substr(rest, RSTART + 1, RLENGTH - 1)
			rest = substr(rest, RSTART + RLENGTH)
			sub(/[.]+$/, "", t)
			seen[t] = 1
			emit("path", t)
		}
		rest = " " s
		while (match(rest, /[^A-Za-z0-9_.\/-][A-Za-z0-9_.\/-]*[A-Za-z0-9_-]\.md([^A-Za-z0-9_]|$)/)) {
			t = substr(rest, RSTART + 1, RLENGTH - 1)
			rest = substr(rest, RSTART + RLENGTH - 1)
			sub(/[^A-Za-z0-9_]$/, "", t)
			if (!(t in seen))
				emit("path", t)
			seen[t] = 1
		}
	}
	/^[ \t]*(```|~~~)/ { fence = !fence; next }
	{
		if (!fence)
			links($0)
		if (file != "CHANGELOG.md")
			mentions($0)
	}' "$f"
done)

# Headings of a .md file as GitHub anchors, one a line.
anchors() {
	awk '/^[ \t]*(```|~~~)/ { fence = !fence; next }
	!fence && /^#+[ \t]/ {
		s = $0; sub(/^#+[ \t]+/, "", s); sub(/[ \t]+#*[ \t]*$/, "", s)
		s = tolower(s); gsub(/[^a-z0-9 _-]/, "", s); gsub(/ /, "-", s)
		print s
	}' "$1"
}

bad=0
checked=0
printf '%s\n' "$refs" | {
while read -r kind file line target; do
	[ -n "$kind" ] || continue
	case $target in
	[A-Za-z]*:*) continue ;; # a URL: https:, mailto: ...
	esac
	case $file in */*) dir=${file%/*} ;; *) dir=. ;; esac
	path=${target%%#*}
	anchor=
	case $target in *'#'*) anchor=${target#*#} ;; esac
	checked=$((checked + 1))
	if [ "$kind" = link ]; then
		[ -n "$path" ] && p="$dir/$path" || p=$file
		if [ ! -e "$p" ]; then
			echo "$file:$line: broken link: $target"
			bad=$((bad + 1))
		elif [ -n "$anchor" ] && [ "${p%.md}" != "$p" ] &&
			! anchors "$p" | grep -qxF -- "$anchor"; then
			echo "$file:$line: no heading for anchor: $target"
			bad=$((bad + 1))
		fi
	elif [ ! -e "$path" ] && [ ! -e "$dir/$path" ] &&
		{ [ "${path#*/}" != "$path" ] || [ ! -e "doc/$path" ]; }; then
		echo "$file:$line: names a path that does not exist: $target"
		bad=$((bad + 1))
	fi
done
echo "$(printf '%s\n' $files | wc -l) .md files, $checked references, $bad broken"
[ "$bad" -eq 0 ]
}
