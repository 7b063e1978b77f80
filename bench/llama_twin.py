#!/usr/bin/env python3
"""PyTorch twins of the Llama benchmark workloads (docs/performance.md; the dated log:
bench/results/2026-11-27-llama.md).

Two implementations of the same model, trained the way the engine trains it:
  titan  a clean Llama in plain PyTorch, written the way torchtitan writes its Llama: RMSNorm,
         RoPE (θ 500000, in the rotate-half form of Hugging Face and the engine rather than
         torchtitan's complex pairs: the same cost), grouped-query attention through
         F.scaled_dot_product_attention(enable_gqa=True) (no repeated K/V), SwiGLU MLP, no biases;
  hf     Hugging Face transformers' LlamaForCausalLM (attn_implementation="sdpa").
Each runs eager or under torch.compile; AdamW (fused) β 0.9/0.95, eps 1e-8, weight decay 0.1 on
the 2-D weights except the embedding, lr 3e-4 with 10 warm-up steps then cosine, grad-norm clip
1.0, bf16 autocast, loss in f32 over the full vocabulary. Init normal(0, 0.02). One fixed batch of
random tokens is repeated every step.

Workloads:
  1b        Llama-3.2-1B shape: 16 layers, hidden 2048, 32/8 heads, ffn 8192, vocab 128256,
            tied embeddings, seq 2048
  8b-slice  Llama-3-8B layer shape: hidden 4096, 32/8 heads, ffn 14336, vocab 128256, untied,
            seq 8192, --layers layers (default 8)

--accum K runs K micro-batches per optimizer step (gradient accumulation, as the engine does with
trainer.global_batch_size = K · micro-batch): the optimizer's full pass over the parameters is paid
once per K micro-batches, as in real pretraining (the llama3_8b preset: 128 sequences per step).

Prints one JSON line per (impl, mode, micro-batch): mean step time of steps 10..steps-1,
tokens/s, TFLOP/s and MFU with the engine's FLOP count (6·N + 12·L·(heads·head_dim)·T, N
without the input-embedding lookup of an untied model: the PaLM/Megatron convention; peak 989e12
dense bf16), peak allocated GiB, first and last loss.

  python3 bench/llama_twin.py --workload 1b --impls titan,hf --modes eager,compile --batches 2,4
"""
import argparse
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_twin import lr_at, steady_step_ms  # the GPT twin's schedule and timing: one protocol

PEAK_FLOPS = 989e12

WORKLOADS = {
    "1b": dict(layers=16, d=2048, heads=32, kv=8, ffn=8192, vocab=128256, seq=2048, tied=True),
    "8b-slice": dict(layers=8, d=4096, heads=32, kv=8, ffn=14336, vocab=128256, seq=8192, tied=False),
}
THETA = 500000.0
EPS = 1e-5


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).type_as(x) * self.weight


def rope_tables(seq, head_dim, device):
    inv = 1.0 / (THETA ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    ang = torch.outer(torch.arange(seq, device=device).float(), inv)  # [T, D/2]
    ang = torch.cat([ang, ang], dim=-1)  # rotate-half layout
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):  # x [B, H, T, D]
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat([-x2, x1], dim=-1)
    return (x.float() * cos + rotated.float() * sin).type_as(x)


class Attention(nn.Module):
    def __init__(self, d, heads, kv):
        super().__init__()
        self.heads, self.kv, self.hd = heads, kv, d // heads
        self.wq = nn.Linear(d, heads * self.hd, bias=False)
        self.wk = nn.Linear(d, kv * self.hd, bias=False)
        self.wv = nn.Linear(d, kv * self.hd, bias=False)
        self.wo = nn.Linear(heads * self.hd, d, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.heads, self.hd).transpose(1, 2)
        k = self.wk(x).view(B, T, self.kv, self.hd).transpose(1, 2)
        v = self.wv(x).view(B, T, self.kv, self.hd).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.wo(y.transpose(1, 2).reshape(B, T, -1))


class FeedForward(nn.Module):
    def __init__(self, d, ffn):
        super().__init__()
        self.w1 = nn.Linear(d, ffn, bias=False)
        self.w3 = nn.Linear(d, ffn, bias=False)
        self.w2 = nn.Linear(ffn, d, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.attention_norm = RMSNorm(w["d"])
        self.attention = Attention(w["d"], w["heads"], w["kv"])
        self.ffn_norm = RMSNorm(w["d"])
        self.feed_forward = FeedForward(w["d"], w["ffn"])

    def forward(self, x, cos, sin):
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class TitanLlama(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.tok_embeddings = nn.Embedding(w["vocab"], w["d"])
        self.layers = nn.ModuleList(Block(w) for _ in range(w["layers"]))
        self.norm = RMSNorm(w["d"])
        self.output = None if w["tied"] else nn.Linear(w["d"], w["vocab"], bias=False)
        self.hd = w["d"] // w["heads"]
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        cos, sin = rope_tables(idx.shape[1], self.hd, idx.device)
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x, cos, sin)
        x = self.norm(x)
        return F.linear(x, self.tok_embeddings.weight if self.output is None else self.output.weight)


def hf_llama(w):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=w["vocab"], hidden_size=w["d"], intermediate_size=w["ffn"],
                      num_hidden_layers=w["layers"], num_attention_heads=w["heads"], num_key_value_heads=w["kv"],
                      max_position_embeddings=w["seq"], rope_theta=THETA, rms_norm_eps=EPS,
                      tie_word_embeddings=w["tied"], attention_bias=False, mlp_bias=False,
                      initializer_range=0.02, use_cache=False, attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg)

    class Wrap(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, idx):
            return self.m(input_ids=idx, use_cache=False).logits

    return Wrap(model)


