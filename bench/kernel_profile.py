#!/usr/bin/env python3
"""Per-kernel time breakdown of a recipe training run from an Nsight Compute CSV.

Collect (on the GPU machine), then summarize:
    ncu --clock-control none --csv --page raw --metrics gpu__time_duration.sum \
        build/bin/recipe pretrain gpt3_345m --max-steps 2 --device cuda > prof.csv
    bench/kernel_profile.py prof.csv --steps 2

Prints one row per kernel family (name without template arguments): calls per step, time per step
and share of the total, largest first. ncu serializes kernels, so the total is the sum of kernel
times, not the step's wall time.
"""
import argparse
import csv
import io
import re
import sys
from collections import defaultdict


def family(name: str) -> str:
    name = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    while re.search(r"<[^<>]*>", name):       # template arguments, innermost first
        name = re.sub(r"<[^<>]*>", "", name)
    name = re.sub(r"\(.*\)", "", name)        # parameter lists
    name = name.replace("void ", "").strip()
    return name[:90]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=1, help="training steps profiled (divides the totals)")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--last-steps", type=int, default=0,
                    help="keep only the last K steps (each ends with its AdamW kernels), so warm-up "
                         "and cuBLASLt algorithm timing in the first steps are left out")
    args = ap.parse_args()
    text = open(args.csv, encoding="utf-8", errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        print("no ncu CSV header found in", args.csv, file=sys.stderr)
        return 1
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    timed = []
    for r in rows:
        v = r.get("gpu__time_duration.sum", "").replace(",", "")
        try:
            timed.append((family(r.get("Kernel Name", "?")), float(v)))
        except ValueError:
            continue  # the units row
    if args.last_steps > 0:
        is_adamw = [f.endswith("adamw_kernel") for f, _ in timed]
        ends = [i for i in range(len(timed)) if is_adamw[i] and (i + 1 == len(timed) or not is_adamw[i + 1])]
        if len(ends) < args.last_steps + 1:
            print(f"only {len(ends)} steps in {args.csv}; need {args.last_steps + 1}", file=sys.stderr)
            return 1
        timed = timed[ends[-args.last_steps - 1] + 1 : ends[-1] + 1]
        args.steps = args.last_steps
    time_ns = defaultdict(float)
    calls = defaultdict(int)
    for fam, t in timed:
        time_ns[fam] += t
        calls[fam] += 1
    total = sum(time_ns.values())
    if total == 0:
        print("no kernel times in", args.csv, file=sys.stderr)
        return 1
    print(f"| kernel | calls/step | ms/step | share |\n|---|---|---|---|")
    for fam, t in sorted(time_ns.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"| `{fam}` | {calls[fam] / args.steps:.0f} | {t / 1e6 / args.steps:.3f} | {100 * t / total:.1f}% |")
    print(f"| **all kernels** | {sum(calls.values()) / args.steps:.0f} | {total / 1e6 / args.steps:.3f} | 100% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
