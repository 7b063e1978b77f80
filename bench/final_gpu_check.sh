#!/usr/bin/env bash
# One device call on a host of ≥ 2 GPUs over the whole tree (results in $OUT):
#   Release build; on GPU 0, in the background: the CUDA op suite (and, with PORTABLE=1, the same
#   suite on the portable kernels, kernels.portable); on the other GPUs: the NCCL parity tests
#   (every "CUDA:" case of core/parallel: layouts, sequence parallel, TP overlap, interleaved 1F1B,
#   ZeRO-1's overlapped gather, context parallelism); then on all GPUs: the scaling runs (RUNS picks
#   them by label; default all): DP with ZeRO-1's gather blocking / overlapped, TP with and without
#   sequence parallelism and its communication overlap, PP with virtual stages, CP.
#   PHASES="build check scaling" OUT=/tmp/out bench/final_gpu_check.sh
#   (check: the GPU-0 work, the parity tests and, with no GPU visible, the CPU test suite (ctest), at once;
#   PARITY_TC picks parity cases (default "CUDA:*"), CTEST_S=0 skips ctest, TARGETS the build targets)
set -uo pipefail
PHASES=${PHASES:-build check scaling}
out=$OUT
source bench/device_env.sh "$out"
B=/tmp/dev/build
G=$(nvidia-smi -L | wc -l)
nvidia-smi -L >"$out/gpus.txt"
if has build; then
  t0=$SECONDS; mkdir -p $B
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DRECIPE_CUDA_ARCHITECTURES="90a-real" >$out/cmake.log 2>&1 &&
    cmake --build $B -j"$(nproc)" --target ${TARGETS:-all} >$out/build.log 2>&1
  echo "build rc=$? in $((SECONDS-t0)) s"; grep -E "error" $out/build.log | head -20
  $B/bin/recipe keys --format markdown >$out/recipes.md
