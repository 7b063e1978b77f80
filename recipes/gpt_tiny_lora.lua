-- gpt_tiny with LoRA adapters on every linear and a frozen base (CPU, seconds):
--   recipe finetune gpt_tiny_lora checkpoint.load=experiments/gpt_tiny/<run>
return preset "gpt_tiny" (preset "_tiny_lora") {
  experiment = {
    name = "gpt_tiny_lora",
  },
}
