#!/usr/bin/env bash
# The test command: installs what is missing, builds everything (CUDA code too when nvcc is present)
# and runs the whole doctest suite through ctest. GPU tests report themselves skipped without a GPU.
#   scripts/test.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
[[ -f "$root/.deps/prefix/env.sh" ]] && source "$root/.deps/prefix/env.sh"
build=${RECIPE_BUILD_DIR:-$root/build}
cd "$build"
ctest --output-on-failure --timeout 3000
