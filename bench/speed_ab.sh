#!/usr/bin/env bash
# One GPU call for the CUDA speed work of docs/performance.md: build, CUDA op tests, then the
# engine benchmark (no PyTorch) for several variants of the GEMM paths, selected by environment:
#   base  kernels.cublaslt_tune=false kernels.bias_grad=epilogue   (the previous round's paths)
#   bias  kernels.cublaslt_tune=false                              (one-launch column-sum dbias)
#   tune  kernels.bias_grad=epilogue                               (timed cuBLASLt algorithms)
#   new   defaults                                                 (both)
#   memset kernels.grad_memset=true: zero the gradients each step instead of first-write overwrite
#   tune32 kernels.cublaslt_tune_candidates=32: time 32 heuristic algorithms per GEMM shape, not 8
#   cudnn1 kernels.cudnn_tune=false: keep cuDNN's first attention plan instead of timing all of them
#   nofused kernels.fused_mlp=false: fc2's backward as cuBLASLt DGELU + GELU rebuild + column sum
#   bench/speed_ab.sh "new:4 8 16" "base:4 8 16" "bias:4 16" "tune:4 16"
# Each argument is VARIANT:BATCHES; they run in the order given. Two more kinds of argument:
#   ncu-bias:B   Nsight Compute, 2 steps at micro-batch B, only the bias-gradient kernels
#                (cuBLASLt's BGRADB kernel + add vs. the column sum), summarized per step
#   tunelog:B    3 steps at micro-batch B printing each timed GEMM (heuristic #1 vs chosen)
#   prof:B       Nsight Compute over every kernel of 6 steps at micro-batch B; the per-kernel table
#                of the last 4 (bench/kernel_profile.py --last-steps 4)
#   prof-warm:B  the same without ncu's cache flush before each kernel (--cache-control none):
#                closer to the kernels' times inside the step; against the step's wall time
#                it bounds the idle gaps between kernels
# Results: $OUT/summary.md (one table per variant), $OUT/tests.log, $OUT/engine.log, $OUT/build.log.
# When the working tree does not build (others mid-edit), the committed tree (an archive made by
# `git archive HEAD` in .cache/speed/head.tar.gz) is built with this tree's kernels/cuda,
# tests/cuda and bench copied over it; summary.md says which tree was measured.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/bench/results}
mkdir -p "$out"
summary="$out/summary.md"
: >"$summary"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader |
  tee -a "$summary"

build() {  # $1 = source root
  (cd "$1" && cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null &&
     cmake --build build-dev -j"$(nproc)" --target recipe recipe_tests_cuda)
}
t0=$SECONDS
src=$root
if ! build "$root" >"$out/build.log" 2>&1; then
  echo "working tree does not build; building HEAD + this tree's kernels/cuda, tests/cuda, bench" |
    tee -a "$summary"
  grep -E "error" "$out/build.log" | head -n 5 | tee -a "$summary"
  src=/tmp/recipe_head
  rm -rf "$src" && mkdir -p "$src"
  tar xzf "$root/.cache/speed/head.tar.gz" -C "$src"
  cp -r "$root/kernels/cuda/." "$src/kernels/cuda/"
  cp -r "$root/tests/cuda/." "$src/tests/cuda/"
  cp -r "$root/bench/." "$src/bench/"
  ln -s "$root/.deps" "$src/.deps"
  build "$src" >>"$out/build.log" 2>&1 || { echo "HEAD build failed too"; tail -n 30 "$out/build.log"; exit 1; }
else
  echo "measured: the working tree" | tee -a "$summary"
fi
echo "build: $((SECONDS - t0)) s" | tee -a "$summary"

t0=$SECONDS
timeout 200 "$src/build-dev/tests/recipe_tests_cuda" --force-colors=0 >"$out/tests.log" 2>&1
echo "recipe_tests_cuda exit $? in $((SECONDS - t0)) s" | tee -a "$summary"
grep -E "test cases|assertions|fused|GEMM keys|FAILED|ERROR" "$out/tests.log" | head -n 20 |
  tee -a "$summary"

