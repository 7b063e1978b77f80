-- The LoRA fine-tuning settings shared by the llama3_*_lora presets: rank-16 adapters (alpha 32, no
-- adapter dropout, as NeMo's LoRA defaults), base weights frozen, a short low-lr schedule, and the
-- base model loaded from checkpoint.load (left for the user). Each preset adds its base model,
-- target modules and layout.
return {
  mode = "finetune",
  peft = {
    kind = "lora",
    rank = 16,
    alpha = 32.0,
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
  trainer = {
    max_steps = 1000,
  },
  checkpoint = {
    load = "",  -- the base model: a checkpoint dir, a run dir, or an imported HF checkpoint
  },
}
