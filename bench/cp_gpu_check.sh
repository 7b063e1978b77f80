#!/usr/bin/env bash
# Context parallelism on GPUs (issue 20), one device call on ≥ 2 GPUs (results in $OUT):
#   build  Release build of recipe, recipe_tests and the train probe ($B)
#   ops    on GPU 0: the CUDA block-attention ops, the ring on one GPU, RoPE at CP positions, the
#          learned-position ops with positions (tests/kernels/cuda), per-region errors printed
#   parity every "CUDA: context parallelism" case of core/parallel (CP2; CP2×DP2 and CP2×TP2 on 4 GPUs)
#   speed  the ~1B Llama at seq 8k and 32k: CP1 on one GPU against CP2 on two, same global batch
#   PHASES="build ops parity speed" OUT=/tmp/out bench/cp_gpu_check.sh
set -uo pipefail
PHASES=${PHASES:-build ops parity speed}
out=$OUT
source bench/device_env.sh "$out"
has build && device_build "$out" recipe recipe_tests recipe_train_probe
if has ops; then
  t0=$SECONDS
  CUDA_VISIBLE_DEVICES=0 RECIPE_TEST_VERBOSE=1 timeout 240 "$B/tests/recipe_tests" -ts=kernels/cuda \
    -tc="cuda attention_block*,cuda ring attention*,cuda rope at context*,cuda learned position*" >"$out/ops.log" 2>&1
  echo "CP ops exit $? in $((SECONDS - t0)) s"
  grep -E "ERROR|FAILED|test cases|assertions" "$out/ops.log" | head -30
fi
if has parity; then
  t0=$SECONDS
  timeout ${PARITY_S:-300} "$B/tests/recipe_tests" -ts=core/parallel -tc="CUDA: context parallelism*" >"$out/parity.log" 2>&1
  echo "CP parity exit $? in $((SECONDS - t0)) s"
  grep -E "ERROR|worst|test cases|assertions|skipped" "$out/parity.log" | head -30
fi
if has speed; then
  L1B="model.num_layers=16 model.hidden_size=2048 model.num_attention_heads=16 model.num_kv_heads=8 model.ffn_hidden_size=5632 model.vocab_size=32000"
  for r in "cp1-8k 1 8192 1" "cp2-8k 2 8192 2" "cp1-32k 1 32768 1" "cp2-32k 2 32768 2"; do
    read -r label n seq cp <<<"$r"
    timeout ${RUN_S:-150} "$B/bin/recipe" pretrain llama3_8b $L1B parallelism.tp=1 parallelism.cp=$cp model.seq_length=$seq \
      trainer.micro_batch_size=1 trainer.global_batch_size=2 --device cuda --gpus-per-node $n --max-steps 20 \
      trainer.log_interval=5 checkpoint.save_final=false --experiments-dir /tmp/dev/cp --name "$label" >"$out/$label.log" 2>&1
    echo "$label exit $?: $(grep -E '^recipe:|error' "$out/$label.log" | head -3)"
    python3 - "/tmp/dev/cp/$label" "$label" "$n" <<'PY'
import json, sys, glob, os
d = sorted(glob.glob(os.path.join(sys.argv[1], "run-*")))
f = os.path.join(d[-1], "timing.jsonl") if d else ""
t = [json.loads(l) for l in open(f)][5:] if f and os.path.exists(f) else []
m = [json.loads(l) for l in open(os.path.join(d[-1], "metrics.jsonl"))] if d else []
loss = [r["loss"] for r in m if "loss" in r]
if not t: print(f"| {sys.argv[2]} | {sys.argv[3]} | failed |"); sys.exit()
tps = sum(x["tokens_per_sec"] for x in t) / len(t)
print(f"| {sys.argv[2]} | {sys.argv[3]} | {tps:,.0f} | {tps/int(sys.argv[3]):,.0f} | {sum(x['step_ms'] for x in t)/len(t):.1f} | "
      f"{max(x['peak_memory_bytes'] for x in t)/2**30:.2f} | {loss[0] if loss else ''} | {loss[-1] if loss else ''} |")
PY
  done
fi
