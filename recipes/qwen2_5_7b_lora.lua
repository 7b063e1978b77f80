-- LoRA fine-tuning of Qwen2.5 7B on one GPU: rank-16 adapters on the attention projections, the
-- base frozen in bf16 (15 GB, no gradients, master or Adam state; the q/k/v biases stay frozen
-- with it), 32 sequences per step. It resolves as is (mock data, random base weights) so it can be
-- validated anywhere; for a real run import the base and give it your data:
--   recipe ckpt import ~/models/Qwen2.5-7B-Instruct -o ckpt/qwen2_5_7b --recipe qwen2_5_7b
--   recipe finetune qwen2_5_7b_lora checkpoint.load=ckpt/qwen2_5_7b data.kind=sft data.path=data/chat
return preset "qwen2_5_7b" (preset "_qwen2_lora") {
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
    name = "qwen2_5_7b_lora",
  },
}
