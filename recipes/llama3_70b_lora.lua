-- LoRA finetuning of Llama 3 70B: rank-16 adapters on the attention and MLP projections, base
-- weights frozen, on the same 8 × 8 GPU layout as llama3_70b. With checkpoint.allow_random_init=true
-- it resolves on mock data and random base weights; for a real run give it the base checkpoint and
-- your data:
--   recipe finetune llama3_70b_lora checkpoint.load=/ckpt/llama3_70b data.kind=indexed data.path=/data/chat_text_document
return preset "llama3_70b" (preset "_llama3_lora") {
  peft = {
    target_modules = { "qkv", "proj", "fc1", "fc2" },
  },
  experiment = {
    name = "llama3_70b_lora",
  },
}
