#!/usr/bin/env bash
# Multi-GPU scaling benchmark (issue #5), one host:
#   gpt3_345m at DP1 → DP2 → DP4 (weak scaling: micro-batch 8 per GPU), efficiency per GPU;
#   a ~1B Llama-style model (16 layers, d 2048, 16 heads / 8 KV heads, FFN 5632, vocab 32000,
#   seq 1024) alone at TP1/TP2/TP4 and PP1/PP2/PP4 (global batch 16, micro-batch 2), tok/s per GPU;
#   set tpsp: TP2/TP4 with sequence parallelism, set tpov: the same with parallelism.tp_comm_overlap
#   set tpchunk: TP2/TP4 without SP, with tp_comm_overlap (the row-parallel forward in TP_CHUNKS
#   row chunks, default 2) (their efficiency is against the TP1 run of set tp, so run
#   SETS="tp tpsp tpov tpchunk" to compare).
# Every run is `recipe pretrain ... --gpus-per-node N` through the local executor (mpirun + NCCL).
# Env: RECIPE (binary, default build/bin/recipe), OUT_DIR (default bench/results), STEPS (default 30),
# GPUS (max GPUs to use, default: all visible), SETS (which groups to run, default "dp tp pp"; also tpsp, tpov, tpchunk),
# TP_CHUNKS (parallelism.tp_overlap_chunks of set tpchunk, default 2),
# MIN_GPUS (skip runs on fewer GPUs, default 1), EXTRA (overrides appended to every run, e.g. "kernels.host_clip=true" for an A/B).
# Writes $OUT_DIR/scaling.jsonl (one line per run) and $OUT_DIR/scaling.md.
set -uo pipefail
cd "$(dirname "$0")/.."
RECIPE=${RECIPE:-build/bin/recipe}
OUT_DIR=${OUT_DIR:-bench/results}
STEPS=${STEPS:-30}
GPUS=${GPUS:-$(nvidia-smi -L 2>/dev/null | wc -l)}
SETS=${SETS:-dp tp pp}
TP_CHUNKS=${TP_CHUNKS:-2}
read -r -a EXTRA_ARGS <<<"${EXTRA:-}"
mkdir -p "$OUT_DIR"
EXP="$OUT_DIR/scaling-runs"
rm -rf "$EXP" "$OUT_DIR/scaling.jsonl"

LLAMA_1B=(model.num_layers=16 model.hidden_size=2048 model.num_attention_heads=16 model.num_kv_heads=8
          model.ffn_hidden_size=5632 model.vocab_size=32000 model.seq_length=1024 trainer.recompute=none)

# run <label> <gpus> <recipe> [args...]: one training, its mean tok/s (steps after the first 5)
run() {
  local label=$1 gpus=$2; shift 2
  if [ "$gpus" -gt "$GPUS" ]; then echo "skip $label: needs $gpus GPUs"; return; fi
  if [ "$gpus" -lt "${MIN_GPUS:-1}" ]; then return; fi
  local name="scaling-$(echo "$label" | tr -c 'A-Za-z0-9\n' '-')"
  echo "== $label ($gpus GPUs)"
  "$RECIPE" pretrain "$@" --device cuda --gpus-per-node "$gpus" --max-steps "$STEPS" \
      --experiments-dir "$EXP" --name "$name" trainer.log_interval=10 checkpoint.save_final=false "${EXTRA_ARGS[@]}" 2>&1 | tail -4
  python3 - "$EXP/$name" "$label" "$gpus" >>"$OUT_DIR/scaling.jsonl" <<'PY'
import json, sys, glob, os
run_dirs = sorted(glob.glob(os.path.join(sys.argv[1], "run-*")))
label, gpus = sys.argv[2], int(sys.argv[3])
rec = {"label": label, "gpus": gpus, "ok": False}
if run_dirs:
    t = [json.loads(l) for l in open(os.path.join(run_dirs[-1], "timing.jsonl"))] if os.path.exists(os.path.join(run_dirs[-1], "timing.jsonl")) else []
    m = [json.loads(l) for l in open(os.path.join(run_dirs[-1], "metrics.jsonl"))] if os.path.exists(os.path.join(run_dirs[-1], "metrics.jsonl")) else []
    t = t[5:] if len(t) > 8 else t
    if t:
        tps = sum(x["tokens_per_sec"] for x in t) / len(t)
        rec.update(ok=True, tokens_per_sec=tps, tokens_per_sec_per_gpu=tps / gpus,
                   step_ms=sum(x["step_ms"] for x in t) / len(t),
                   peak_gib=max(x["peak_memory_bytes"] for x in t) / 2**30,
                   first_loss=m[0]["loss"] if m else None, last_loss=m[-1]["loss"] if m else None)
print(json.dumps(rec))
PY
}

for set in $SETS; do
  case $set in
    dp) for n in 1 2 4 8; do
          run "gpt3_345m DP$n" "$n" gpt3_345m trainer.micro_batch_size=8 trainer.global_batch_size=$((8 * n))
        done ;;
    tp) for t in 1 2 4; do
          run "llama-1B TP$t" "$t" llama3_8b "${LLAMA_1B[@]}" parallelism.tp=$t trainer.micro_batch_size=2 trainer.global_batch_size=16
        done ;;
    tpsp) for t in 2 4; do
          run "llama-1B TP$t+SP" "$t" llama3_8b "${LLAMA_1B[@]}" parallelism.tp=$t parallelism.sequence_parallel=true \
              trainer.micro_batch_size=2 trainer.global_batch_size=16
        done ;;
    tpov) for t in 2 4; do
          run "llama-1B TP$t+SP+overlap" "$t" llama3_8b "${LLAMA_1B[@]}" parallelism.tp=$t parallelism.sequence_parallel=true \
              parallelism.tp_comm_overlap=true trainer.micro_batch_size=2 trainer.global_batch_size=16
        done ;;
    tpchunk) for t in 2 4; do
          run "llama-1B TP$t+overlap ($TP_CHUNKS chunks)" "$t" llama3_8b "${LLAMA_1B[@]}" parallelism.tp=$t \
              parallelism.tp_comm_overlap=true parallelism.tp_overlap_chunks=$TP_CHUNKS \
              trainer.micro_batch_size=2 trainer.global_batch_size=16
        done ;;
    pp) for p in 2 4; do
          run "llama-1B PP$p" "$p" llama3_8b "${LLAMA_1B[@]}" parallelism.tp=1 parallelism.pp=$p trainer.micro_batch_size=2 trainer.global_batch_size=16
        done ;;
  esac
done

python3 - "$OUT_DIR/scaling.jsonl" >"$OUT_DIR/scaling.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
base = {}
print("| run | GPUs | tok/s | tok/s per GPU | per-GPU efficiency vs 1 GPU | step ms | peak GiB | loss first → last |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    if not r["ok"]:
        print(f"| {r['label']} | {r['gpus']} | failed | | | | | |"); continue
    model = r["label"].split()[0]
    if r["gpus"] == 1: base[model] = r["tokens_per_sec_per_gpu"]
    eff = f"{100 * r['tokens_per_sec_per_gpu'] / base[model]:.1f}%" if model in base else ""
    print(f"| {r['label']} | {r['gpus']} | {r['tokens_per_sec']:,.0f} | {r['tokens_per_sec_per_gpu']:,.0f} | {eff} | "
          f"{r['step_ms']:.1f} | {r['peak_gib']:.2f} | {r['first_loss']:.3f} → {r['last_loss']:.3f} |")
PY
cat "$OUT_DIR/scaling.md"
