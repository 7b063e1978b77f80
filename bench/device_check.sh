#!/usr/bin/env bash
# One device call on the whole tree: Release build, the CUDA test suite (kernels/cuda; again with the
# portable kernels), `recipe generate --device cuda` against the CPU, a LoRA fine-tune with dropout
# on CUDA. Results in $OUT.
#   OUT=/tmp/out bench/device_check.sh
set -uo pipefail
out=$OUT
source bench/device_env.sh "$out"
B=/tmp/dev/build; mkdir -p $B
t0=$SECONDS
# One GPU target (the lent H100/H200 is sm_90a): the default builds seven, which costs device time.
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DRECIPE_CUDA_ARCHITECTURES=90a-real >$out/cmake.log 2>&1 && cmake --build $B -j16 --target recipe recipe_tests >$out/build.log 2>&1
echo "build rc=$? in $((SECONDS-t0)) s"; grep -E "error" $out/build.log | head -20
t0=$SECONDS
timeout 420 $B/tests/recipe_tests -ts="kernels/cuda" >$out/cuda_tests.log 2>&1; echo "kernels/cuda exit $? in $((SECONDS-t0)) s"
grep -E "ERROR|test cases|assertions" $out/cuda_tests.log | head -30
t0=$SECONDS  # the same suite on the kernels a non-Hopper GPU runs (kernels.portable)
RECIPE_TEST_PORTABLE_KERNELS=1 timeout 420 $B/tests/recipe_tests -ts="kernels/cuda" >$out/cuda_tests_portable.log 2>&1
echo "kernels/cuda portable exit $? in $((SECONDS-t0)) s"
grep -E "ERROR|test cases|assertions|portable" $out/cuda_tests_portable.log | head -30
t0=$SECONDS
timeout 200 $B/tests/recipe_tests -tc="CUDA*" -ts="core/*,checkpoint*" >$out/cuda_core_tests.log 2>&1; echo "CUDA core exit $? in $((SECONDS-t0)) s"
grep -E "ERROR|test cases|assertions" $out/cuda_core_tests.log | head -20
R=$B/bin/recipe; E=/tmp/dev/exp
$R pretrain llama_tiny --device cuda --max-steps 30 --experiments-dir $E --name lt >$out/smoke.log 2>&1; echo "pretrain llama_tiny cuda rc=$?"
$R generate $E/lt/run-1 --prompt "Hello" --tokenizer byte --max-new-tokens 24 --device cuda 2>>$out/smoke.log | head -c 300; echo; echo "generate cuda rc=${PIPESTATUS[0]}"
$R generate $E/lt/run-1 --prompt "Hello" --tokenizer byte --max-new-tokens 24 --device cpu 2>>$out/smoke.log | head -c 300; echo; echo "generate cpu rc=${PIPESTATUS[0]}"
$R finetune llama_tiny_lora --device cuda --max-steps 20 peft.dropout=0.05 checkpoint.load=$E/lt/run-1 --experiments-dir $E --name ltl >>$out/smoke.log 2>&1; echo "lora dropout cuda rc=$?"
tail -n 3 $out/smoke.log
