#!/usr/bin/env bash
# Configures and builds recipe into build/ (Release-ish), installing missing dependencies first.
#   scripts/build.sh [extra cmake args]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
[[ -f "$root/.deps/prefix/env.sh" ]] && source "$root/.deps/prefix/env.sh"
export PATH="$PATH:/usr/local/cuda/bin"
build=${RECIPE_BUILD_DIR:-$root/build}
gen=()
command -v ninja >/dev/null && [[ ! -f "$build/Makefile" ]] && gen=(-G Ninja)
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=${RECIPE_BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
jobs=${RECIPE_BUILD_JOBS:-$(nproc)}
cmake --build "$build" -j"$jobs"
