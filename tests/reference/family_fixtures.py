#!/usr/bin/env python3
"""Tiny Hugging Face models of each family the engine imports, with transformers' logits on them.

Writes tests/data/hf_families/<name>/ (config.json, model.safetensors, expected.json) for every
fixture named (all without arguments); the CI test tests/hf/family_fixture.cpp imports each one
through the engine's HF import (`recipe ckpt import`'s code), runs it on the CPU in f32 and checks
every logit against expected.json. Run it only where torch and transformers are installed (not a
product or CI dependency):

    /work/venv-ref/bin/python tests/reference/family_fixtures.py [name ...]

--check-export DIR NAME loads an engine export of fixture NAME (the C++ test "import → export"
leaves DIR/NAME when RECIPE_HF_CHECK_DIR=DIR is set) with AutoModelForCausalLM and checks that its
logits on expected.json's rows equal the fixture's own (the weights round-trip bitwise, so they
must agree to f32 rounding of the same computation):

    RECIPE_HF_CHECK_DIR=/tmp/hffam build/tests/recipe_tests -ts=hf -tc='qwen2: import*'
    /work/venv-ref/bin/python tests/reference/family_fixtures.py --check-export /tmp/hffam qwen2_tiny

Each model is built with torch.manual_seed(0) in float32 with random weights (normal with std
INIT, norm weights around 1, biases random too) so that a missed tensor, norm weight or bias shows
in the logits. expected.json: {"transformers": version, "input_ids": [[...], ...],
"logits": [[[f32 × vocab] per position] per row]} from model(input_ids).logits in float32 with
eager attention (the plain softmax(QKᵀ/√d)V the engine computes).
"""
import json
import os
import sys

import torch
import transformers

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "hf_families")
INIT = 0.15  # initializer_range: large enough that logits differ clearly between positions
INPUT_IDS = [[3, 17, 100, 5, 64, 127, 9, 42, 42, 0, 88, 31], [120, 7, 7, 56, 2, 99, 14, 73, 1, 110, 36, 60]]


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


def qwen2(tied):
    return transformers.Qwen2Config(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
        tie_word_embeddings=tied,
        use_sliding_window=False,
        initializer_range=INIT,
    )


def qwen3_tiny():
    # Qwen3 with qk-norm and a head_dim of its own: 4 heads of 24 (not hidden 64 / 4 = 16), 2 KV heads.
    return transformers.Qwen3Config(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=24,
                                    max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=10000.0,
                                    tie_word_embeddings=False, initializer_range=INIT, attention_bias=False,
                                    use_sliding_window=False)


FIXTURES = {
    "llama31_tiny": llama31_tiny,
    "llama32_tiny_tied": llama32_tiny_tied,
    "mistral_tiny": mistral_tiny,
    "smollm2_tiny": smollm2_tiny,
    # Qwen2 / Qwen2.5: biases on q, k, v only (randomised, so dropping them shows); untied as 7B.
    "qwen2_tiny": lambda: qwen2(tied=False),
    # ... tied as Qwen2.5 0.5B / 1.5B.
    "qwen2_tiny_tied": lambda: qwen2(tied=True),
    # Qwen3 dense: per-head q/k RMSNorm (randomised like every norm weight), head_dim ≠ hidden / heads.
    "qwen3_tiny": qwen3_tiny,
}


def randomise(model):
    """Every parameter random: weights normal(0, INIT), norm weights 1 + normal(0, 0.1), biases
    normal(0, INIT) (transformers initialises biases and norms to constants, which would hide them)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(INIT * torch.randn_like(p))


def build(name):
    torch.manual_seed(0)
    config = FIXTURES[name]()
    config._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    model.eval()
    randomise(model)
    if config.tie_word_embeddings:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    out = os.path.join(OUT, name)
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    gen = os.path.join(out, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    ids = torch.tensor(INPUT_IDS, dtype=torch.long)
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float()
    expected = {
        "transformers": transformers.__version__,
        "input_ids": INPUT_IDS,
        "logits": [[[float(x) for x in pos] for pos in row] for row in logits.tolist()],
    }
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, separators=(",", ":"))
    spread = (logits - logits.mean(dim=-1, keepdim=True)).abs().max().item()
    print("%s: %s, logits in [%.3f, %.3f] (max |logit - row mean| %.3f)" %
          (name, out, logits.min().item(), logits.max().item(), spread))


def check_export(root, name):
    directory = os.path.join(root, name)
    with open(os.path.join(OUT, name, "expected.json")) as f:
        expected = json.load(f)
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32,
                                                              attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor(expected["input_ids"], dtype=torch.long)).logits.float()
    want = torch.tensor(expected["logits"], dtype=torch.float32)
    diff = (logits - want).abs().max().item()
    print("%s: %s loads as %s; max |logit - fixture's| %.3g" % (name, directory, type(model).__name__, diff))
    return diff <= 1e-5


def main(names):
    if names[:1] == ["--check-export"]:
        if len(names) < 3:
            sys.exit("usage: family_fixtures.py --check-export DIR NAME [NAME ...]")
        ok = all([check_export(names[1], n) for n in names[2:]])
        sys.exit(0 if ok else 1)
    for name in names or sorted(FIXTURES):
        if name not in FIXTURES:
            sys.exit("unknown fixture %s; known: %s" % (name, ", ".join(sorted(FIXTURES))))
        build(name)


if __name__ == "__main__":
    main(sys.argv[1:])
