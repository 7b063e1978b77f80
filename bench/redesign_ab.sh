#!/usr/bin/env bash
# One GPU call proving a refactoring changed nothing: builds a base commit (a `git archive` in
# .cache/ab/base.tar.gz, made by `git archive BASE | gzip > .cache/ab/base.tar.gz`) and this tree
# side by side (Release, /tmp/ab/*), then runs the stages given:
#   det     with trainer.deterministic=true, gpt3_345m (30 steps, micro-batch 4) and a Llama-shaped
#           model (RMSNorm, SwiGLU, RoPE, GQA; 30 steps) on each tree; metrics.jsonl (step, loss,
#           lr, grad norm, consumed samples) must be byte-identical; a second base run of each
#           shows the comparison can tell (deterministic runs repeat bitwise)
#   tests   this tree's CUDA tests (tests/kernels/cuda)
#   bench   the engine benchmark (bench/run_bench.sh, SKIP_TORCH=1) of both trees, alternating
#           base/new per micro-batch so drift hits both alike
#   bench/redesign_ab.sh det tests bench
# Results: $OUT/summary.md, logs beside it. Builds survive in /tmp/ab while the machine is warm.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/bench/results}
mkdir -p "$out"
summary="$out/summary.md"
touch "$summary"
export PATH="$PATH:/usr/local/cuda/bin"
cd "$root"
if [[ -d .deps/bundle && ! -f .deps/prefix/.complete ]]; then
  scripts/setup_offline.sh .deps/bundle >"$out/setup.log" 2>&1 || echo "offline bundle setup failed" | tee -a "$summary"
fi
[[ -f .deps/prefix/env.sh ]] && source .deps/prefix/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$summary"

base_src=/tmp/ab/base_src
new_bin=/tmp/ab/new/bin/recipe
base_bin=/tmp/ab/base/bin/recipe
build() {  # $1 source, $2 build dir, targets...
  local src=$1 dir=$2; shift 2
  cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$dir.cmake.log" 2>&1 &&
    cmake --build "$dir" -j8 --target "$@" >"$dir.build.log" 2>&1
}
if [[ ! -x $new_bin || ! -x $base_bin ]]; then
  t0=$SECONDS
  mkdir -p /tmp/ab && rm -rf "$base_src" && mkdir -p "$base_src"
  tar xzf .cache/ab/base.tar.gz -C "$base_src" && ln -sfn "$root/.deps" "$base_src/.deps"
  build "$base_src" /tmp/ab/base recipe & pb=$!
  build "$root" /tmp/ab/new recipe recipe_tests_kernels_cuda & pn=$!
  wait $pb; rb=$?; wait $pn; rn=$?
  echo "build base rc=$rb new rc=$rn in $((SECONDS - t0)) s" | tee -a "$summary"
  for d in base new; do grep -E "error" /tmp/ab/$d.build.log | head -n 5 | tee -a "$summary"; done
fi

det_run() {  # $1 tree (base|new), $2 name, args...
  local tree=$1 name=$2; shift 2
  local bin=/tmp/ab/$tree/bin/recipe exp=/tmp/ab/runs/$tree
  rm -rf "$exp/$name"
  "$bin" pretrain "$@" trainer.deterministic=true checkpoint.save_final=false --device cuda \
    --experiments-dir "$exp" --name "$name" >"$out/det_${tree}_$name.log" 2>&1
  echo "$tree $name rc=$?" >>"$summary"
  ls "$exp/$name"/run-*/metrics.jsonl | sort -V | tail -n 1
}
llama=(llama3_8b model.num_layers=4 model.hidden_size=1024 model.num_attention_heads=16 model.num_kv_heads=4
       model.ffn_hidden_size=4096 model.seq_length=1024 model.vocab_size=32000 parallelism.tp=1
       executor.gpus_per_node=1 trainer.micro_batch_size=2 trainer.global_batch_size=4 --max-steps 30)
gpt=(gpt3_345m --max-steps 30)
for stage in "$@"; do
  case $stage in
    det)
      for w in gpt llama; do
        declare -n a=$w
        mb=$(det_run base $w "${a[@]}"); mb2=$(det_run base ${w}_again "${a[@]}"); mn=$(det_run new $w "${a[@]}")
        cp "$mb" "$out/metrics_base_$w.jsonl" 2>/dev/null; cp "$mn" "$out/metrics_new_$w.jsonl" 2>/dev/null
        echo "== $w: $(wc -l <"$mb" 2>/dev/null) lines; base vs base again: $(cmp -s "$mb" "$mb2" && echo identical || echo DIFFER); base vs new: $(cmp -s "$mb" "$mn" && echo identical || echo DIFFER)" | tee -a "$summary"
        tail -n 1 "$mn" | tee -a "$summary"
        unset -n a
      done ;;
    tests)
      t0=$SECONDS
      timeout 300 /tmp/ab/new/tests/recipe_tests_kernels_cuda --force-colors=0 >"$out/tests.log" 2>&1
      echo "CUDA tests exit $? in $((SECONDS - t0)) s" | tee -a "$summary"
      grep -E "test cases|assertions|FAILED|ERROR|skipped" "$out/tests.log" | head -n 20 | tee -a "$summary" ;;
    bench)
      for b in ${BATCHES:-4 8 16}; do
        for tree in base new; do
          SKIP_TORCH=1 BATCHES=$b OUT_DIR=/tmp/ab/bench_${tree}_b$b RECIPE=/tmp/ab/$tree/bin/recipe \
            "$root/bench/run_bench.sh" >"$out/bench_${tree}_b$b.log" 2>&1
          echo "== $tree b$b" >>"$summary"
          grep -E "^\| recipe" /tmp/ab/bench_${tree}_b$b/bench.md | tee -a "$summary"
        done
      done ;;
    *) echo "unknown stage $stage" ;;
  esac
done
