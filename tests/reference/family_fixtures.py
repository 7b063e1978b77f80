#!/usr/bin/env python3
"""Writes the tiny Hugging Face models of tests/data/hf_families/<name>/ and transformers' logits on
them: the fixtures tests/hf/family_fixture.cpp imports through the engine's HF import path and
checks logit by logit against transformers.

Not run in CI (CI has no torch/transformers). Needs: pip install torch transformers safetensors

    python3 tests/reference/family_fixtures.py            # every fixture
    python3 tests/reference/family_fixtures.py llama31_tiny mistral_tiny

Each fixture: FIXTURES[name]() returns a transformers config; the model is built with
torch.manual_seed(0) in float32, weights normal(0, initializer_range) with norm weights 1 + N(0, 0.1)
(so a norm weight the engine dropped would show), saved with save_pretrained(safe_serialization)
as config.json + model.safetensors, and expected.json holds {"transformers": version, "input_ids":
[[...], ...], "logits": [[[vocab floats] per position] per row]} from model(input_ids).logits in
float32 with eager attention (the plain softmax(QK^T/sqrt(d))V the engine computes).
"""
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.normpath(os.path.join(HERE, "..", "data", "hf_families"))

# The shared tiny shape (tests/fixture_convention): vocab 128, hidden 64, 2 layers, 4 heads, 2 kv heads.
TINY = dict(vocab_size=128, hidden_size=64, intermediate_size=112, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, initializer_range=0.15, bos_token_id=1, eos_token_id=2)


def llama31_tiny():
    # Llama 3.1's "llama3" RoPE scaling at a head dim of 16 where it changes the table: with θ = 10000
    # the 8 pair wavelengths are 6.3, 19.9, 63, 199, ... positions; original_max_position_embeddings
    # 32 with high_freq_factor 4 / low_freq_factor 1 keeps pair 0 (wavelength < 8), blends pair 1
    # (8..32) and divides pairs 2-7 by factor 8, so all three branches of the rule are taken.
    from transformers import LlamaConfig
    return LlamaConfig(**TINY, max_position_embeddings=128, rms_norm_eps=1e-5, tie_word_embeddings=False,
                       rope_parameters=dict(rope_type="llama3", rope_theta=10000.0, factor=8.0, low_freq_factor=1.0,
                                            high_freq_factor=4.0, original_max_position_embeddings=32))


def llama32_tiny_tied():
    # Llama 3.2 1B/3B: tied embeddings (no lm_head tensor) and llama3 scaling with factor 32.
    from transformers import LlamaConfig
    return LlamaConfig(**TINY, max_position_embeddings=128, rms_norm_eps=1e-5, tie_word_embeddings=True,
                       rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=32.0,
                                            low_freq_factor=1.0, high_freq_factor=4.0,
                                            original_max_position_embeddings=32))


def mistral_tiny():
    # Mistral 7B v0.3's form: MistralForCausalLM, θ = 1e6, untied. sliding_window equals
    # max_position_embeddings: transformers builds its sliding-window mask, which hides no key at
    # any position below max positions, so the engine's full causal attention must agree.
    from transformers import MistralConfig
    return MistralConfig(**TINY, max_position_embeddings=64, sliding_window=64, rms_norm_eps=1e-5,
                         tie_word_embeddings=False, rope_parameters=dict(rope_type="default", rope_theta=1000000.0))


def smollm2_tiny():
    # SmolLM2's form (a LlamaForCausalLM): tied embeddings, θ = 100000, rms eps 1e-5, no scaling.
    from transformers import LlamaConfig
    return LlamaConfig(**TINY, max_position_embeddings=64, rms_norm_eps=1e-5, tie_word_embeddings=True,
                       rope_parameters=dict(rope_type="default", rope_theta=100000.0))


FIXTURES = {
    "llama31_tiny": llama31_tiny,
    "llama32_tiny_tied": llama32_tiny_tied,
    "mistral_tiny": mistral_tiny,
    "smollm2_tiny": smollm2_tiny,
}

INPUT_IDS = [[1, 17, 93, 5, 64, 127, 33, 8, 71, 2, 45, 100], [1, 3, 3, 120, 58, 9, 77, 31, 64, 12, 90, 6]]


def build(name):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    config = FIXTURES[name]()
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="eager")
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "norm" in pname:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0.0, config.initializer_range)
    model.eval()
    out = os.path.join(OUT, name)
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out, safe_serialization=True)
    gen = os.path.join(out, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    ids = torch.tensor(INPUT_IDS, dtype=torch.long)
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float()
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"transformers": transformers.__version__, "input_ids": INPUT_IDS,
                   "logits": [[[float(x) for x in pos] for pos in row] for row in logits.tolist()]}, f)
    print(f"wrote {out}: logits |max| {logits.abs().max().item():.3f}, "
          f"std over positions {logits.std(dim=1).mean().item():.3f}")


def main(argv):
    names = argv or list(FIXTURES)
    for n in names:
        if n not in FIXTURES:
            sys.exit(f"unknown fixture {n}; known: {', '.join(FIXTURES)}")
        build(n)


if __name__ == "__main__":
    main(sys.argv[1:])
