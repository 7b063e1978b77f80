#!/usr/bin/env bash
# FP8 on one GPU, in one device call (results in $OUT):
#   PHASES="build debug tests portable ab" OUT=/tmp/out bench/fp8_check.sh
#   build     Release build of recipe and the CUDA test binary for sm_90a only ($B)
#   debug     the CUDA FP8 test cases ("cuda fp8*")
#   tests     the CUDA op suite (kernels/cuda)
#   portable  gpt3_345m b8 and the Llama 1B shape b4 with kernels.portable=true against false
#   ab        FP8 against bf16: the Llama 1B shape b4, the 8B layer slice, gpt3_345m b8
set -uo pipefail
PHASES=${PHASES:-build debug tests portable ab}
has() { [[ " $PHASES " == *" $1 "* ]]; }
out=$OUT
export PATH="$PATH:/usr/local/cuda/bin"
[[ -d .deps/bundle && ! -f .deps/prefix/.complete ]] && scripts/setup_offline.sh .deps/bundle >"$out/setup.log" 2>&1
[[ -f .deps/prefix/env.sh ]] && source .deps/prefix/env.sh
B=${BUILD:-/tmp/dev/build}
if has build; then
  t0=$SECONDS; mkdir -p "$B"
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRECIPE_CUDA_ARCHITECTURES="90a-real" >"$out/cmake.log" 2>&1 &&
    cmake --build "$B" -j"$(nproc)" --target recipe recipe_tests_kernels_cuda >"$out/build.log" 2>&1
  echo "build rc=$? in $((SECONDS - t0)) s"; grep -E "error" "$out/build.log" | head -20
fi
T=$B/tests/recipe_tests_kernels_cuda
if has debug; then
  RECIPE_DEBUG_LT=1 timeout 300 "$T" -tc="cuda fp8*" >"$out/fp8_debug.log" 2>&1
  echo "fp8 tests exit $?"
  grep -E "LTDBG" "$out/fp8_debug.log" | sort | uniq -c | sort -rn | head -30
  grep -E "variant|MESSAGE|ERROR|test cases" "$out/fp8_debug.log" | cut -c1-400 | head -30
fi
if has tests; then
  t0=$SECONDS; timeout 400 "$T" >"$out/cuda_tests.log" 2>&1
  echo "kernels/cuda exit $? in $((SECONDS - t0)) s"
  grep -E "ERROR|test cases|assertions" "$out/cuda_tests.log" | head -30
fi
ab() {  # label, overrides
  BUILD=$B OUT=$out/ab STEPS=25 BATCHES_1B=4 LABEL=$1 RECIPE_OVERRIDES=$2 bench/llama_bench.sh $3 >"$out/ab-$1.log" 2>&1
  grep -E "gpt3_345m|error|Error" "$out/ab-$1.log" | head -5
}
if has portable; then
  ab hopper "" "engine gpt"; ab portable "kernels.portable=true" "engine gpt"
fi
if has ab; then
  has portable || ab bf16 "" "engine gpt"
  ab fp8 "trainer.precision=fp8" "engine gpt"
fi
if [[ -f $out/ab/llama_rows.jsonl ]]; then
  python3 - "$out/ab/llama_rows.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print({k: r.get(k) for k in ("workload", "impl", "micro_batch", "tokens_per_sec", "mfu", "peak_gib", "first_loss", "last_loss", "ok")})
PY
fi
