-- LoRA finetuning of Llama 3 70B on one node of 8 GPUs: rank-16 adapters (alpha 32) on the
-- attention and MLP projections, the base frozen in bf16 and split tensor-parallel 8 ways (141 GB,
-- 17.6 GB per GPU; no gradients, master or Adam state for it), adapters sharded with their base
-- (NeMo's layout), full activation recompute, 32 sequences of 8192 tokens per step as 32
-- micro-batches. With checkpoint.allow_random_init=true it resolves on mock data and random base
-- weights; for a real run give it the base checkpoint and your data:
--   recipe finetune llama3_70b_lora checkpoint.load=/ckpt/llama3_70b data.kind=sft data.path=data/chat
--   recipe validate llama3_70b_lora --nodes 1 --gpus-per-node 8
return preset "llama3_70b" (preset "_llama3_lora") {
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
    kind = "local",  -- one node (llama3_70b's 8 nodes use slurm)
    nodes = 1,
    gpus_per_node = 8,
  },
  experiment = {
    name = "llama3_70b_lora",
  },
}