def matmul_params(model, w):
    n = sum(p.numel() for p in model.parameters())  # a tied embedding once
    if not w["tied"]:
        n -= w["vocab"] * w["d"]  # the input embedding is a lookup
    return n


def run(impl, mode, batch, w, args):
    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    model = (TitanLlama(w) if impl == "titan" else hf_llama(w)).to(dev)
    n_matmul = matmul_params(model, w)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n]
    decay_ids = {id(p) for p in decay}
    no_decay = [p for p in model.parameters() if id(p) not in decay_ids]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    fwd = torch.compile(model) if mode == "compile" else model
    V, T = w["vocab"], w["seq"]

    g = torch.Generator().manual_seed(args.seed)
    data = torch.randint(0, V, (batch, T + 1), generator=g).to(dev)
    x, y = data[:, :-1].contiguous(), data[:, 1:].contiguous()

    torch.cuda.reset_peak_memory_stats()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps)]
    losses = []
    wall0 = time.perf_counter()
    for step in range(args.steps):
        starts[step].record()
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args.lr, 10, args.steps)
        # Gradient accumulation: args.accum micro-batches per optimizer step, each loss scaled by
        # 1/accum so the gradient is the mean over the step's tokens (the engine's global batch =
        # accum · micro-batch); the fixed batch is repeated for every micro-batch.
        for _ in range(args.accum):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = fwd(x)
            loss = F.cross_entropy(logits.float().view(-1, V), y.view(-1))
            (loss / args.accum).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        ends[step].record()
        losses.append(loss.detach())
        del logits, loss
    torch.cuda.synchronize()
    wall = time.perf_counter() - wall0
    step_ms, _ = steady_step_ms(starts, ends, args.steps)
    tokens = batch * T * args.accum
    flops_per_token = 6 * n_matmul + 12 * w["layers"] * w["d"] * T
    tflops = flops_per_token * tokens / (step_ms / 1e3) / 1e12
    result = {
        "impl": f"{impl}_{mode}",
        "workload": args.workload,
        "layers": w["layers"],
        "micro_batch": batch,
        "accum": args.accum,
        "seq": T,
        "steps": args.steps,
        "step_ms": round(step_ms, 3),
        "tokens_per_sec": round(tokens / (step_ms / 1e3), 1),
        "tflops": round(tflops, 2),
        "mfu": round(tflops * 1e12 / PEAK_FLOPS, 4),
        "peak_alloc_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3),
        "first_loss": round(losses[0].item(), 4),
        "last_loss": round(losses[-1].item(), 5),
        "matmul_params": n_matmul,
        "flops_per_token": flops_per_token,
        "wall_s": round(wall, 1),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
    }
    del opt, model, fwd
    torch._dynamo.reset()
    torch.cuda.empty_cache()
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="1b")
    ap.add_argument("--impls", default="titan,hf", help="comma list of titan, hf")
    ap.add_argument("--modes", default="eager,compile", help="comma list of eager, compile")
    ap.add_argument("--batches", default="2,4", help="comma list of micro-batch sizes")
    ap.add_argument("--layers", type=int, default=0, help="override the workload's layer count")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--accum", type=int, default=1,
                    help="micro-batches per optimizer step (gradient accumulation; the engine's "
                         "trainer.global_batch_size = accum x micro-batch)")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", default="", help="also append the JSON lines to this file")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("llama_twin: no CUDA device visible")
    w = dict(WORKLOADS[args.workload])
    if args.layers:
        w["layers"] = args.layers
    torch.backends.cuda.matmul.allow_tf32 = True
    for impl in args.impls.split(","):
        for mode in args.modes.split(","):
            for b in (int(s) for s in args.batches.split(",")):
                try:
                    r = run(impl, mode, b, w, args)
                except torch.cuda.OutOfMemoryError as e:  # report and go on with the next size
                    r = {"impl": f"{impl}_{mode}", "workload": args.workload, "micro_batch": b,
                         "error": "out of memory: " + str(e)[:200]}
                    torch._dynamo.reset()
                    torch.cuda.empty_cache()
                except Exception as e:  # noqa: BLE001 — one failed twin must not hide the others
                    r = {"impl": f"{impl}_{mode}", "workload": args.workload, "micro_batch": b,
                         "error": f"{type(e).__name__}: {str(e)[:300]}"}
                    torch._dynamo.reset()
                    torch.cuda.empty_cache()
                line = json.dumps(r)
                print(line, flush=True)
                if args.out:
                    with open(args.out, "a") as f:
                        f.write(line + "\n")


if __name__ == "__main__":
    main()
