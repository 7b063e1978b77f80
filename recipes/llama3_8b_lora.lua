-- LoRA finetuning of Llama 3 8B on one GPU: rank-16 adapters on the attention projections, the
-- base frozen in bf16 (16 GB, no gradients, master or Adam state), 32 sequences per step. It
-- resolves as is (mock data, random base weights) so it can be validated anywhere; for a real run
-- give it the base checkpoint and your data:
--   recipe finetune llama3_8b_lora checkpoint.load=/ckpt/llama3_8b data.kind=indexed data.path=/data/chat_text_document
return preset "llama3_8b" (preset "_llama3_lora") {
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
    name = "llama3_8b_lora",
  },
}
