#!/usr/bin/env bash
# The LoRA benchmark of docs/performance.md, on one GPU, in one call: `recipe finetune llama3_8b_lora`
# and the transformers + peft twin (bench/lora_twin.py, eager and torch.compile) at the Llama 3 8B
# shape (random frozen bf16 base), rank 16, seq 4096, micro-batch 1, same protocol as the other
# benchmarks (one fixed batch, mean step time after 10 warm-up steps), one table per adapter set.
#   bench/lora_bench.sh [build] [engine] [engine-fp8] [engine-fp8-cast] [engine-packed] [twin] [report]
#     build          configure + build recipe in $BUILD (default /tmp/lora-bench/build)
#     engine         recipe finetune with adapters on qkv and on all linears (mock data, one sample
#                    per sequence); RECOMPUTE_NONE=1 adds rows with trainer.recompute=none
#     engine-fp8     the engine rows again with trainer.precision=fp8 (the frozen base held only in
#                    FP8, peft.base_fp8_only's default)
#     engine-fp8-cast  the same with peft.base_fp8_only=false (bf16 base cast to FP8 every step)
#     engine-packed  both adapter sets on packed chat data (synthetic conversations, byte tokenizer,
#                    data.kind=sft data.pack=true): samples of 200-2000 tokens, several per sequence
#     twin           transformers + peft, $MODES (eager,compile), qkv and all linears
#     report         $OUT/lora_bench.md
# Needs peft on the GPU machine: carry its wheel (.whl/) and put it on PYTHONPATH first (see
# /work/.library device README: pip install --no-index --no-deps --target /tmp/site .whl/*.whl).
# Environment: OUT (results, default bench/results), STEPS (30), MODES (eager,compile), SEQ (4096),
# PRESET (llama3_8b_lora; llama3_1_8b_lora, qwen3_8b_lora) and TWIN_ARCH (llama; qwen3 for Qwen3-8B),
# LAYERS (the preset's layer count, for the FLOP count: 32; 36 for Qwen3-8B).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/bench/results}
mkdir -p "$out"
build=${BUILD:-/tmp/lora-bench/build}
recipe=$build/bin/recipe
steps=${STEPS:-30}
seq=${SEQ:-4096}
preset=${PRESET:-llama3_8b_lora}
layers=${LAYERS:-32}
rows=$out/lora_rows.jsonl
source bench/device_env.sh "$out"

# The twins' protocol: one fixed batch repeated, 10 warm-up steps, cosine to 0 at the last step.
common=(model.seq_length="$seq" trainer.micro_batch_size=1 trainer.global_batch_size=1 checkpoint.save_final=false
        checkpoint.allow_random_init=true  # the twins start from the same random base, not a checkpoint
        --device cuda --max-steps "$steps" optimizer.min_lr=0 schedule.warmup_steps=10)

engine_run() {  # $1 workload (lora-qkv | lora-all), $2 label, then overrides
  local wl=$1 label=$2; shift 2
  local exp=/tmp/lora-bench/runs name="${wl}${label:+_$label}" log="$out/engine_${wl}${label:+_$label}.log"
  rm -rf "$exp/$name"
  "$recipe" finetune "$preset" "$@" "${common[@]}" --experiments-dir "$exp" --name "$name" >"$log" 2>&1
  local rc=$?
  grep -E "^recipe:" "$log" | head -n 5
  tail -n 2 "$log"
  local run_dir
  run_dir=$(ls -d "$exp/$name"/run-* 2>/dev/null | sort -V | tail -n 1)
  python3 bench/summarize.py engine-run --run-dir "${run_dir:-/nonexistent}" --micro-batch 1 \
    --exit-code "$rc" --log "$log" --workload "$wl" --layers "$layers" --impl "recipe${label:+ ($label)}" | tee -a "$rows"
}

for stage in "$@"; do
  case $stage in
    build)
      t0=$SECONDS
      mkdir -p "$build"
      cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 &&
        cmake --build "$build" -j"$(nproc)" --target recipe >"$out/build.log" 2>&1
      echo "build rc=$? in $((SECONDS - t0)) s"
      grep -E "error" "$out/build.log" | head -n 10 ;;
    engine)
      engine_run lora-qkv "" 'peft.target_modules=["qkv"]' data.fixed_batch=true
      engine_run lora-all "" peft.target_modules=all-linear data.fixed_batch=true
      if [[ ${RECOMPUTE_NONE:-0} == 1 ]]; then
        engine_run lora-qkv recompute-none 'peft.target_modules=["qkv"]' data.fixed_batch=true trainer.recompute=none
        engine_run lora-all recompute-none peft.target_modules=all-linear data.fixed_batch=true trainer.recompute=none
      fi ;;
    engine-fp8)  # the frozen base's GEMMs in FP8 (trainer.precision=fp8), the adapters in bf16
      engine_run lora-qkv fp8 'peft.target_modules=["qkv"]' data.fixed_batch=true trainer.precision=fp8
      engine_run lora-all fp8 peft.target_modules=all-linear data.fixed_batch=true trainer.precision=fp8 ;;
    engine-fp8-cast)  # the bf16 base kept and cast to FP8 every step (peft.base_fp8_only=false)
      engine_run lora-qkv fp8-cast 'peft.target_modules=["qkv"]' data.fixed_batch=true trainer.precision=fp8 \
        peft.base_fp8_only=false
      engine_run lora-all fp8-cast peft.target_modules=all-linear data.fixed_batch=true trainer.precision=fp8 \
        peft.base_fp8_only=false ;;
    engine-packed)
      data=/tmp/lora-bench/chat
      mkdir -p "$data"
      python3 - "$data/chat.jsonl" <<'PY'
import json, random, sys
rng = random.Random(7)
words = "the a of to and in is that for it on with as was by at be this from or an are".split()
with open(sys.argv[1], "w") as f:
    for _ in range(4000):
        q = " ".join(rng.choice(words) for _ in range(rng.randint(20, 150)))
        a = " ".join(rng.choice(words) for _ in range(rng.randint(20, 300)))
        f.write(json.dumps({"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]}) + "\n")
PY
      "$recipe" data prepare --format chat --chat-template plain --input "$data/chat.jsonl" --tokenizer byte \
        --output "$data/chat" >"$out/prepare.log" 2>&1 || tail -n 3 "$out/prepare.log"
      sft=(data.kind=sft data.path="$data/chat" data.chat_template=plain data.tokenizer=byte data.pack=true)
      engine_run lora-qkv packed 'peft.target_modules=["qkv"]' "${sft[@]}"
      engine_run lora-all packed peft.target_modules=all-linear "${sft[@]}" ;;
    twin)
      PYTHONUNBUFFERED=1 python3 bench/lora_twin.py --arch "${TWIN_ARCH:-llama}" --targets qkv,all \
        --modes "${MODES:-eager,compile}" \
        --batches 1 --seq "$seq" --steps "$steps" --out "$rows" ;;
    report)
      python3 bench/summarize.py llama-report --rows "$rows" --md "$out/lora_bench.md"
      cat "$out/lora_bench.md" ;;
    *) echo "unknown stage $stage" ;;
  esac
done
