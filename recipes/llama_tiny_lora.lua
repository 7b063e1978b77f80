-- llama_tiny with LoRA adapters on every linear (q|k|v, o, gate|up, down) and a frozen base (CPU):
--   recipe finetune llama_tiny_lora checkpoint.load=experiments/llama_tiny/<run>
return preset "llama_tiny" (preset "_tiny_lora") {
  experiment = {
    name = "llama_tiny_lora",
  },
}
