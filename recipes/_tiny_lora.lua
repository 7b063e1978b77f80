-- The LoRA settings of the tiny CPU presets (gpt_tiny_lora, llama_tiny_lora), NeMo-like: rank-8
-- adapters (alpha 16, scale 2) on every linear, no adapter dropout, lr 1e-4 with 50 warmup steps
-- and cosine decay. The base comes from checkpoint.load (a gpt_tiny / llama_tiny run); without
-- one it is a random base, which is still a valid smoke test of the whole LoRA path.
return {
  mode = "finetune",
  peft = {
    kind = "lora",
    rank = 8,
    alpha = 16.0,
    dropout = 0.0,
    target_modules = { "qkv", "proj", "fc1", "fc2" },
  },
  optimizer = {
    lr = 1e-4,
    min_lr = 1e-5,
  },
  schedule = {
    warmup_steps = 50,
    decay_style = "cosine",
  },
  trainer = {
    max_steps = 200,
  },
}
