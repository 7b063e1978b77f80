-- LoRA finetuning of Qwen3-0.6B on one GPU: rank-16 adapters on every linear (q|k|v, o, gate|up,
-- down), the base frozen in bf16, 32 sequences per step. It resolves as is (mock data, random base
-- weights) so it can be validated anywhere; for a real run give it the base and your data:
--   recipe ckpt import ~/models/Qwen3-0.6B -o ckpt/qwen3_0_6b
--   recipe finetune qwen3_0_6b_lora checkpoint.load=ckpt/qwen3_0_6b data.kind=sft data.path=data/chat
return preset "qwen3_0_6b" (preset "_qwen3_lora") {
  peft = {
    target_modules = { "qkv", "proj", "fc1", "fc2" },
  },
  trainer = {
    micro_batch_size = 4,
    global_batch_size = 32,
  },
  executor = {
    gpus_per_node = 1,
  },
  experiment = {
    name = "qwen3_0_6b_lora",
  },
}
