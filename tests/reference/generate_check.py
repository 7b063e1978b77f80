#!/usr/bin/env python3
"""Check `recipe generate` against Hugging Face transformers: the same greedy continuation.

For each tiny preset (gpt_tiny: GPT-2 layout, learned positions; llama_tiny: RoPE, GQA, SwiGLU):
  1. `recipe pretrain <preset> --device cpu --max-steps N` (a few steps, so the logits are not flat),
  2. `recipe ckpt export <run> --format hf` (f32),
  3. ours: `recipe generate <run> --prompt P --tokenizer byte` (prefill + KV-cache decode, greedy),
  4. transformers: AutoModelForCausalLM.from_pretrained(export).generate(prompt ids, do_sample=False)
     with the byte tokenizer's ids (byte b is id b; id 0 ends a document and stops both),
and compares the new token ids. The byte tokenizer makes text and ids the same thing, so the
generated ids are the bytes `recipe generate` prints.

Not run in CI (CI has no torch/transformers). Needs: pip install torch transformers safetensors

    python3 tests/reference/generate_check.py --recipe build/bin/recipe
Exit status 0 when every preset's ids agree.
"""
import argparse
import os
import subprocess
import sys
import tempfile


def run(cmd):
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        sys.stderr.write(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr.decode(errors='replace')}\n")
        sys.exit(3)
    return r


def check(recipe, preset, steps, prompt, max_new, work):
    import torch
    from transformers import AutoModelForCausalLM

    experiments = os.path.join(work, "experiments")
    run([recipe, "pretrain", preset, "--device", "cpu", "--max-steps", str(steps), "--experiments-dir", experiments,
         "--name", preset])
    runs = sorted(os.listdir(os.path.join(experiments, preset)))
    run_dir = os.path.join(experiments, preset, runs[-1])
    hf_dir = os.path.join(work, f"hf-{preset}")
    run([recipe, "ckpt", "export", run_dir, "-o", hf_dir, "--format", "hf", "--dtype", "f32"])

    ours = run([recipe, "generate", run_dir, "--prompt", prompt, "--max-new-tokens", str(max_new), "--tokenizer",
                "byte", "--device", "cpu"])
    out = ours.stdout
    assert out.endswith(b"\n"), "recipe generate ends its text with a newline"
    ours_ids = list(out[:-1])

    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    prompt_ids = list(prompt.encode("utf-8"))
    with torch.no_grad():
        seq = model.generate(torch.tensor([prompt_ids]), max_new_tokens=max_new, do_sample=False, eos_token_id=0,
                             pad_token_id=0, attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long))
    hf_ids = seq[0, len(prompt_ids):].tolist()
    if 0 in hf_ids:  # the end of document: ours stops before it and prints nothing for it
        hf_ids = hf_ids[:hf_ids.index(0)]
    ok = ours_ids == hf_ids
    print(f"{preset}: prompt {len(prompt_ids)} ids, {len(hf_ids)} new; recipe {ours_ids[:12]}{'...' if len(ours_ids) > 12 else ''}"
          f" transformers {hf_ids[:12]}{'...' if len(hf_ids) > 12 else ''} -> {'MATCH' if ok else 'MISMATCH'}")
    if not ok:
        first = next((i for i, (a, b) in enumerate(zip(ours_ids, hf_ids)) if a != b), min(len(ours_ids), len(hf_ids)))
        print(f"  first difference at new token {first}: recipe {ours_ids[first:first + 5]}, "
              f"transformers {hf_ids[first:first + 5]}")
    print(f"  recipe: {ours.stderr.decode(errors='replace').strip().splitlines()[-1]}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe", default="build/bin/recipe", help="the recipe binary")
    parser.add_argument("--presets", nargs="+", default=["gpt_tiny", "llama_tiny"])
    parser.add_argument("--steps", type=int, default=40, help="pretraining steps before generating")
    parser.add_argument("--prompt", default="The quick brown fox ")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--work", help="working directory (default: a temporary one)")
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"generate_check.py needs torch and transformers ({e}): pip install torch transformers safetensors",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or tmp
        results = [check(args.recipe, p, args.steps, args.prompt, args.max_new_tokens, work) for p in args.presets]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
