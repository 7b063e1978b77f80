#!/usr/bin/env bash
# The Llama benchmark of docs/performance.md, on one GPU, in one call: the engine and the PyTorch
# twins (bench/llama_twin.py: a torchtitan-style Llama and Hugging Face transformers, eager and
# torch.compile) on the same workloads, same protocol as the GPT benchmark (one fixed batch, mean
# step time after 10 warm-up steps), one table per workload.
#   bench/llama_bench.sh [build] [tests] [engine] [twin] [report] [prof:WORKLOAD:MB]
#     build   configure + build recipe and the CUDA tests in $BUILD (default /tmp/llama-bench/build)
#     tests   the CUDA tests (every preset's attention on cuDNN, CUDA against the CPU reference)
#     engine  recipe pretrain on each workload (1b at micro-batch $BATCHES_1B, 8b-slice at 1)
#     engine-norecompute  the 1b rows again with trainer.recompute=none (the twins keep every activation)
#     gpt     gpt3_345m at micro-batch 8 (the GPT benchmark's middle point, to check for regressions)
#     twin    the twins ($IMPLS × $MODES) on the same workloads
#     report  $OUT/llama_bench.md from the rows of engine and twin
#     prof:W:B  ncu per-kernel profile of 2 engine steps of workload W at micro-batch B
# Environment: OUT (results, default bench/results), STEPS (30), BATCHES_1B ("2 4"), LAYERS_8B (8),
# IMPLS (titan,hf), MODES (eager,compile), RECIPE_OVERRIDES (extra engine overrides), ACCUM (1:
# micro-batches per optimizer step, gradient accumulation; the engine's global batch = ACCUM ·
# micro-batch, the twins' --accum).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/bench/results}
mkdir -p "$out"
build=${BUILD:-/tmp/llama-bench/build}
recipe=$build/bin/recipe
steps=${STEPS:-30}
accum=${ACCUM:-1}
batches_1b=${BATCHES_1B:-2 4}
layers_8b=${LAYERS_8B:-8}
rows=$out/llama_rows.jsonl
source bench/device_env.sh "$out"

# The workloads as engine overrides: Llama-3.2-1B shape, and the Llama-3-8B layer shape.
w_1b=(llama3_8b model.num_layers=16 model.hidden_size=2048 model.num_attention_heads=32 model.num_kv_heads=8
      model.ffn_hidden_size=8192 model.seq_length=2048 model.tie_embeddings=true)
w_8b=(llama3_8b model.num_layers=$layers_8b)
# The twins' protocol: one fixed batch repeated, lr 3e-4 with 10 warm-up steps then cosine to 0 at
# the last step (the presets' 2000-step warm-up would leave the loss flat over 30 steps).
common=(parallelism.tp=1 executor.gpus_per_node=1 checkpoint.save_final=false --device cuda --max-steps "$steps"
        data.fixed_batch=true optimizer.lr=3e-4 optimizer.min_lr=0 schedule.warmup_steps=10)

engine_run() {  # $1 workload name, $2 layers, $3 micro-batch, then the workload's overrides
  local wl=$1 layers=$2 b=$3; shift 3
  local exp=/tmp/llama-bench/runs name="${wl}_b${b}_a$accum${LABEL:+_$LABEL}" log="$out/engine_${wl}_b${b}_a$accum${LABEL:+_$LABEL}.log"
  rm -rf "$exp/$name"
  "$recipe" pretrain "$@" "${common[@]}" trainer.micro_batch_size="$b" trainer.global_batch_size="$((b * accum))" \
    --experiments-dir "$exp" --name "$name" ${RECIPE_OVERRIDES:-} >"$log" 2>&1
  local rc=$?
  grep -E "^recipe:" "$log" | head -n 5
  tail -n 2 "$log"
  local run_dir
  run_dir=$(ls -d "$exp/$name"/run-* 2>/dev/null | sort -V | tail -n 1)
  python3 bench/summarize.py engine-run --run-dir "${run_dir:-/nonexistent}" --micro-batch "$b" --accum "$accum" \
    --exit-code "$rc" --log "$log" --workload "$wl" --layers "$layers" --impl "recipe${LABEL:+ ($LABEL)}" | tee -a "$rows"
}

