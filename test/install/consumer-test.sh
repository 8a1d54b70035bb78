#!/bin/sh
# Install vsched into a temporary prefix, then build and run a consumer
# against it twice: through pkg-config and through find_package.
# usage: consumer-test.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
pc=$(find "$tmp/prefix" -name vsched.pc | head -n1)
libdir=$(dirname "$(dirname "$pc")")

echo "== pkg-config ($pc)"
PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --modversion vsched
${CC:-cc} -o "$tmp/consumer_pc" "$src/test/install/consumer.c" \
	$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs vsched) \
	-Wl,-rpath,"$libdir"
"$tmp/consumer_pc"
# The .pc names plain paths (no pkgconfig/../..) where the install went.
for v in prefix libdir includedir; do
	val=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --variable=$v vsched)
	case "$val" in
	*/../*|*/..|*/./*|*//*) echo "FAIL: vsched.pc $v=$val is not normalised"; exit 1 ;;
	esac
	[ -d "$val" ] || { echo "FAIL: vsched.pc $v=$val does not exist"; exit 1; }
done
[ "$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --variable=libdir vsched)" = "$libdir" ] ||
	{ echo "FAIL: vsched.pc's libdir is not $libdir"; exit 1; }
echo "== pkg-config --static (a static executable: Requires.private is complete)"
${CC:-cc} -static -o "$tmp/consumer_pc_static" "$src/test/install/consumer.c" \
	$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --static --cflags --libs vsched)
"$tmp/consumer_pc_static"

echo "== find_package(vsched CONFIG)"
cmake -S "$src/test/install" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
	-DCMAKE_BUILD_RPATH="$libdir" >/dev/null
cmake --build "$tmp/build" >/dev/null
"$tmp/build/consumer_shared"
"$tmp/build/consumer_static"
if [ -f "$(dirname "$pc")/vsched-kvm.pc" ]; then
	echo "== pkg-config vsched-kvm"
	${CC:-cc} -o "$tmp/consumer_kvm_pc" "$src/test/install/consumer_kvm.c" \
		$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs vsched-kvm) \
		-Wl,-rpath,"$libdir"
	"$tmp/consumer_kvm_pc"
	${CC:-cc} -static -o "$tmp/consumer_kvm_pc_static" "$src/test/install/consumer_kvm.c" \
		$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --static --cflags --libs vsched-kvm)
	"$tmp/consumer_kvm_pc_static"
	echo "== find_package(vsched COMPONENTS kvm)"
	"$tmp/build/consumer_kvm"
	"$tmp/build/consumer_kvm_static"
fi
echo "== the installed vsched-bench finds its shipped traces (from its own directory)"
bench=$(find "$tmp/prefix" -type f -name vsched-bench | head -n1)
LD_LIBRARY_PATH="$libdir" "$bench" --quick --runs 1 --files-only policy >"$tmp/policy"
for t in "$src"/bench/traces/*.txt; do
	n=$(basename "$t" .txt)
	grep -q "^$n " "$tmp/policy" || { echo "FAIL: trace $n not replayed"; exit 1; }
done
echo "consumer test: OK"
