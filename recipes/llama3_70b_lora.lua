-- LoRA finetuning of Llama 3 70B: rank-16 adapters on the attention and MLP projections, base
-- weights frozen, on the same 4 × 8 GPU layout as llama3_70b. It resolves as is (mock data, random
-- base weights); for a real run give it the base checkpoint and your data:
--   recipe finetune llama3_70b_lora checkpoint.load=/ckpt/llama3_70b data.kind=indexed data.path=/data/chat_text_document
return preset "llama3_70b" {
  mode = "finetune",
  peft = {
    kind = "lora",
    rank = 16,
    alpha = 32.0,
    dropout = 0.05,
    target_modules = { "qkv", "proj", "fc1", "fc2" },
  },
  optimizer = {
    lr = 1e-4,
    min_lr = 1e-5,
  },
  schedule = {
    warmup_steps = 50,
  },
  trainer = {
    max_steps = 1000,
  },
  checkpoint = {
    load = "",  -- the base model: a checkpoint dir, a run dir, or an imported HF checkpoint
  },
  experiment = {
    name = "llama3_70b_lora",
  },
}
