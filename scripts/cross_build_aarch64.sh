#!/usr/bin/env bash
# Cross-builds the whole project (the recipe binary, its libraries and the tests) for aarch64 Linux
# on an amd64 Debian/Ubuntu machine: the proof that nothing is x86-only (DGX Spark, Grace, Graviton).
#   scripts/cross_build_aarch64.sh [extra cmake args]
# Uses Debian's cross toolchain (g++-aarch64-linux-gnu) and the arm64 Debian packages of
# scripts/deps.offline.list, gathered by scripts/bundle_deps.sh --arch arm64 and unpacked by
# scripts/setup_offline.sh into build-aarch64/prefix: the same path an air-gapped arm64 host takes,
# and nothing is installed for arm64 on this machine (libsentencepiece-dev cannot be installed for
# two architectures at once; multiarch installs would also pull in upgrades of the host's packages).
# CUDA: cross-compiling CUDA for aarch64 needs NVIDIA's sbsa cross toolkit
# (/usr/local/cuda/targets/sbsa-linux); without it the build is CPU-only, which it says.
# Open MPI and Cairo are optional and left out (their CMake probes would find the host's x86 copies).
# Installing the toolchain and adding the arm64 architecture to dpkg need root (done here if missing).
# Env: RECIPE_BUILD_JOBS (default nproc), RECIPE_AARCH64_DIR (default build-aarch64).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${RECIPE_AARCH64_DIR:-$root/build-aarch64}
jobs=${RECIPE_BUILD_JOBS:-$(nproc)}
start=$SECONDS

if ! command -v aarch64-linux-gnu-g++ >/dev/null; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "recipe: the aarch64 cross compiler is missing: sudo apt-get install g++-aarch64-linux-gnu" >&2
    exit 1
  fi
  echo "recipe: installing g++-aarch64-linux-gnu"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends g++-aarch64-linux-gnu >/dev/null
fi

# The arm64 libraries, unpacked (once) into $out/prefix.
prefix=$out/prefix
if [[ ! -f "$prefix/.complete" ]]; then
  "$root/scripts/bundle_deps.sh" --arch arm64 "$out/bundle"
  "$root/scripts/setup_offline.sh" "$out/bundle" "$prefix"
fi

cuda=OFF
if [[ -d /usr/local/cuda/targets/sbsa-linux/lib ]]; then
  cuda=ON
  echo "recipe: CUDA sbsa cross toolkit found: the CUDA kernels are cross-compiled too"
else
  echo "recipe: no CUDA sbsa cross toolkit (/usr/local/cuda/targets/sbsa-linux): CPU-only aarch64 build"
fi

gen=()
command -v ninja >/dev/null && [[ ! -f "$out/Makefile" ]] && gen=(-G Ninja)
cmake -S "$root" -B "$out" "${gen[@]}" -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE="${RECIPE_BUILD_TYPE:-RelWithDebInfo}" -DRECIPE_DEPS_PREFIX="$prefix" -DRECIPE_ENABLE_CUDA=$cuda \
  -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON "$@" >/dev/null
cmake --build "$out" -j"$jobs"

# Every binary built must be an aarch64 ELF (a host x86 object slipping in would fail the link
# first, but say it plainly).
for bin in "$out/bin/recipe" "$out/tests/recipe_tests"; do
  [[ -f "$bin" ]] || continue
  desc=$(file -b "$bin" 2>/dev/null || aarch64-linux-gnu-readelf -h "$bin" | grep -o 'AArch64' | sed 's/^/ARM aarch64 (readelf): /')
  echo "recipe: $(basename "$bin"): $desc"
  [[ "$desc" == *"ARM aarch64"* ]] || { echo "recipe: $bin is not an aarch64 binary" >&2; exit 1; }
done
echo "recipe: aarch64 cross build done in $((SECONDS - start)) s ($out)"
