-- LoRA finetuning of Llama 3 8B: rank-16 adapters on the attention projections, base weights
-- frozen. It resolves as is (mock data, random base weights) so it can be validated anywhere; for
-- a real run give it the base checkpoint and your data:
--   recipe finetune llama3_8b_lora checkpoint.load=/ckpt/llama3_8b data.kind=indexed data.path=/data/chat_text_document
return preset "llama3_8b" (preset "_llama3_lora") {
  peft = {
    target_modules = { "qkv", "proj" },
  },
  experiment = {
    name = "llama3_8b_lora",
  },
}
