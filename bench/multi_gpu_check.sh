#!/usr/bin/env bash
# One multi-GPU device call over the whole tree (results in $OUT):
#   build     Release build of recipe, recipe_tests and the MPI rank probe (/tmp/dev/build)
#   cudaops   the CUDA op suite (kernels/cuda) on the last GPU, in the background
#   dpab      gpt3_345m DP1/DP2 (DP4, DP8 once the op suite is done) with the multi-rank device step
#             and with kernels.host_clip=true (the host step) — bench/scaling.sh twice
#   dpvar     DP at the most GPUs (DPVAR_MIN=1: also DP1, for the per-GPU efficiency column) with
#             ZeRO-1's weight gather blocking and overlapped with the next forward (the default),
#             and gradient buckets of 8 MiB; DPVARS lists other variants
#   zero1ov   the ZeRO-1 overlapped-gather parity tests on GPUs (tests/core/parallel/test_zero1_overlap_gather.cpp)
#   parity    the NCCL parity tests (every layout of gpt_tiny / llama_tiny against one GPU)
#   scaling   bench/scaling.sh tp and pp sets
#   PHASES="build cudaops dpab parity" OUT=/tmp/out bench/multi_gpu_check.sh
set -uo pipefail
out=$OUT
PHASES=${PHASES:-build cudaops dpab parity}
source bench/device_env.sh "$out"
B=/tmp/dev/build
G=$(nvidia-smi -L | wc -l)
nvidia-smi -L >"$out/gpus.txt"
if has build; then
  t0=$SECONDS; mkdir -p $B
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release >$out/cmake.log 2>&1 &&
    cmake --build $B -j"$(nproc)" --target recipe recipe_tests recipe_train_probe >$out/build.log 2>&1
  echo "build rc=$? in $((SECONDS-t0)) s"; grep -E "error" $out/build.log | head -20
fi
ops_pid=""
if has cudaops; then
  (t0=$SECONDS; CUDA_VISIBLE_DEVICES=$((G-1)) timeout 400 $B/tests/recipe_tests -ts="kernels/cuda" >$out/cuda_tests.log 2>&1
   echo "kernels/cuda exit $? in $((SECONDS-t0)) s" >>$out/cuda_tests.log) &
  ops_pid=$!
fi
if has dpab; then
  for v in device host; do
    extra=""; [[ $v == host ]] && extra="kernels.host_clip=true"
    CUDA_VISIBLE_DEVICES=0,1 GPUS=2 SETS=dp STEPS=40 EXTRA="$extra" OUT_DIR=$out/dp-$v-a \
      RECIPE=$B/bin/recipe bench/scaling.sh >$out/dp-$v-a.log 2>&1
  done
fi
[[ -n $ops_pid ]] && wait $ops_pid && tail -n 4 $out/cuda_tests.log
if has dpab; then
  for v in device host; do
    extra=""; [[ $v == host ]] && extra="kernels.host_clip=true"
    MIN_GPUS=4 GPUS=$G SETS=dp STEPS=40 EXTRA="$extra" OUT_DIR=$out/dp-$v-b RECIPE=$B/bin/recipe bench/scaling.sh >$out/dp-$v-b.log 2>&1
  done
  for v in device host; do echo "== DP, $v step"; cat $out/dp-$v-a/scaling.md $out/dp-$v-b/scaling.md 2>/dev/null | grep -v "^|---" | sort -u; done
fi
if has dpvar; then  # DP at the most GPUs: gradient bucket sizes, ZeRO-1
  # DPVARS: variants, each a comma-separated list of parallelism.* overrides
  i=0
  for v in ${DPVARS:-zero1=true,zero1_overlap_gather=false zero1=true grad_bucket_mb=8}; do
    i=$((i+1)); extra=$(echo "$v" | tr ',' '\n' | sed 's/^/parallelism./' | tr '\n' ' ')
    MIN_GPUS=${DPVAR_MIN:-$G} GPUS=$G SETS=dp STEPS=40 EXTRA="$extra" OUT_DIR=$out/dpvar-$i RECIPE=$B/bin/recipe bench/scaling.sh >>$out/dpvar.log 2>&1
    echo "== DP, $extra"; grep "gpt3" $out/dpvar-$i/scaling.md
  done
fi
if has parity; then
  t0=$SECONDS
  timeout 420 $B/tests/recipe_tests -tc="CUDA: parallel layouts*" >$out/parity.log 2>&1
  echo "CUDA parity exit $? in $((SECONDS-t0)) s"; grep -E "ERROR|CHECK|test cases|assertions|worst" $out/parity.log | head -30
fi
if has zero1ov; then
  t0=$SECONDS
  timeout 420 $B/tests/recipe_tests -tc="CUDA: ZeRO-1 with the overlapped weight gather*" >$out/zero1ov.log 2>&1
  echo "CUDA ZeRO-1 overlap parity exit $? in $((SECONDS-t0)) s"; grep -E "ERROR|CHECK|test cases|assertions|worst" $out/zero1ov.log | head -30
fi
if has scaling; then
  GPUS=$G SETS="tp pp" STEPS=30 EXTRA="${SCALING_EXTRA:-}" OUT_DIR=$out/scaling RECIPE=$B/bin/recipe bench/scaling.sh >$out/scaling.log 2>&1
  cat $out/scaling/scaling.md
fi
