-- LoRA fine-tuning of Llama 3.3 70B on one node of 8 GPUs (llama3_70b_lora's settings on
-- llama3_3_70b): rank-16 adapters on every linear, the base frozen in bf16 and split 8 ways.
--   recipe finetune llama3_3_70b_lora checkpoint.load=ckpt/llama33_70b data.kind=sft data.path=data/chat
return preset "llama3_3_70b" (preset "_llama3_lora") {
  peft = {
    target_modules = { "qkv", "proj", "fc1", "fc2" },
  },
  trainer = {
    global_batch_size = 32,
  },
  parallelism = {
    tp = 8,
    pp = 1,
    zero1 = false,
  },
  executor = {
    kind = "local",  -- one node (llama3_3_70b's 8 nodes use slurm)
    nodes = 1,
    gpus_per_node = 8,
  },
  experiment = {
    name = "llama3_3_70b_lora",
  },
}
