-- LoRA finetuning of Qwen3-8B on one GPU: rank-16 adapters on the attention projections, the base
-- frozen in bf16 (16 GB, no gradients, master or Adam state), 32 sequences per step. It resolves as
-- is (mock data, random base weights) so it can be validated anywhere; for a real run give it the
-- base checkpoint and your data:
--   recipe ckpt import ~/models/Qwen3-8B -o ckpt/qwen3_8b
--   recipe finetune qwen3_8b_lora checkpoint.load=ckpt/qwen3_8b data.kind=sft data.path=data/chat
return preset "qwen3_8b" (preset "_qwen3_lora") {
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
    name = "qwen3_8b_lora",
  },
}
