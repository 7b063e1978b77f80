#!/usr/bin/env python3
"""Check a LoRA checkpoint's exports against Hugging Face transformers + peft.

For each directory (a LoRA checkpoint's checkpoints dir or run dir, with batch.json beside it), runs

    recipe ckpt export <ckpt> --format hf       -o <tmp>/base     (the base model)
    recipe ckpt export <ckpt> --format hf-peft  -o <tmp>/adapter  (the adapters, for PEFT)
    recipe ckpt export <ckpt> --format hf --merge -o <tmp>/merged (W + s·B·A)

loads base + adapter with PeftModel.from_pretrained and the merged model with
AutoModelForCausalLM, and compares on the token rows of batch.json:
  - the PEFT model's logits with the merged model's (max absolute difference),
  - the PEFT model's mean loss with the engine's (batch.json "loss", relative difference),
  - and the base model's logits with the PEFT model's, which must differ (the adapters change the
    model: a check that would pass with the adapters left out proves nothing).

Not run in CI (CI has no torch/transformers/peft). Needs: pip install torch transformers peft safetensors

The checkpoint tests leave ready-made directories when RECIPE_PEFT_CHECK_DIR is set (an
adapter-only LoRA checkpoint of gpt_tiny / llama_tiny whose adapters are far from their init, its
base, and batch.json: {"tokens": [[t0, ..., tT], ...], "loss": <engine mean loss>}):

    RECIPE_PEFT_CHECK_DIR=/tmp/peftcheck build/tests/recipe_tests -ts=hf -tc='*peft_check*'
    python3 tests/reference/peft_check.py --recipe build/bin/recipe /tmp/peftcheck/gpt2 /tmp/peftcheck/llama

Exit status 0 when every directory agrees within the tolerances.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile


def export(recipe, ckpt, out, *extra):
    cmd = [recipe, "ckpt", "export", ckpt, "-o", out, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")


def check(directory, recipe, logit_tol, loss_tol):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    with open(os.path.join(directory, "batch.json")) as f:
        batch = json.load(f)
    ckpt = os.path.join(directory, "checkpoints")
    if not os.path.isdir(ckpt):
        ckpt = directory
    with tempfile.TemporaryDirectory() as tmp:
        base_dir, adapter_dir, merged_dir = (os.path.join(tmp, n) for n in ("base", "adapter", "merged"))
        export(recipe, ckpt, base_dir, "--format", "hf")
        export(recipe, ckpt, adapter_dir, "--format", "hf-peft")
        export(recipe, ckpt, merged_dir, "--format", "hf", "--merge")
        with open(os.path.join(adapter_dir, "adapter_config.json")) as f:
            cfg = json.load(f)

        # eager attention: the plain softmax(QKᵀ/√d)V the engine computes, in f32
        import transformers
        major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
        dtype_key = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"  # renamed in 4.56

        def load(path):
            kwargs = {dtype_key: torch.float32, "attn_implementation": "eager"}
            return AutoModelForCausalLM.from_pretrained(path, **kwargs).eval()

        base = load(base_dir)
        rows = torch.tensor(batch["tokens"], dtype=torch.long)
        inputs, targets = rows[:, :-1], rows[:, 1:]

        def loss_of(logits):
            return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).item()

        with torch.no_grad():
            base_logits = base(input_ids=inputs).logits.float()
            peft_model = PeftModel.from_pretrained(base, adapter_dir).eval()
            adapted = sum(1 for n, _ in peft_model.named_modules() if n.endswith(".lora_A"))
            peft_logits = peft_model(input_ids=inputs).logits.float()
            merged_logits = load(merged_dir)(input_ids=inputs).logits.float()
    diff = (peft_logits - merged_logits).abs().max().item()
    peft_loss, base_loss, engine = loss_of(peft_logits), loss_of(base_logits), float(batch["loss"])
    rel = abs(peft_loss - engine) / max(abs(engine), 1e-12)
    base_diff = (peft_logits - base_logits).abs().max().item()
    ok = math.isfinite(peft_loss) and diff <= logit_tol and rel <= loss_tol and base_diff > 100 * logit_tol
    print(f"{directory}: {base.config.model_type}, PEFT r={cfg['r']} lora_alpha={cfg['lora_alpha']} "
          f"targets={cfg['target_modules']} ({adapted} adapted modules)\n"
          f"  PEFT vs merged export: max |logit difference| {diff:.2e}\n"
          f"  loss: PEFT {peft_loss:.6f}, engine {engine:.6f} (relative difference {rel:.2e}); "
          f"base without adapters {base_loss:.6f} (max |logit difference| to PEFT {base_diff:.2e})\n"
          f"  {'OK' if ok else 'MISMATCH'}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="+", help="directories with checkpoints/ (a LoRA checkpoint) and batch.json")
    parser.add_argument("--recipe", default="build/bin/recipe", help="the recipe binary")
    parser.add_argument("--logit-tolerance", type=float, default=1e-4, help="max |PEFT − merged| logit")
    parser.add_argument("--loss-tolerance", type=float, default=1e-4, help="relative PEFT vs engine loss")
    args = parser.parse_args()
    try:
        import peft  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"peft_check.py needs torch, transformers and peft ({e}): pip install torch transformers peft "
              f"safetensors", file=sys.stderr)
        return 2
    results = [check(d, args.recipe, args.logit_tolerance, args.loss_tolerance) for d in args.dirs]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
