#!/usr/bin/env bash
# The benchmark of docs/performance.md, back to back on one GPU: the PyTorch twin (eager and
# torch.compile) and `recipe pretrain gpt3_345m` for micro-batch 4, 8 and 16 (seq 1024, 100 steps).
# Writes bench/results/bench.json and bench/results/bench.md (tok/s, step ms, TFLOP/s, MFU, peak
# memory, first/last loss, ratio to torch.compile).
#   bench/run_bench.sh                       # everything
#   BATCHES="4 8" SKIP_TORCH=1 bench/run_bench.sh
# Environment: RECIPE (the binary, default build/bin/recipe), BATCHES, STEPS, SKIP_TORCH,
# SKIP_ENGINE, TORCH_MODES (default eager,compile), OUT_DIR (default bench/results).
# RECIPE_OVERRIDES: extra recipe overrides for the engine runs, e.g. "kernels.fused_mlp=false".
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT_DIR:-$root/bench/results}
recipe=${RECIPE:-$root/build/bin/recipe}
batches=${BATCHES:-4 8 16}
steps=${STEPS:-100}
modes=${TORCH_MODES:-eager,compile}
python=${PYTHON:-python3}
mkdir -p "$out"
[[ -f "$root/.deps/prefix/env.sh" ]] && source "$root/.deps/prefix/env.sh"

torch_jsonl="$out/torch.jsonl"
engine_jsonl="$out/engine.jsonl"

if [[ -z "${SKIP_TORCH:-}" ]]; then
  rm -f "$torch_jsonl"
  echo "== PyTorch twin ($modes; micro-batch ${batches// /,})"
  PYTHONUNBUFFERED=1 "$python" "$root/bench/torch_twin.py" --modes "$modes" \
    --batches "${batches// /,}" --steps "$steps" --out "$torch_jsonl" || echo "torch twin failed (exit $?)"
fi

if [[ -z "${SKIP_ENGINE:-}" ]]; then
  rm -f "$engine_jsonl"
  if [[ ! -x "$recipe" ]]; then
    echo "recipe binary not found at $recipe (set RECIPE=...); engine runs skipped"
  else
    for b in $batches; do
      echo "== recipe pretrain gpt3_345m, micro-batch $b"
      exp="$out/runs"
      name="bench_b$b"
      rm -rf "$exp/$name"
      log="$out/engine_b$b.log"
      "$recipe" pretrain gpt3_345m --max-steps "$steps" trainer.micro_batch_size="$b" \
        trainer.global_batch_size="$b" --device cuda --experiments-dir "$exp" --name "$name" \
        checkpoint.save_final=false ${RECIPE_OVERRIDES:-} >"$log" 2>&1
      rc=$?
      tail -n 5 "$log"
      run_dir=$(ls -d "$exp/$name"/run-* 2>/dev/null | sort -V | tail -n 1)
      "$python" "$root/bench/summarize.py" engine-run --run-dir "${run_dir:-/nonexistent}" \
        --micro-batch "$b" --exit-code "$rc" --log "$log" >>"$engine_jsonl"
    done
  fi
fi

"$python" "$root/bench/summarize.py" report --torch "$torch_jsonl" --engine "$engine_jsonl" \
  --json "$out/bench.json" --md "$out/bench.md"
cat "$out/bench.md"
