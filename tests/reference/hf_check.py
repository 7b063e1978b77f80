#!/usr/bin/env python3
"""Load a `recipe ckpt export --format hf` directory with Hugging Face transformers and compare its
loss on a token batch with the loss the engine computed on the same batch.

Not run in CI (CI has no torch/transformers). Needs: pip install torch transformers safetensors

The core tests leave ready-made directories when RECIPE_HF_CHECK_DIR is set (an f32 export of a
gpt_tiny / llama_tiny checkpoint trained 3 steps, plus batch.json: the token rows of a batch and the
engine's mean loss on it):

    RECIPE_HF_CHECK_DIR=/tmp/hfcheck build/tests/recipe_tests -ts=hf -tc='*exports as*'
    python3 tests/reference/hf_check.py /tmp/hfcheck/gpt2 /tmp/hfcheck/llama

Any export works with a batch.json of your own: {"tokens": [[t0, ..., tT], ...], "loss": <engine
mean loss>}, each row T+1 ids (inputs are t0..t(T-1), targets t1..tT, as the engine reads samples).
Exit status 0 when every directory's loss agrees within --tolerance (relative).
"""
import argparse
import json
import math
import sys


def check(directory, tolerance):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with open(f"{directory}/batch.json") as f:
        batch = json.load(f)
    config = AutoConfig.from_pretrained(directory)
    # eager attention: the plain softmax(QKᵀ/√d)V the engine computes, in f32
    model = AutoModelForCausalLM.from_pretrained(directory, torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    rows = torch.tensor(batch["tokens"], dtype=torch.long)
    inputs, targets = rows[:, :-1], rows[:, 1:]
    with torch.no_grad():
        logits = model(input_ids=inputs).logits.float()
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).item()
    engine = float(batch["loss"])
    rel = abs(loss - engine) / max(abs(engine), 1e-12)
    ok = math.isfinite(loss) and rel <= tolerance
    print(f"{directory}: {config.model_type} ({type(model).__name__}), transformers loss {loss:.6f}, "
          f"engine loss {engine:.6f}, relative difference {rel:.2e} {'OK' if ok else 'MISMATCH'}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="+", help="export directories, each with batch.json")
    parser.add_argument("--tolerance", type=float, default=1e-4, help="relative loss difference allowed")
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"hf_check.py needs torch and transformers ({e}): pip install torch transformers safetensors",
              file=sys.stderr)
        return 2
    results = [check(d, args.tolerance) for d in args.dirs]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
