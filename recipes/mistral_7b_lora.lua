-- LoRA fine-tuning of Mistral 7B v0.3 on one GPU: rank-16 adapters on the attention projections,
-- the base frozen in bf16, 32 sequences per step. For a real run:
--   recipe finetune mistral_7b_lora checkpoint.load=ckpt/mistral7b data.kind=sft data.path=data/chat
return preset "mistral_7b" (preset "_llama3_lora") {
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
    name = "mistral_7b_lora",
  },
}
