#!/bin/sh
# A library linked into someone else's process changes nothing about it:
# libvsched needs no allocator (jemalloc would replace the host's malloc)
# and no C++ runtime, and defines no malloc-family symbol.
# usage: check-needed.sh LIBRARY
set -eu
lib=$1
needed=$(readelf -d -W "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "NEEDED: $(echo $needed)"
bad=$(printf '%s\n' "$needed" | grep -E 'jemalloc|tcmalloc|mimalloc|stdc\+\+' || true)
if [ -n "$bad" ]; then
	echo "FAIL: the library imposes on its host: $bad"
	exit 1
fi
defs=$(readelf --dyn-syms -W "$lib" |
	awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" { print $8 }' | sed 's/@.*//' |
	grep -E '^(malloc|free|calloc|realloc|posix_memalign|aligned_alloc|memalign)$' || true)
if [ -n "$defs" ]; then
	echo "FAIL: the library defines allocator symbols: $defs"
	exit 1
fi
echo OK
