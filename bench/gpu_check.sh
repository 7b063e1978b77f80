#!/usr/bin/env bash
# One call on a GPU machine: build the CUDA kernels and their tests, run the tests, then the
# PyTorch twin. Logs and results go to $OUT (default bench/results).
#   bench/gpu_check.sh [tests] [twin] [bench]      (default: tests twin)
#     tests  build recipe_tests_cuda (whole tree; kernels+CUDA tests alone if that fails) and run it
#     twin   python3 bench/torch_twin.py for eager and compile at micro-batch ${BATCHES:-4 8 16}
#     bench  bench/run_bench.sh (twin + the recipe engine; needs the full build)
# On an air-gapped machine the offline bundle (.deps/bundle, scripts/bundle_deps.sh) is unpacked
# first.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/bench/results}
mkdir -p "$out"
stages=("$@")
((${#stages[@]})) || stages=(tests twin)
export PATH="$PATH:/usr/local/cuda/bin"
if [[ -d .deps/bundle && ! -f .deps/prefix/.complete ]]; then
  scripts/setup_offline.sh .deps/bundle || echo "offline bundle setup failed"
fi
[[ -f .deps/prefix/env.sh ]] && source .deps/prefix/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

build_tests() {
  local t0=$SECONDS
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  # Debian's toml++ 3.3 ships toml++/toml.h but no toml.hpp: point CMake at the header dir.
  for inc in "$root/.deps/prefix/usr/include" /usr/include; do
    [[ -f $inc/toml++/toml.h ]] && { gen+=(-DTOMLPP_INCLUDE_DIR="$inc"); break; }
  done
  if cmake -S . -B build-dev "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 &&
     cmake --build build-dev -j"$(nproc)" --target recipe_tests_cuda >"$out/build.log" 2>&1; then
    test_bin=build-dev/tests/recipe_tests_cuda
  else
    echo "whole-tree build failed (see build.log; last lines below); building kernels + CUDA tests alone"
    grep -E "error|Error" "$out/build.log" "$out/cmake.log" | head -n 8
    cmake -S bench/standalone_cuda_tests -B build-cudatests "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      >"$out/cmake_standalone.log" 2>&1 &&
      cmake --build build-cudatests -j"$(nproc)" >"$out/build_standalone.log" 2>&1 ||
      { echo "standalone build failed:"; grep -E "error" -A3 "$out/build_standalone.log" | head -n 40; return 1; }
    test_bin=build-cudatests/recipe_tests_cuda
  fi
  grep -E "recipe:" "$out/cmake.log" "$out/cmake_standalone.log" 2>/dev/null | head -n 4
  echo "build: $((SECONDS - t0)) s"
}

for stage in "${stages[@]}"; do
  case $stage in
    tests)
      echo "== build + CUDA op tests"
      if build_tests; then
        t0=$SECONDS
        "$test_bin" --force-colors=0 2>&1 | tee "$out/tests.log" | grep -vE "^\s*$" | tail -n 60
        echo "tests: $((SECONDS - t0)) s"
      fi
      ;;
    twin)
      echo "== PyTorch twin"
      b=${BATCHES:-4 8 16}
      PYTHONUNBUFFERED=1 python3 bench/torch_twin.py --modes "${TORCH_MODES:-eager,compile}" \
        --batches "${b// /,}" --out "$out/torch.jsonl" 2>&1 | grep -v Warning
      ;;
    bench)
      OUT_DIR="$out" RECIPE="$root/build-dev/bin/recipe" bench/run_bench.sh
      ;;
    *) echo "unknown stage $stage (tests, twin, bench)"; exit 2 ;;
  esac
done
