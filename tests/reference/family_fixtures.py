#!/usr/bin/env python3
"""Build the tiny Hugging Face models of tests/data/hf_families/ and the logits transformers gives.

Each fixture is a small model of one HF architecture with random weights (torch.manual_seed(0),
float32; norm weights moved off 1 so that a norm the engine forgot would show), saved with
save_pretrained into tests/data/hf_families/<name>/ (config.json + model.safetensors), and
expected.json: {"transformers": version, "input_ids": [[...], ...], "logits": [[[...] per vocab id]
per position] per row}, model(input_ids).logits in float32 with eager attention (the plain
softmax(QKᵀ/√d)V the engine computes). The C++ test tests/hf/family_fixture.cpp imports each
directory through the engine's HF import path and compares its logits with these.

Not run in CI (CI has no torch/transformers). Needs torch, transformers, safetensors:

    python3 tests/reference/family_fixtures.py            # every fixture
    python3 tests/reference/family_fixtures.py qwen3_tiny # some
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "hf_families")


def qwen3_tiny():
    # Qwen3 with qk-norm and a head_dim of its own: 4 heads of 24 (not hidden 64 / 4 = 16), 2 KV heads.
    from transformers import Qwen3Config

    return Qwen3Config(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=24, max_position_embeddings=64,
                       rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False, initializer_range=0.15,
                       attention_bias=False, use_sliding_window=False)


FIXTURES = {
    "qwen3_tiny": qwen3_tiny,
}

INPUT_IDS = [[3, 77, 15, 120, 64, 9, 101, 42, 0, 88, 31, 127], [5, 5, 60, 19, 111, 2, 73, 48, 96, 24, 7, 54]]


def build(name):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    config = FIXTURES[name]()
    config._attn_implementation = "eager"
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight") or "layernorm" in pname:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
    model.eval()
    out = os.path.join(OUT, name)
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    gen = os.path.join(out, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor(INPUT_IDS, dtype=torch.long)).logits.float()
    expected = {"transformers": transformers.__version__, "input_ids": INPUT_IDS, "logits": logits.tolist()}
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f)
    print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters, logits {tuple(logits.shape)} -> {out}")


def main():
    names = sys.argv[1:] or list(FIXTURES)
    unknown = [n for n in names if n not in FIXTURES]
    if unknown:
        print(f"unknown fixtures {unknown}; known: {list(FIXTURES)}", file=sys.stderr)
        return 2
    for n in names:
        build(n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
