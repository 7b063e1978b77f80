#!/usr/bin/env python3
"""PyTorch twin of the recipe benchmark workload (see shared BENCH.md / docs/performance.md).

GPT 354M: 24 layers, d_model 1024, 16 heads, seq 1024, GPT-2 vocab 50257 padded to 50304 (as the
engine pads it; the padding logits are left out of the loss, as the engine does), learned
positions, GELU (tanh), biases, tied embeddings, pre-LayerNorm. Megatron init: normal(0, 0.02),
output projections (attention proj, MLP fc2) normal(0, 0.02/sqrt(2·layers)), biases 0, LayerNorm
1/0. AdamW (fused) β 0.9/0.95, eps 1e-8, weight decay 0.1 on the linear weights only (the engine's
rule: none on embeddings, norms and biases), lr 3e-4 with 10 linear warmup steps then cosine to 0
at the last step, grad-norm clip 1.0, bf16 autocast, F.scaled_dot_product_attention (causal).
One fixed batch of random tokens is repeated every step, so the model memorizes it.

Prints one JSON line per (mode, micro-batch): mean step time of steps 10..steps-1, tokens/s,
model TFLOP/s, MFU (FLOPs/token = 6N + 12·L·d·T with N without the position table, as the engine
counts; peak 989e12 dense bf16), peak allocated GiB,
first and last loss.

  python3 bench/torch_twin.py --modes eager,compile --batches 4,8,16
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PEAK_FLOPS = 989e12


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d, eps=1e-5)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d, eps=1e-5)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, layers, d, heads, seq, vocab, padded_vocab):
        super().__init__()
        self.vocab = vocab
        self.wte = nn.Embedding(padded_vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d, eps=1e-5)
        std, out_std = 0.02, 0.02 / math.sqrt(2 * layers)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln" in name:
                nn.init.ones_(p)
            elif name.endswith(("proj.weight", "fc2.weight")):
                nn.init.normal_(p, 0.0, out_std)
            else:
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied output embedding
        logits = logits[..., : self.vocab]  # padding columns are not part of the softmax
        return F.cross_entropy(logits.reshape(-1, self.vocab).float(), targets.reshape(-1))


def steady_step_ms(starts, ends, steps):
    """Mean step time after the 10 warm-up steps (BENCH.md). Steps run back to back, so the span
    from step 10's start to the last step's end over the number of steps is the steady-state step
    time (it includes any host-side gaps)."""
    first_timed = min(10, steps - 1)
    return starts[first_timed].elapsed_time(ends[-1]) / (steps - first_timed), first_timed


def lr_at(step, lr, warmup, total):
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = min(1.0, max(0.0, (step - warmup) / max(1, total - warmup)))
    return 0.5 * lr * (1.0 + math.cos(math.pi * progress))


def run(mode, batch, args):
    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    model = GPT(args.layers, args.d_model, args.heads, args.seq, args.vocab, args.padded_vocab).to(dev)
    n_params = sum(p.numel() for p in model.parameters())  # the tied embedding once
    decay = [p for n, p in model.named_parameters() if n.endswith("weight") and p.dim() == 2
             and not n.startswith(("wte", "wpe"))]
    decay_ids = {id(p) for p in decay}
    no_decay = [p for p in model.parameters() if id(p) not in decay_ids]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_fn_model = torch.compile(model) if mode == "compile" else model

    g = torch.Generator().manual_seed(args.seed)
    data = torch.randint(0, args.vocab, (batch, args.seq + 1), generator=g).to(dev)
    x, y = data[:, :-1].contiguous(), data[:, 1:].contiguous()

    torch.cuda.reset_peak_memory_stats()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps)]
    losses = []
    wall0 = time.perf_counter()
    for step in range(args.steps):
        starts[step].record()
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args.lr, args.warmup, args.steps)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn_model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        ends[step].record()
        losses.append(loss.detach())
    torch.cuda.synchronize()
    wall = time.perf_counter() - wall0
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    step_ms, first_timed = steady_step_ms(starts, ends, args.steps)
    tokens = batch * args.seq
    # The engine's count (PaLM/Megatron): the learned positions are a lookup, the tied embedding counts
    # once, as the output head.
    flops_per_token = 6 * (n_params - args.seq * args.d_model) + 12 * args.layers * args.d_model * args.seq
    tflops = flops_per_token * tokens / (step_ms / 1e3) / 1e12
    result = {
        "impl": "torch_" + mode,
        "mode": mode,
        "micro_batch": batch,
        "seq": args.seq,
        "steps": args.steps,
        "step_ms": round(step_ms, 3),
        "step_ms_median": round(sorted(times[first_timed:])[len(times[first_timed:]) // 2], 3),
        "tokens_per_sec": round(tokens / (step_ms / 1e3), 1),
        "tflops": round(tflops, 2),
        "mfu": round(tflops * 1e12 / PEAK_FLOPS, 4),
        "peak_alloc_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3),
        "peak_reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 3),
        "first_loss": round(losses[0].item(), 4),
        "last_loss": round(losses[-1].item(), 5),
        "params": n_params,
        "flops_per_token": flops_per_token,
        "wall_s": round(wall, 1),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
    }
    del opt, model, step_fn_model
    torch._dynamo.reset()
    torch.cuda.empty_cache()
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", default="eager,compile", help="comma list of eager, compile")
    ap.add_argument("--batches", default="4,8,16", help="comma list of micro-batch sizes")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--d-model", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--padded-vocab", type=int, default=50304)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", default="", help="also append the JSON lines to this file")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_twin: no CUDA device visible")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    for mode in args.modes.split(","):
        for b in (int(s) for s in args.batches.split(",")):
            try:
                r = run(mode, b, args)
            except torch.cuda.OutOfMemoryError as e:  # report and go on with the next size
                r = {"impl": "torch_" + mode, "mode": mode, "micro_batch": b, "error": "out of memory: " + str(e)[:200]}
                torch._dynamo.reset()
                torch.cuda.empty_cache()
            line = json.dumps(r)
            print(line, flush=True)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(line + "\n")


if __name__ == "__main__":
    main()
