# Cross build for aarch64 with Debian's cross gcc; tests run under qemu-aarch64
# (no -L: with Debian's multiarch libc the loader is found in place).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
# libjemalloc-dev installs for one arch only: cross builds use the libc allocator.
set(VSCHED_WITH_JEMALLOC OFF CACHE BOOL "" FORCE)
set(VSCHED_APPS_JEMALLOC OFF CACHE BOOL "" FORCE)
