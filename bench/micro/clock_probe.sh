#!/usr/bin/env bash
# Samples GPU 0's SM clock, power and throttle reasons every 100 ms while a run trains, to tell
# whether a step's wall time above its kernels' sum (ncu runs each kernel alone, at boost clock)
# is clocks under sustained load. Needs a built recipe ($B, default /tmp/dev/build).
#   OUT=/tmp/out bench/micro/clock_probe.sh [recipe overrides...]   (default: gpt3_345m at micro-batch 16)
# Writes $OUT/clocks.csv (the samples), $OUT/clock-run.log, and prints the limits and a summary of
# the samples taken during the timed steps.
set -uo pipefail
B=${BUILD:-/tmp/dev/build}
out=$OUT
args=("$@")
[[ ${#args[@]} -eq 0 ]] && args=(gpt3_345m trainer.micro_batch_size=16 trainer.global_batch_size=16)
nvidia-smi -i 0 -q -d CLOCK,POWER | grep -E "Max Clocks|SM  |Graphics|Power Limit|Default Power" | head -12
# The throttle-reason field's name changed across drivers (clocks_event_reasons since r535).
reasons=clocks_event_reasons.active
nvidia-smi -i 0 --query-gpu=$reasons --format=csv >/dev/null 2>&1 || reasons=clocks_throttle_reasons.active
nvidia-smi -i 0 --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,$reasons \
  --format=csv,noheader,nounits -lms 100 >"$out/clocks.csv" &
smi=$!
CUDA_VISIBLE_DEVICES=0 timeout 120 "$B/bin/recipe" pretrain "${args[@]}" --device cuda --max-steps 60 \
  checkpoint.save_final=false --experiments-dir /tmp/dev/clock --name clock >"$out/clock-run.log" 2>&1
kill $smi 2>/dev/null; wait $smi 2>/dev/null
python3 - "$out/clocks.csv" <<'PY'
import sys, statistics
rows = [[c.strip() for c in l.split(",")] for l in open(sys.argv[1]) if l.count(",") >= 4]
busy = [r for r in rows if float(r[2]) > 300]  # drawing > 300 W: the GPU is training
if not busy: print("no samples under load"); sys.exit()
sm = [float(r[1]) for r in busy]; w = [float(r[2]) for r in busy]
print(f"samples under load: {len(busy)} of {len(rows)}")
print(f"SM clock MHz: median {statistics.median(sm):.0f}, min {min(sm):.0f}, max {max(sm):.0f}")
print(f"power W: median {statistics.median(w):.0f}, max {max(w):.0f}")
reasons = {}
for r in busy: reasons[r[4]] = reasons.get(r[4], 0) + 1
print("throttle reasons (bitmask: samples):", reasons)
PY
grep -E "tok/s" "$out/clock-run.log" | tail -3
