#!/usr/bin/env python3
"""Turns benchmark outputs into one JSON and one markdown table (used by bench/run_bench.sh).

  summarize.py engine-run --run-dir D --micro-batch B [--exit-code N] [--log F]
      reads D/timing.jsonl ({"step","step_ms","tokens_per_sec","tflops","mfu","peak_memory_bytes"})
      and D/metrics.jsonl ({"step","loss",...}) of one `recipe pretrain` run and prints one JSON line
      in the twin's format (mean step time of the steps after the first 10).
  summarize.py report --torch T.jsonl --engine E.jsonl --json OUT.json --md OUT.md
  summarize.py llama-report --rows R.jsonl --md OUT.md
      the Llama benchmark (bench/llama_bench.sh): one table per workload, each row's ratio to
      the fastest PyTorch twin of its micro-batch
"""
import argparse
import json
import os
import sys

PEAK_FLOPS = 989e12


def read_jsonl(path):
    rows = []
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
    return rows


def engine_run(args):
    res = {"impl": args.impl, "mode": "engine", "micro_batch": args.micro_batch, "accum": args.accum}
    if args.workload:
        res["workload"] = args.workload
        res["layers"] = args.layers
    timing = sorted(read_jsonl(os.path.join(args.run_dir, "timing.jsonl")), key=lambda r: r.get("step", 0))
    metrics = sorted(read_jsonl(os.path.join(args.run_dir, "metrics.jsonl")), key=lambda r: r.get("step", 0))
    if not timing or not metrics:
        tail = ""
        if args.log and os.path.exists(args.log):
            with open(args.log, errors="replace") as f:
                tail = "".join(f.readlines()[-5:])
        res["error"] = f"no timing/metrics in {args.run_dir} (exit {args.exit_code}): {tail.strip()[-400:]}"
        print(json.dumps(res))
        return
    steady = timing[10:] if len(timing) > 10 else timing
    step_ms = sum(r["step_ms"] for r in steady) / len(steady)
    tok = sum(r["tokens_per_sec"] for r in steady) / len(steady)
    tflops = sum(r.get("tflops", 0.0) for r in steady) / len(steady)
    res.update({
        "steps": len(timing),
        "step_ms": round(step_ms, 3),
        "tokens_per_sec": round(tok, 1),
        "tflops": round(tflops, 2),
        "mfu": round(tflops * 1e12 / PEAK_FLOPS, 4),
        "peak_alloc_gib": round(max(r.get("peak_memory_bytes", 0) for r in timing) / 2**30, 3),
        "first_loss": metrics[0]["loss"],
        "last_loss": metrics[-1]["loss"],
        "exit_code": args.exit_code,
        "attention_path": timing[-1].get("attention_path", ""),
    })
    print(json.dumps(res))


def report(args):
    rows = read_jsonl(args.torch) + read_jsonl(args.engine)
    compiled = {r["micro_batch"]: r for r in rows if r.get("mode") == "compile" and "error" not in r}
    for r in rows:
        base = compiled.get(r.get("micro_batch"))
        if base and "tokens_per_sec" in r:
            r["ratio_to_compile"] = round(r["tokens_per_sec"] / base["tokens_per_sec"], 3)
    device = next((r["device"] for r in rows if "device" in r), "unknown GPU")
    with open(args.json, "w") as f:
        json.dump({"device": device, "results": rows}, f, indent=2)
    order = {"eager": 0, "compile": 1, "engine": 2}
    rows.sort(key=lambda r: (r.get("micro_batch", 0), order.get(r.get("mode"), 9)))
    lines = [f"# Benchmark: GPT 354M, seq 1024, 100 steps ({device})", "",
             "| impl | micro-batch | tok/s | step ms | TFLOP/s | MFU | peak GiB | first loss | last loss | × torch.compile |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['impl']} | {r['micro_batch']} | error: {r['error'][:120]} |  |  |  |  |  |  |  |")
            continue
        lines.append("| {impl} | {mb} | {tok:,.0f} | {ms:.1f} | {tf:.1f} | {mfu:.1%} | {mem:.2f} | {fl:.3f} | {ll:.4f} | {ratio} |".format(
            impl=r["impl"], mb=r["micro_batch"], tok=r["tokens_per_sec"], ms=r["step_ms"], tf=r["tflops"],
            mfu=r["mfu"], mem=r["peak_alloc_gib"], fl=r["first_loss"], ll=r["last_loss"],
            ratio=r.get("ratio_to_compile", "")))
    lines += ["", "Peak memory: torch = torch.cuda.max_memory_allocated; recipe = the backend's peak of device allocations.",
              "FLOPs/token = 6N + 12·L·d·T, N without the position table (PaLM/Megatron); MFU against 989 TFLOP/s (H100 SXM dense bf16)."]
    with open(args.md, "w") as f:
        f.write("\n".join(lines) + "\n")


