-- The LoRA fine-tuning settings shared by the qwen3_*_lora presets: rank-16 adapters (alpha 32, no
-- adapter dropout), base weights frozen, a short low-lr schedule (_lora), and the base model loaded
-- from checkpoint.load (left for the user, e.g. a `recipe ckpt import` of the Hugging Face model).
-- Each preset adds its base model, target modules and layout.
return preset "_lora" {
  peft = {
    rank = 16,
    alpha = 32.0,
  },
  trainer = {
    max_steps = 1000,
  },
  checkpoint = {
    load = "",  -- the base model: a checkpoint dir, a run dir, or an imported HF checkpoint
  },
}