fi
if has check; then
(
  export CUDA_VISIBLE_DEVICES=0
  t0=$SECONDS; timeout 300 $B/tests/recipe_tests -ts="kernels/cuda" >$out/cuda_tests.log 2>&1
  echo "kernels/cuda exit $? in $((SECONDS-t0)) s"
  if [[ ${PORTABLE:-0} == 1 ]]; then
    t0=$SECONDS; RECIPE_TEST_PORTABLE_KERNELS=1 timeout 300 $B/tests/recipe_tests -ts="kernels/cuda" >$out/cuda_tests_portable.log 2>&1
    echo "kernels/cuda portable exit $? in $((SECONDS-t0)) s"
  fi
) >$out/gpu0.log 2>&1 &
g0=$!
others=$(seq -s, 1 $((G-1)))
[[ ${CTEST_S:-420} -gt 0 ]] && (cd $B && CUDA_VISIBLE_DEVICES="" timeout ${CTEST_S:-420} ctest -j 24 --output-on-failure >$out/ctest.log 2>&1; echo "ctest exit $?" >>$out/ctest.log) &
ct=$!
t0=$SECONDS
CUDA_VISIBLE_DEVICES=$others timeout ${PARITY_S:-330} $B/tests/recipe_tests -tc="${PARITY_TC:-CUDA:*}" -ts="core/parallel" >$out/parity.log 2>&1
echo "CUDA parity (GPUs $others) exit $? in $((SECONDS-t0)) s"
grep -E "ERROR|test cases|assertions|skipped" $out/parity.log | head -30
wait $g0; cat $out/gpu0.log; grep -E "ERROR" $out/cuda_tests.log $out/cuda_tests_portable.log 2>/dev/null | head -20
grep -hE "test cases|assertions" $out/cuda_tests.log $out/cuda_tests_portable.log 2>/dev/null
[[ -n ${ct:-} ]] && wait $ct; grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|ctest exit" $out/ctest.log | head -30
fi
has scaling || exit 0
L1B="model.num_layers=16 model.hidden_size=2048 model.num_attention_heads=16 model.num_kv_heads=8 model.ffn_hidden_size=5632 model.vocab_size=32000 model.seq_length=1024 trainer.recompute=none"
want() { [[ -z ${RUNS:-} || " $RUNS " == *" $1 "* ]]; }
run() { # label gpus [model] overrides... (model: llama3_8b with the ~1B shape unless the first override is gpt3_345m or llama3_70b)
  local label=$1 n=$2; shift 2
  [[ $n -gt $G ]] && return
  want "$label" || return
  local model=(llama3_8b $L1B)
  [[ ${1:-} == gpt3_345m ]] && { model=(gpt3_345m); shift; }
  [[ ${1:-} == llama3_70b ]] && { model=(llama3_70b executor.kind=local executor.nodes=1 parallelism.pp=1 parallelism.dp=1); shift; }
  local t0=$SECONDS
  timeout ${RUN_S:-90} $B/bin/recipe pretrain "${model[@]}" "$@" --device cuda --gpus-per-node $n --max-steps 25 trainer.log_interval=5 \
    checkpoint.save_final=false --experiments-dir /tmp/dev/scal --name "$label" >$out/scal-$label.log 2>&1
  echo "$label: $((SECONDS-t0)) s" >>$out/run_times.txt
  python3 - "/tmp/dev/scal/$label" "$label" "$n" <<'PY'
import json, sys, glob, os
d = sorted(glob.glob(os.path.join(sys.argv[1], "run-*")))
t = [json.loads(l) for l in open(os.path.join(d[-1], "timing.jsonl"))][5:] if d and os.path.exists(os.path.join(d[-1], "timing.jsonl")) else []
if not t: print(f"| {sys.argv[2]} | {sys.argv[3]} | failed |"); sys.exit()
tps = sum(x["tokens_per_sec"] for x in t) / len(t)
mfu = [x["mfu"] for x in t if x.get("mfu") is not None]
mfu = f"{100 * sum(mfu) / len(mfu):.1f}%" if mfu else "n/a"
print(f"| {sys.argv[2]} | {sys.argv[3]} | {tps:,.0f} | {tps/int(sys.argv[3]):,.0f} | {sum(x['step_ms'] for x in t)/len(t):.1f} | {max(x['peak_memory_bytes'] for x in t)/2**30:.2f} | {mfu} |")
PY
}
exec > >(tee "$out/scaling.md")
echo "| run | GPUs | tok/s | tok/s per GPU | step ms | peak GiB | MFU |"
G345="gpt3_345m trainer.micro_batch_size=8"
run dp1 1 $G345 trainer.global_batch_size=8
run dp4-zero1-blocking 4 $G345 trainer.global_batch_size=32 parallelism.zero1=true parallelism.zero1_overlap_gather=false
run dp4-zero1-overlap 4 $G345 trainer.global_batch_size=32 parallelism.zero1=true
run dp4 4 $G345 trainer.global_batch_size=32
run dp4-zero1-bf16 4 $G345 trainer.global_batch_size=32 parallelism.zero1=true parallelism.grad_reduce_bf16=true
run tp1 1 parallelism.tp=1 trainer.micro_batch_size=2 trainer.global_batch_size=16
run tp2 2 parallelism.tp=2 trainer.micro_batch_size=2 trainer.global_batch_size=16
run tp2-sp 2 parallelism.tp=2 parallelism.sequence_parallel=true trainer.micro_batch_size=2 trainer.global_batch_size=16
run tp2-sp-ov 2 parallelism.tp=2 parallelism.sequence_parallel=true parallelism.tp_comm_overlap=true trainer.micro_batch_size=2 trainer.global_batch_size=16
run tp1-mb4 1 parallelism.tp=1 trainer.micro_batch_size=4 trainer.global_batch_size=16
run tp2-mb4 2 parallelism.tp=2 trainer.micro_batch_size=4 trainer.global_batch_size=16
run tp2-sp-mb4 2 parallelism.tp=2 parallelism.sequence_parallel=true trainer.micro_batch_size=4 trainer.global_batch_size=16
run tp2-sp-ov-mb4 2 parallelism.tp=2 parallelism.sequence_parallel=true parallelism.tp_comm_overlap=true trainer.micro_batch_size=4 trainer.global_batch_size=16
run tp1-mb8 1 parallelism.tp=1 trainer.micro_batch_size=8 trainer.global_batch_size=16
run tp2-mb8 2 parallelism.tp=2 trainer.micro_batch_size=8 trainer.global_batch_size=16
run dp2 2 $G345 trainer.global_batch_size=16
run dp2-zero1 2 $G345 trainer.global_batch_size=16 parallelism.zero1=true
run pp2 2 parallelism.tp=1 parallelism.pp=2 trainer.micro_batch_size=2 trainer.global_batch_size=16
run pp2-v2 2 parallelism.tp=1 parallelism.pp=2 parallelism.virtual_pp=2 trainer.micro_batch_size=2 trainer.global_batch_size=16
run tp4 4 parallelism.tp=4 trainer.micro_batch_size=2 trainer.global_batch_size=16
run tp2-ov-mb4 2 parallelism.tp=2 parallelism.tp_comm_overlap=true trainer.micro_batch_size=4 trainer.global_batch_size=16
run tp2-ov-mb8 2 parallelism.tp=2 parallelism.tp_comm_overlap=true trainer.micro_batch_size=8 trainer.global_batch_size=16
run tp4-ov-mb8 4 parallelism.tp=4 parallelism.tp_comm_overlap=true trainer.micro_batch_size=8 trainer.global_batch_size=16
run tp4-ov4-mb8 4 parallelism.tp=4 parallelism.tp_comm_overlap=true parallelism.tp_overlap_chunks=4 trainer.micro_batch_size=8 trainer.global_batch_size=16
run tp4-mb4 4 parallelism.tp=4 trainer.micro_batch_size=4 trainer.global_batch_size=16
run tp4-mb8 4 parallelism.tp=4 trainer.micro_batch_size=8 trainer.global_batch_size=16
run tp4-sp-mb4 4 parallelism.tp=4 parallelism.sequence_parallel=true trainer.micro_batch_size=4 trainer.global_batch_size=16
run tp4-sp 4 parallelism.tp=4 parallelism.sequence_parallel=true trainer.micro_batch_size=2 trainer.global_batch_size=16
run tp4-sp-ov 4 parallelism.tp=4 parallelism.sequence_parallel=true parallelism.tp_comm_overlap=true trainer.micro_batch_size=2 trainer.global_batch_size=16
run pp4 4 parallelism.tp=1 parallelism.pp=4 trainer.micro_batch_size=2 trainer.global_batch_size=16
run pp4-v2 4 parallelism.tp=1 parallelism.pp=4 parallelism.virtual_pp=2 trainer.micro_batch_size=2 trainer.global_batch_size=16
run pp4-bal 4 parallelism.tp=1 parallelism.pp=4 parallelism.pipeline_split=balanced trainer.micro_batch_size=2 trainer.global_batch_size=16
run pp4-v2-bal 4 parallelism.tp=1 parallelism.pp=4 parallelism.virtual_pp=2 parallelism.pipeline_split=balanced trainer.micro_batch_size=2 trainer.global_batch_size=16
run pp4-mb1-v2-bal 4 parallelism.tp=1 parallelism.pp=4 parallelism.virtual_pp=2 parallelism.pipeline_split=balanced trainer.micro_batch_size=1 trainer.global_batch_size=16
run pp4-mb1-v2-bal-ov 4 parallelism.tp=1 parallelism.pp=4 parallelism.virtual_pp=2 parallelism.pipeline_split=balanced parallelism.pp_comm_overlap=true trainer.micro_batch_size=1 trainer.global_batch_size=16
run pp4-v2-bal-ov 4 parallelism.tp=1 parallelism.pp=4 parallelism.virtual_pp=2 parallelism.pipeline_split=balanced parallelism.pp_comm_overlap=true trainer.micro_batch_size=2 trainer.global_batch_size=16
run pp4-mb1-v4-ov 4 parallelism.tp=1 parallelism.pp=4 parallelism.virtual_pp=4 parallelism.pp_comm_overlap=true trainer.micro_batch_size=1 trainer.global_batch_size=16
run pp4-bal-ov 4 parallelism.tp=1 parallelism.pp=4 parallelism.pipeline_split=balanced parallelism.pp_comm_overlap=true trainer.micro_batch_size=2 trainer.global_batch_size=16
run pp4-v4 4 parallelism.tp=1 parallelism.pp=4 parallelism.virtual_pp=4 trainer.micro_batch_size=2 trainer.global_batch_size=16
run pp4-mb1-v4 4 parallelism.tp=1 parallelism.pp=4 parallelism.virtual_pp=4 trainer.micro_batch_size=1 trainer.global_batch_size=16
run tp1-mb1 1 parallelism.tp=1 trainer.micro_batch_size=1 trainer.global_batch_size=16
# The same layouts at larger global batches (gradient accumulation): DP's reduction and the
# pipeline's bubble are paid once per step, so their share shrinks with the micro-batches a step holds.
run dp1-acc4 1 $G345 trainer.global_batch_size=32
run dp4-zero1-acc4 4 $G345 trainer.global_batch_size=128 parallelism.zero1=true
run dp4-zero1-b256-acc4 4 $G345 trainer.global_batch_size=128 parallelism.zero1=true parallelism.grad_bucket_mb=256
run dp1-acc2 1 $G345 trainer.global_batch_size=16
run dp4-zero1-acc2 4 $G345 trainer.global_batch_size=64 parallelism.zero1=true
run tp1-mb1-gb64 1 parallelism.tp=1 trainer.micro_batch_size=1 trainer.global_batch_size=64
run pp4-mb1-v2-bal-gb64 4 parallelism.tp=1 parallelism.pp=4 parallelism.virtual_pp=2 parallelism.pipeline_split=balanced trainer.micro_batch_size=1 trainer.global_batch_size=64
run pp4-mb1-v4-gb64 4 parallelism.tp=1 parallelism.pp=4 parallelism.virtual_pp=4 trainer.micro_batch_size=1 trainer.global_batch_size=64
run tp1-gb64 1 parallelism.tp=1 trainer.micro_batch_size=2 trainer.global_batch_size=64
run pp4-v2-bal-gb64 4 parallelism.tp=1 parallelism.pp=4 parallelism.virtual_pp=2 parallelism.pipeline_split=balanced trainer.micro_batch_size=2 trainer.global_batch_size=64
run tp1-mb1-gb32 1 parallelism.tp=1 trainer.micro_batch_size=1 trainer.global_batch_size=32
run pp4-mb1-v2-bal-gb32 4 parallelism.tp=1 parallelism.pp=4 parallelism.virtual_pp=2 parallelism.pipeline_split=balanced trainer.micro_batch_size=1 trainer.global_batch_size=32
run tp1-mb1-gb128 1 parallelism.tp=1 trainer.micro_batch_size=1 trainer.global_batch_size=128
run pp4-mb1-v2-bal-gb128 4 parallelism.tp=1 parallelism.pp=4 parallelism.virtual_pp=2 parallelism.pipeline_split=balanced trainer.micro_batch_size=1 trainer.global_batch_size=128
run pp4-mb1-bal-gb64 4 parallelism.tp=1 parallelism.pp=4 parallelism.pipeline_split=balanced trainer.micro_batch_size=1 trainer.global_batch_size=64
run pp4-mb1-bal-gb128 4 parallelism.tp=1 parallelism.pp=4 parallelism.pipeline_split=balanced trainer.micro_batch_size=1 trainer.global_batch_size=128
run pp4-bal-gb64 4 parallelism.tp=1 parallelism.pp=4 parallelism.pipeline_split=balanced trainer.micro_batch_size=2 trainer.global_batch_size=64
# The Llama 70B layer slice (hidden 8192, 64/8 heads, ffn 28672, seq 8192). The target is TP8 on
# one 8-GPU node; on 4 GPUs, TP4 with as many layers as fit.
run 70b-tp4-l12 4 llama3_70b parallelism.tp=4 model.num_layers=12 trainer.recompute=none trainer.micro_batch_size=1 trainer.global_batch_size=1
run 70b-tp4-l12-acc4 4 llama3_70b parallelism.tp=4 model.num_layers=12 trainer.recompute=none trainer.micro_batch_size=1 trainer.global_batch_size=4
run 70b-tp4-l16-full 4 llama3_70b parallelism.tp=4 model.num_layers=16 trainer.micro_batch_size=1 trainer.global_batch_size=4
run 70b-tp8-l24 8 llama3_70b parallelism.tp=8 model.num_layers=24 trainer.recompute=none trainer.micro_batch_size=1 trainer.global_batch_size=4
run cp1-8k 1 parallelism.tp=1 model.seq_length=8192 trainer.micro_batch_size=1 trainer.global_batch_size=2
run cp2-8k 2 parallelism.tp=1 model.seq_length=8192 parallelism.cp=2 trainer.micro_batch_size=1 trainer.global_batch_size=2
