#!/usr/bin/env bash
# Configures and builds recipe into build/ (Release-ish), installing missing dependencies first.
#   scripts/build.sh [extra cmake args]
# RECIPE_CUDA_ARCHITECTURES in the environment sets the CMake cache variable of that name (the GPU
# targets; e.g. 86-real for one RTX 30xx); otherwise a new build folder gets every supported GPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
[[ -f "$root/.deps/prefix/env.sh" ]] && source "$root/.deps/prefix/env.sh"
export PATH="$PATH:/usr/local/cuda/bin"
build=${RECIPE_BUILD_DIR:-$root/build}
gen=()
command -v ninja >/dev/null && [[ ! -f "$build/Makefile" ]] && gen=(-G Ninja)
archs=()
[[ -n "${RECIPE_CUDA_ARCHITECTURES:-}" ]] && archs=(-DRECIPE_CUDA_ARCHITECTURES="$RECIPE_CUDA_ARCHITECTURES")
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=${RECIPE_BUILD_TYPE:-RelWithDebInfo} "${archs[@]}" "$@" >/dev/null
jobs=${RECIPE_BUILD_JOBS:-$(nproc)}
cmake --build "$build" -j"$jobs"
