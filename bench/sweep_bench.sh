#!/usr/bin/env bash
# The seed's throughput envelope on one GPU (issue 21; docs/performance.md): `recipe sweep` of
# gpt3_345m over micro-batch {2,4,8,16} × seq {1024,2048} × precision {bf16,fp8}, 30 steps a point,
# the first 5 excluded, then `recipe runs envelope`; and the PyTorch twin (bench/torch_twin.py,
# torch.compile) at the same bf16 points.
#   PHASES="build engine twin" OUT=/tmp/out bench/sweep_bench.sh
set -uo pipefail
PHASES=${PHASES:-build engine twin}
out=$OUT
source bench/device_env.sh "$out"
has build && device_build "$out" recipe
if has engine; then
  t0=$SECONDS
  "$B/bin/recipe" sweep gpt3_345m trainer.micro_batch_size=2,4,8,16 model.seq_length=1024,2048 \
    trainer.precision=${PRECISIONS:-bf16,fp8} --max-steps 30 --warmup 5 --device cuda checkpoint.save_final=false \
    --experiments-dir /tmp/sweep --name seed >"$out/sweep.log" 2>&1
  echo "sweep exit $? in $((SECONDS - t0)) s"
  "$B/bin/recipe" runs envelope seed --experiments-dir /tmp/sweep --warmup 5 -o "$out/envelope.svg" | tee "$out/envelope.md"
fi
if has twin; then
  for seq in 1024 2048; do
    PYTHONUNBUFFERED=1 timeout 280 python3 bench/torch_twin.py --modes "${MODES:-compile}" --batches 2,4,8,16 \
      --seq "$seq" --steps 30 --out "$out/twin.jsonl" >"$out/twin_$seq.log" 2>&1
    echo "twin seq $seq exit $?"
  done
  python3 - "$out/twin.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print({k: r.get(k) for k in ("mode", "micro_batch", "seq", "tokens_per_sec", "step_ms", "peak_alloc_gib", "peak_reserved_gib")})
PY
fi
