# Cross build for s390x with Debian's cross gcc; tests run under qemu-s390x
# (no -L: with Debian's multiarch libc the loader is found in place).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR s390x)
set(CMAKE_C_COMPILER s390x-linux-gnu-gcc)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-s390x)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/s390x-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
# libjemalloc-dev installs for one arch only: cross builds use the libc allocator.
set(VSCHED_WITH_JEMALLOC OFF CACHE BOOL "" FORCE)
set(VSCHED_APPS_JEMALLOC OFF CACHE BOOL "" FORCE)