for stage in "$@"; do
  case $stage in
    build)
      t0=$SECONDS
      mkdir -p "$build"
      cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 &&
        cmake --build "$build" -j"$(nproc)" --target recipe recipe_tests_kernels_cuda >"$out/build.log" 2>&1
      echo "build rc=$? in $((SECONDS - t0)) s"
      grep -E "error" "$out/build.log" | head -n 10 || true ;;
    tests)
      t0=$SECONDS
      timeout 400 "$build/tests/recipe_tests_kernels_cuda" --force-colors=0 >"$out/tests.log" 2>&1
      echo "CUDA tests exit $? in $((SECONDS - t0)) s"
      grep -E "^[a-z0-9_]+ +(default|deterministic)|notice|test cases|assertions|ERROR|FAILED" "$out/tests.log" | head -n 60 ;;
    engine)
      for b in $batches_1b; do engine_run 1b 16 "$b" "${w_1b[@]}"; done
      engine_run 8b-slice "$layers_8b" 1 "${w_8b[@]}" ;;
    gpt)
      log="$out/engine_gpt3_345m_b8${LABEL:+_$LABEL}.log"
      "$recipe" pretrain gpt3_345m --max-steps 100 trainer.micro_batch_size=8 trainer.global_batch_size=8 \
        --device cuda --experiments-dir /tmp/llama-bench/runs --name "gpt_b8${LABEL:+_$LABEL}" \
        checkpoint.save_final=false ${RECIPE_OVERRIDES:-} >"$log" 2>&1
      echo "gpt3_345m b8 ${LABEL:-}: $(tail -n 1 "$log")" ;;
    engine-norecompute)  # the twins keep every activation too
      for b in $batches_1b; do LABEL=recompute-none engine_run 1b 16 "$b" "${w_1b[@]}" trainer.recompute=none; done ;;
    twin)
      PYTHONUNBUFFERED=1 python3 bench/llama_twin.py --workload 1b --impls "${IMPLS:-titan,hf}" \
        --modes "${MODES:-eager,compile}" --batches "${batches_1b// /,}" --steps "$steps" --accum "$accum" --out "$rows"
      PYTHONUNBUFFERED=1 python3 bench/llama_twin.py --workload 8b-slice --layers "$layers_8b" \
        --impls "${IMPLS:-titan,hf}" --modes "${MODES:-eager,compile}" --batches 1 --steps "$steps" --accum "$accum" --out "$rows" ;;
    report)
      python3 bench/summarize.py llama-report --rows "$rows" --md "$out/llama_bench.md"
      cat "$out/llama_bench.md" ;;
    prof:*)
      IFS=: read -r _ wl b <<<"$stage"
      if [[ $wl == 1b ]]; then args=("${w_1b[@]}"); else args=("${w_8b[@]}"); fi
      csv="$out/prof_${wl}_b$b.csv"
      # Steps 3-6 of 6 (the first ones tune GEMM and attention plans), without ncu's cache flush.
      timeout 300 ncu --clock-control none --cache-control none --csv --page raw --metrics gpu__time_duration.sum \
        "$recipe" pretrain "${args[@]}" parallelism.tp=1 executor.gpus_per_node=1 checkpoint.save_final=false \
        --device cuda --max-steps 6 trainer.micro_batch_size="$b" trainer.global_batch_size="$b" \
        --experiments-dir /tmp/llama-bench/prof --name "prof_$wl" ${RECIPE_OVERRIDES:-} >"$csv" 2>"$out/prof_${wl}.err"
      python3 bench/kernel_profile.py "$csv" --last-steps 4 --top 60 >"$out/prof_${wl}_b$b.md"
      grep -v nvjet "$out/prof_${wl}_b$b.md"
      grep -c nvjet "$out/prof_${wl}_b$b.md"
      rm -f "$csv" ;;
    *) echo "unknown stage $stage" ;;
  esac
done