for arg in "$@"; do
  variant=${arg%%:*}
  batches=${arg#*:}
  envs=()
  case $variant in
    ncu-bias)
      ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
      for v in epilogue kernel; do
        echo "== ncu bias-gradient kernels, kernels.bias_grad=$v, micro-batch $batches" | tee -a "$summary"
        timeout 150 "$ncu" --clock-control none --csv \
          --page raw --metrics gpu__time_duration.sum --kernel-name "regex:column_sum|Bgrad|add_f32" \
          "$src/build-dev/bin/recipe" pretrain gpt3_345m --max-steps 2 trainer.micro_batch_size="$batches" \
          trainer.global_batch_size="$batches" --device cuda --experiments-dir /tmp/speed_ab/ncu \
          --name "bias_$v" kernels.cublaslt_tune=false kernels.bias_grad="$v" >/tmp/speed_ab_ncu.csv 2>>"$out/engine.log"
        python3 "$src/bench/kernel_profile.py" /tmp/speed_ab_ncu.csv --steps 2 | tee -a "$summary"
      done
      continue ;;
    tunelog)
      echo "== timed GEMM algorithms, micro-batch $batches" | tee -a "$summary"
      "$src/build-dev/bin/recipe" pretrain gpt3_345m --max-steps 3 kernels.cublaslt_tune_log=true \
        trainer.micro_batch_size="$batches" trainer.global_batch_size="$batches" --device cuda \
        --experiments-dir /tmp/speed_ab/tunelog --name "b$batches" 2>&1 | grep "cuBLASLt m=" |
        tee -a "$summary"
      continue ;;
    prof|prof-warm)
      ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
      cache=all
      [[ $variant == prof-warm ]] && cache=none
      echo "== ncu all kernels (cache control: $cache), micro-batch $batches (steps 3-6 of 6)" |
        tee -a "$summary"
      timeout 240 "$ncu" --clock-control none --cache-control $cache --csv --page raw \
        --metrics gpu__time_duration.sum \
        "$src/build-dev/bin/recipe" pretrain gpt3_345m --max-steps 6 trainer.micro_batch_size="$batches" \
        trainer.global_batch_size="$batches" checkpoint.save_final=false --device cuda \
        --experiments-dir /tmp/speed_ab/prof --name "b$batches" >/tmp/speed_ab_prof.csv 2>>"$out/engine.log"
      python3 "$src/bench/kernel_profile.py" /tmp/speed_ab_prof.csv --last-steps 4 --top 40 | tee -a "$summary"
      continue ;;
    base) envs=(RECIPE_OVERRIDES="kernels.cublaslt_tune=false kernels.bias_grad=epilogue") ;;
    memset) envs=(RECIPE_OVERRIDES="kernels.grad_memset=true") ;;
    tune32) envs=(RECIPE_OVERRIDES="kernels.cublaslt_tune_candidates=32") ;;
    cudnn1) envs=(RECIPE_OVERRIDES="kernels.cudnn_tune=false") ;;
    nofused) envs=(RECIPE_OVERRIDES="kernels.fused_mlp=false") ;;
    bias) envs=(RECIPE_OVERRIDES="kernels.cublaslt_tune=false") ;;
    tune) envs=(RECIPE_OVERRIDES="kernels.bias_grad=epilogue") ;;
    new) envs=() ;;
    *) echo "unknown variant $variant"; continue ;;
  esac
  vout=/tmp/speed_ab/$variant
  rm -rf "$vout"
  echo "== $variant (${envs[*]:-defaults}) micro-batch $batches" | tee -a "$summary" "$out/engine.log"
  env "${envs[@]}" SKIP_TORCH=1 BATCHES="$batches" OUT_DIR="$vout" \
    RECIPE="$src/build-dev/bin/recipe" "$src/bench/run_bench.sh" >>"$out/engine.log" 2>&1
  grep -E "^\|" "$vout/bench.md" | tee -a "$summary"
done
