-- Building block of every LoRA preset (names starting with '_' are not listed by `recipe list`):
-- NeMo-like fine-tuning defaults — a fine-tune of a loaded base, adapters without dropout, lr 1e-4
-- with 50 warm-up steps and cosine decay to 1e-5. The presets built on it set the rank, alpha,
-- target modules and run length.
return {
  mode = "finetune",
  peft = {
    kind = "lora",
    dropout = 0.0,
  },
  optimizer = {
    lr = 1e-4,
    min_lr = 1e-5,
  },
  schedule = {
    warmup_steps = 50,
    decay_style = "cosine",
  },
}
