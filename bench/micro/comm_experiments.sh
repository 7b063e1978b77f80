#!/usr/bin/env bash
# Communication experiments on a multi-GPU machine (one device call; results in $OUT/exp.md):
# runs of the ~1B Llama / gpt3_345m with NCCL environment variables, and (SKIP_PATCH=1) with
# bench/micro/patches/skip_comm.patch applied to the device's copy of the tree, which lets
# RECIPE_EXP_SKIP_COMM=<group> skip the collectives of the groups whose name starts with <group>
# (tp, dp, pp): the step without that communication (wrong numbers, right compute), to split a
# layout's lost time into communication and compute. The patch is never part of the product.
#   SET="pp nccl" [SKIP_PATCH=1] [PARITY=1] OUT=/tmp/out bench/micro/comm_experiments.sh
# SET picks the tables below (decompose, pp, nccl, dp, dp-repeat); PARITY=1 also runs the pipeline's GPU parity
# tests on all GPUs first (needs TARGETS to include recipe_tests).
set -uo pipefail
out=$OUT
[[ ${SKIP_PATCH:-0} == 1 ]] && { git apply bench/micro/patches/skip_comm.patch || echo "patch failed"; }
TARGETS=${TARGETS:-recipe} OUT=$out bench/gpu_check.sh build
source bench/device_env.sh "$out"
B=/tmp/dev/build
if [[ ${PARITY:-0} == 1 ]]; then
  t0=$SECONDS
  timeout ${PARITY_S:-240} $B/tests/recipe_tests -ts=core/parallel -tc="${PARITY_TC:-CUDA: PP with the overlapped*,CUDA: interleaved 1F1B*}" >$out/parity.log 2>&1
  echo "CUDA parity (all GPUs) exit $? in $((SECONDS-t0)) s"; grep -E "ERROR|test cases|assertions|skipped" $out/parity.log | head -20
fi
L1B="model.num_layers=16 model.hidden_size=2048 model.num_attention_heads=16 model.num_kv_heads=8 model.ffn_hidden_size=5632 model.vocab_size=32000 model.seq_length=1024 trainer.recompute=none"
G345="gpt3_345m trainer.micro_batch_size=8"
run() { # label gpus env overrides...
  local label=$1 n=$2 envs=$3; shift 3
  local model=(llama3_8b $L1B)
  [[ ${1:-} == gpt3_345m ]] && { model=(gpt3_345m); shift; }
  local t0=$SECONDS
  env $envs timeout ${RUN_S:-45} $B/bin/recipe pretrain "${model[@]}" "$@" --device cuda --gpus-per-node $n --max-steps 25 \
    trainer.log_interval=5 checkpoint.save_final=false --experiments-dir /tmp/dev/scal --name "$label" >$out/scal-$label.log 2>&1
  python3 - "/tmp/dev/scal/$label" "$label" "$n" "$envs" "$((SECONDS-t0))" <<'PY'
import json, sys, glob, os
d = sorted(glob.glob(os.path.join(sys.argv[1], "run-*")))
t = [json.loads(l) for l in open(os.path.join(d[-1], "timing.jsonl"))][5:] if d and os.path.exists(os.path.join(d[-1], "timing.jsonl")) else []
if not t: print(f"| {sys.argv[2]} | {sys.argv[3]} | {sys.argv[4]} | failed |"); sys.exit()
tps = sum(x["tokens_per_sec"] for x in t) / len(t)
print(f"| {sys.argv[2]} | {sys.argv[3]} | {sys.argv[4]} | {tps/int(sys.argv[3]):,.0f} | {sum(x['step_ms'] for x in t)/len(t):.1f} | {sys.argv[5]} s |", flush=True)
PY
}
exec > >(tee -a "$out/exp.md")
echo "| run | GPUs | env | tok/s per GPU | step ms | wall |"
T2="parallelism.tp=2 trainer.micro_batch_size=8 trainer.global_batch_size=16"
T4="parallelism.tp=4 trainer.micro_batch_size=8 trainer.global_batch_size=16"
D4="$G345 trainer.global_batch_size=32 parallelism.zero1=true"
P4="parallelism.tp=1 parallelism.pp=4 trainer.global_batch_size=16"
BAL="parallelism.pipeline_split=balanced"
ON="parallelism.pp_comm_overlap=true"
table() {
  case $1 in
    decompose) cat <<R
