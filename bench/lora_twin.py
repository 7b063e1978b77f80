#!/usr/bin/env python3
"""PyTorch twin of the LoRA benchmark (docs/performance.md, "LoRA on the Llama 3 8B shape").

Hugging Face transformers' LlamaForCausalLM (attn_implementation="sdpa") at the Llama-3-8B shape
(32 layers, hidden 4096, 32/8 heads, ffn 14336, vocab 128256, untied, RoPE θ 500000), random base
weights held in bf16 and frozen, with peft LoRA adapters (rank 16, alpha 32, no dropout; peft keeps
the adapters in f32) on
  qkv  q_proj, k_proj, v_proj          (the engine's peft.target_modules=["qkv"])
  all  q, k, v, o, gate, up, down_proj (the engine's peft.target_modules=all-linear)
trained the way the engine trains them: AdamW (fused) β 0.9/0.95 on the adapters only, lr 1e-4
with 10 warm-up steps then cosine, grad-norm clip 1.0, bf16 autocast, loss in f32 over the full
vocabulary, no gradient checkpointing. One fixed sequence of random tokens is repeated every step.
Eager or under torch.compile.

Prints one JSON line per (targets, mode, micro-batch): mean step time of steps 10..steps-1, tokens/s,
TFLOP/s and MFU with the engine's FLOP count for a LoRA run (4 per frozen matmul parameter: forward
and input gradient only; 6 per adapter parameter; 12·L·(heads·head_dim)·T for attention; no
input-embedding lookup; peak 989e12 dense bf16), peak allocated GiB, first and last loss.

  python3 bench/lora_twin.py --targets qkv,all --modes eager,compile --batches 1 --seq 4096
"""
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F

from torch_twin import lr_at, steady_step_ms  # the GPT twin's schedule and timing: one protocol

PEAK_FLOPS = 989e12
# --arch picks the model: Llama 3 / 3.1 8B (the same shape; 3.1's RoPE scaling changes no FLOP) or
# Qwen3-8B (qk-norm, head_dim 128, 36 layers, ffn 12288, vocab 151936, θ 1e6).
SHAPES = {
    "llama": dict(layers=32, d=4096, heads=32, kv=8, head_dim=128, ffn=14336, vocab=128256),
    "qwen3": dict(layers=36, d=4096, heads=32, kv=8, head_dim=128, ffn=12288, vocab=151936),
}
SHAPE = SHAPES["llama"]
TARGETS = {
    "qkv": ["q_proj", "k_proj", "v_proj"],
    "all": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
}


def lora_llama(w, seq, targets, rank, alpha, arch="llama"):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config

    common = dict(vocab_size=w["vocab"], hidden_size=w["d"], intermediate_size=w["ffn"],
                  num_hidden_layers=w["layers"], num_attention_heads=w["heads"], num_key_value_heads=w["kv"],
                  head_dim=w["head_dim"], max_position_embeddings=seq, tie_word_embeddings=False,
                  attention_bias=False, initializer_range=0.02, use_cache=False, attn_implementation="sdpa")
    if arch == "qwen3":
        cfg = Qwen3Config(**common, rope_theta=1000000.0, rms_norm_eps=1e-6, use_sliding_window=False)
    else:
        cfg = LlamaConfig(**common, rope_theta=500000.0, rms_norm_eps=1e-5, mlp_bias=False)
    with torch.device("cuda"):
        base = AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
    lcfg = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules=TARGETS[targets], bias="none")
    return get_peft_model(base, lcfg)


def run(targets, mode, batch, args):
    torch.manual_seed(args.seed)
    w = dict(SHAPES[args.arch])
    if args.layers:
        w["layers"] = args.layers
    model = lora_llama(w, args.seq, targets, args.rank, args.alpha, args.arch)
    trainable = [p for p in model.parameters() if p.requires_grad]
    n_adapter = sum(p.numel() for p in trainable)
    n_frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad and p.dim() == 2)
    n_frozen -= w["vocab"] * w["d"]  # the input embedding is a lookup
    opt = torch.optim.AdamW(trainable, lr=args.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0, fused=True)

    def forward(idx):
        return model(input_ids=idx, use_cache=False).logits

    fwd = torch.compile(forward) if mode == "compile" else forward
    V, T = w["vocab"], args.seq
    g = torch.Generator().manual_seed(args.seed)
    data = torch.randint(0, V, (batch, T + 1), generator=g).cuda()
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
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = fwd(x)
        loss = F.cross_entropy(logits.float().view(-1, V), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        ends[step].record()
        losses.append(loss.detach())
        del logits, loss
    torch.cuda.synchronize()
    wall = time.perf_counter() - wall0
    step_ms, _ = steady_step_ms(starts, ends, args.steps)
    tokens = batch * T
    flops_per_token = 4 * n_frozen + 6 * n_adapter + 12 * w["layers"] * w["heads"] * w["head_dim"] * T
    tflops = flops_per_token * tokens / (step_ms / 1e3) / 1e12
    result = {
        "impl": f"hf+peft_{mode}",
        "workload": f"lora-{targets}",
        "layers": w["layers"],
        "micro_batch": batch,
        "seq": T,
        "steps": args.steps,
        "step_ms": round(step_ms, 3),
        "tokens_per_sec": round(tokens / (step_ms / 1e3), 1),
        "tflops": round(tflops, 2),
        "mfu": round(tflops * 1e12 / PEAK_FLOPS, 4),
        "peak_alloc_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3),
        "first_loss": round(losses[0].item(), 4),
        "last_loss": round(losses[-1].item(), 5),
        "adapter_params": n_adapter,
        "flops_per_token": flops_per_token,
        "wall_s": round(wall, 1),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
    }
    del opt, model, fwd, trainable
    torch._dynamo.reset()
    torch.cuda.empty_cache()
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", default="qkv,all", help="comma list of qkv, all")
    ap.add_argument("--modes", default="eager,compile", help="comma list of eager, compile")
    ap.add_argument("--batches", default="1", help="comma list of micro-batch sizes")
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--arch", default="llama", choices=sorted(SHAPES), help="llama (Llama 3/3.1 8B) or qwen3 (Qwen3-8B)")
    ap.add_argument("--layers", type=int, default=0, help="override the shape's layers")
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=float, default=32.0)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", default="", help="also append the JSON lines to this file")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("lora_twin: no CUDA device visible")
    torch.backends.cuda.matmul.allow_tf32 = True
    for targets in args.targets.split(","):
        for mode in args.modes.split(","):
            for b in (int(s) for s in args.batches.split(",")):
                try:
                    r = run(targets, mode, b, args)
                except torch.cuda.OutOfMemoryError as e:  # report and go on with the next one
                    r = {"impl": f"hf+peft_{mode}", "workload": f"lora-{targets}", "micro_batch": b,
                         "error": "out of memory: " + str(e)[:200]}
                except Exception as e:  # noqa: BLE001 — one failed twin must not hide the others
                    r = {"impl": f"hf+peft_{mode}", "workload": f"lora-{targets}", "micro_batch": b,
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
