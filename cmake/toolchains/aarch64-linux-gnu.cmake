# Cross-compiles recipe for 64-bit ARM Linux (DGX Spark / GB10, Grace, AWS Graviton) with Debian's
# cross toolchain (apt-get install g++-aarch64-linux-gnu). The arm64 libraries come from an offline
# prefix (scripts/bundle_deps.sh --arch arm64 + scripts/setup_offline.sh), passed as
# RECIPE_DEPS_PREFIX, or from arm64 multiarch packages under /usr/lib/aarch64-linux-gnu.
# scripts/cross_build_aarch64.sh does all of it:
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Debian's multiarch folder for arm64 (CMake derives it from the compiler too; set for clarity).
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Programs run on this (build) machine; libraries and headers are the target's. Header-only
# dependencies (toml++, CLI11, doctest, nlohmann-json) are architecture-independent, so the build
# machine's /usr/include serves too.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# pkg-config would find the build machine's .pc files (x86_64 Cairo): only the target's.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
# CUDA for aarch64 needs NVIDIA's sbsa cross toolkit (targets/sbsa-linux); without it the cross
# build is CPU-only (-DRECIPE_ENABLE_CUDA=OFF, which the script passes).
set(CMAKE_CUDA_HOST_COMPILER aarch64-linux-gnu-g++)
