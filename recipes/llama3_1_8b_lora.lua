-- LoRA fine-tuning of Llama 3.1 8B on one GPU (llama3_8b_lora's settings on llama3_1_8b): rank-16
-- adapters on the attention projections, the base frozen in bf16. For a real run:
--   recipe finetune llama3_1_8b_lora checkpoint.load=ckpt/llama31 data.kind=sft data.path=data/chat
return preset "llama3_1_8b" (preset "_llama3_lora") {
  peft = {
    target_modules = { "qkv", "proj" },
  },
  trainer = {
    global_batch_size = 32,
  },
  parallelism = {
    tp = 1,
  },
  executor = {
    gpus_per_node = 1,
  },
  experiment = {
    name = "llama3_1_8b_lora",
  },
}