tp1-mb8 1 - parallelism.tp=1 trainer.micro_batch_size=8 trainer.global_batch_size=16
tp2-mb8 2 - $T2
tp2-mb8-nocomm 2 RECIPE_EXP_SKIP_COMM=tp $T2
tp4-mb8 4 - $T4
tp4-mb8-nocomm 4 RECIPE_EXP_SKIP_COMM=tp $T4
dp1 1 - $G345 trainer.global_batch_size=8
dp4-zero1 4 - $D4
dp4-zero1-nocomm 4 RECIPE_EXP_SKIP_COMM=dp $D4
tp1-mb1 1 - parallelism.tp=1 trainer.micro_batch_size=1 trainer.global_batch_size=16
pp4-mb1-v2-bal 4 - $P4 parallelism.virtual_pp=2 $BAL trainer.micro_batch_size=1
pp4-mb1-v2-bal-nocomm 4 RECIPE_EXP_SKIP_COMM=pp $P4 parallelism.virtual_pp=2 $BAL trainer.micro_batch_size=1
R
    ;;
    pp) cat <<R
tp1-mb1 1 - parallelism.tp=1 trainer.micro_batch_size=1 trainer.global_batch_size=16
tp1-mb2 1 - parallelism.tp=1 trainer.micro_batch_size=2 trainer.global_batch_size=16
pp4-mb1-v2-bal 4 - $P4 parallelism.virtual_pp=2 $BAL trainer.micro_batch_size=1
pp4-mb1-v2-bal-ov 4 - $P4 parallelism.virtual_pp=2 $BAL trainer.micro_batch_size=1 $ON
pp4-mb1-v4 4 - $P4 parallelism.virtual_pp=4 trainer.micro_batch_size=1
pp4-mb1-v4-ov 4 - $P4 parallelism.virtual_pp=4 trainer.micro_batch_size=1 $ON
pp4-v2-bal 4 - $P4 parallelism.virtual_pp=2 $BAL trainer.micro_batch_size=2
pp4-v2-bal-ov 4 - $P4 parallelism.virtual_pp=2 $BAL trainer.micro_batch_size=2 $ON
pp4-bal 4 - $P4 $BAL trainer.micro_batch_size=2
pp4-bal-ov 4 - $P4 $BAL trainer.micro_batch_size=2 $ON
R
    ;;
    nccl) cat <<R
tp1-mb8 1 - parallelism.tp=1 trainer.micro_batch_size=8 trainer.global_batch_size=16
tp2-mb8 2 - $T2
tp2-mb8-cta32 2 NCCL_MIN_CTAS=32 $T2
tp2-mb8-ll128 2 NCCL_PROTO=LL128 $T2
tp2-mb8-simple 2 NCCL_PROTO=Simple $T2
tp4-mb8 4 - $T4
tp4-mb8-cta32 4 NCCL_MIN_CTAS=32 $T4
tp4-mb8-tree 4 NCCL_ALGO=Tree $T4
dp1 1 - $G345 trainer.global_batch_size=8
dp4-zero1 4 - $D4
dp4-zero1-cta32 4 NCCL_MIN_CTAS=32 $D4
R
    ;;
    dp) cat <<R
dp1 1 - $G345 trainer.global_batch_size=8
dp4-zero1 4 - $D4
dp4-zero1-b32 4 - $D4 parallelism.grad_bucket_mb=32
dp4-zero1-b64 4 - $D4 parallelism.grad_bucket_mb=64
dp4-zero1-b256 4 - $D4 parallelism.grad_bucket_mb=256
dp4-zero1-b512 4 - $D4 parallelism.grad_bucket_mb=512
dp4-zero1-cta32 4 NCCL_MIN_CTAS=32 $D4
dp4-zero1-bf16-cta32 4 NCCL_MIN_CTAS=32 $D4 parallelism.grad_reduce_bf16=true
dp4-zero1-b512-cta32 4 NCCL_MIN_CTAS=32 $D4 parallelism.grad_bucket_mb=512
dp1-again 1 - $G345 trainer.global_batch_size=8
R
    ;;
    dp-repeat) for i in 1 2; do cat <<R
dp1-$i 1 - $G345 trainer.global_batch_size=8
dp4-zero1-$i 4 - $D4
dp4-zero1-b256-$i 4 - $D4 parallelism.grad_bucket_mb=256
dp4-zero1-b512-$i 4 - $D4 parallelism.grad_bucket_mb=512
R
    done
    echo "dp1-3 1 - $G345 trainer.global_batch_size=8"
    ;;
  esac
}
for set in ${SET:-pp}; do
  while read -r label n envs rest; do
    [[ -z $label ]] && continue
    [[ $envs == - ]] && envs=""
    eval "args=($rest)"
    run "$label" "$n" "$envs" "${args[@]}"
  done < <(table "$set")
done
