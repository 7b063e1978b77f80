#!/usr/bin/env python3
"""Writes tests/data/rope/llama3_inv_freq.json: transformers' RoPE inverse frequencies with Llama 3.1's
"llama3" scaling (transformers.modeling_rope_utils._compute_llama3_parameters, float32) for the
shapes the engine's presets and fixtures use. tests/family/test_rope.cpp compares family/rope.cpp's
float64 table with them.

Not run in CI (CI has no torch/transformers). Needs: pip install torch transformers

    python3 tests/reference/rope_llama3_ref.py
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.normpath(os.path.join(HERE, "..", "data", "rope", "llama3_inv_freq.json"))

# (what, theta, head_dim, factor, low_freq_factor, high_freq_factor, original_max_position_embeddings,
#  max_position_embeddings)
CASES = [
    ("Llama 3.1 8B / 70B, Llama 3.3 70B", 500000.0, 128, 8.0, 1.0, 4.0, 8192, 131072),
    ("Llama 3.2 3B", 500000.0, 128, 32.0, 1.0, 4.0, 8192, 131072),
    ("Llama 3.2 1B", 500000.0, 64, 32.0, 1.0, 4.0, 8192, 131072),
    ("llama31_tiny fixture", 10000.0, 16, 8.0, 1.0, 4.0, 32, 128),
    ("llama32_tiny_tied fixture", 500000.0, 16, 32.0, 1.0, 4.0, 32, 128),
    ("odd factors", 10000.0, 64, 3.5, 0.5, 7.0, 1000, 4096),
]


def main():
    import transformers
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    out = {"transformers": transformers.__version__, "cases": []}
    for what, theta, dim, factor, low, high, orig, maxpos in CASES:
        config = LlamaConfig(hidden_size=dim * 4, num_attention_heads=4, head_dim=dim, max_position_embeddings=maxpos,
                             rope_parameters=dict(rope_type="llama3", rope_theta=theta, factor=factor,
                                                  low_freq_factor=low, high_freq_factor=high,
                                                  original_max_position_embeddings=orig))
        inv_freq, _ = ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
        out["cases"].append({"what": what, "theta": theta, "head_dim": dim, "factor": factor, "low_freq_factor": low,
                             "high_freq_factor": high, "original_max_positions": orig,
                             # float32 values written exactly (a float32 is a double)
                             "inv_freq": [float(x) for x in inv_freq.tolist()]})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
