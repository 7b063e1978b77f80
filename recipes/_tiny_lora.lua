-- The LoRA settings of the tiny CPU presets (gpt_tiny_lora, llama_tiny_lora), on the shared LoRA
-- defaults (_lora): rank-8 adapters (alpha 16, scale 2) on every linear. The base comes from
-- checkpoint.load (a gpt_tiny / llama_tiny run); checkpoint.allow_random_init=true instead gives a
-- random base, which is still a valid smoke test of the whole LoRA path.
return preset "_lora" {
  peft = {
    rank = 8,
    alpha = 16.0,
    target_modules = { "qkv", "proj", "fc1", "fc2" },
  },
  trainer = {
    max_steps = 200,
  },
}