def llama_report(args):
    rows = read_jsonl(args.rows)
    lines = []
    for wl in sorted({r.get("workload", "") for r in rows}):
        sel = [r for r in rows if r.get("workload", "") == wl]
        device = next((r["device"] for r in rows if "device" in r), "unknown GPU")
        lines += [f"## {wl} ({device})", "",
                  "| impl | layers | micro-batch | micro-batches / step | tok/s | step ms | TFLOP/s | MFU | peak GiB | "
                  "first loss | last loss | × best twin |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        # Rows compare at the same (micro-batch, micro-batches per optimizer step).
        def key(r):
            return r.get("micro_batch", 0), r.get("accum", 1)
        best = {}
        for r in sel:
            if not r.get("impl", "").startswith("recipe") and "tokens_per_sec" in r:
                best[key(r)] = max(best.get(key(r), 0), r["tokens_per_sec"])
        sel.sort(key=lambda r: (key(r), r.get("impl", "").startswith("recipe"), r.get("impl", "")))
        for r in sel:
            if "error" in r:
                lines.append(f"| {r['impl']} | | {r.get('micro_batch')} | {r.get('accum', 1)} | "
                             f"error: {r['error'][:140]} | | | | | | | |")
                continue
            ratio = r["tokens_per_sec"] / best[key(r)] if best.get(key(r)) else float("nan")
            impl = r["impl"] + (f" ({r['attention_path']} attention)" if r.get("attention_path") else "")
            lines.append(f"| {impl} | {r.get('layers', '')} | {r['micro_batch']} | {r.get('accum', 1)} | "
                         f"{r['tokens_per_sec']:,.0f} | "
                         f"{r['step_ms']:.1f} | {r['tflops']:.1f} | {r['mfu']:.1%} | {r['peak_alloc_gib']:.2f} | "
                         f"{r['first_loss']:.3f} | {r['last_loss']:.4f} | {ratio:.2f} |")
        lines.append("")
    if any(str(r.get("workload", "")).startswith("lora") for r in rows):
        lines.append("LoRA rows: FLOPs/token = 4 per frozen matmul parameter (forward and input gradient, no weight "
                     "gradient) + 6 per adapter parameter + 12·L·(heads·head_dim)·T; the same count for engine and twin. ")
    lines.append("FLOPs/token = 6N + 12·L·(heads·head_dim)·T, N without the untied input embedding (PaLM/Megatron); "
                 "MFU against 989 TFLOP/s (H100 SXM dense bf16).")
    with open(args.md, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("engine-run")
    e.add_argument("--run-dir", required=True)
    e.add_argument("--micro-batch", type=int, required=True)
    e.add_argument("--exit-code", type=int, default=0)
    e.add_argument("--log", default="")
    e.add_argument("--workload", default="")
    e.add_argument("--impl", default="recipe")
    e.add_argument("--layers", type=int, default=0)
    e.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step")
    r = sub.add_parser("report")
    r.add_argument("--torch", default="")
    r.add_argument("--engine", default="")
    r.add_argument("--json", required=True)
    r.add_argument("--md", required=True)
    lr = sub.add_parser("llama-report")
    lr.add_argument("--rows", required=True)
    lr.add_argument("--md", required=True)
    args = ap.parse_args()
    {"engine-run": engine_run, "report": report, "llama-report": llama_report}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
