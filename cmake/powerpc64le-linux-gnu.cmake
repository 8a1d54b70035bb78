# Cross build for ppc64le with Debian's cross gcc; tests run under qemu-ppc64le
# (no -L: with Debian's multiarch libc the loader is found in place).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR ppc64le)
set(CMAKE_C_COMPILER powerpc64le-linux-gnu-gcc)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-ppc64le)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/powerpc64le-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
# libjemalloc-dev installs for one arch only: cross builds use the libc allocator.
set(VSCHED_WITH_JEMALLOC OFF CACHE BOOL "" FORCE)
set(VSCHED_APPS_JEMALLOC OFF CACHE BOOL "" FORCE)
