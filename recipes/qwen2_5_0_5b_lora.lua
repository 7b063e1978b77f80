-- LoRA fine-tuning of Qwen2.5 0.5B on one GPU: rank-16 adapters on the attention projections (the
-- q/k/v biases stay frozen with the base), 32 sequences per step. It resolves as is (mock data,
-- random base weights) so it can be validated anywhere; for a real run import the base and give
-- it your data:
--   recipe ckpt import ~/models/Qwen2.5-0.5B-Instruct -o ckpt/qwen2_5_0_5b --recipe qwen2_5_0_5b
--   recipe finetune qwen2_5_0_5b_lora checkpoint.load=ckpt/qwen2_5_0_5b data.kind=sft data.path=data/chat
return preset "qwen2_5_0_5b" (preset "_qwen2_lora") {
  peft = {
    target_modules = { "qkv", "proj" },
  },
  trainer = {
    micro_batch_size = 1,
    global_batch_size = 32,
  },
  executor = {
    gpus_per_node = 1,
  },
  experiment = {
    name = "qwen2_5_0_5b_lora",
  },
}
