-- Llama 3 70B (70.6B parameters) on 8 nodes of 8 GPUs (as Megatron-Bridge's 70B recipes use 64 GPUs):
-- tensor parallel 8 within a node, pipeline parallel 4 across nodes, data parallel 2, full activation
-- recompute and a distributed optimizer (ZeRO-1 shards the Adam moments over the 2 DP ranks);
-- 512 sequences of 8192 tokens (4M tokens) per step.
--   recipe validate llama3_70b
return preset "_llama3_base" {
  model = {
    num_layers = 80,
    hidden_size = 8192,
    num_attention_heads = 64,
    num_kv_heads = 8,
    ffn_hidden_size = 28672,
  },
  optimizer = {
    lr = 1.5e-4,
    min_lr = 1.5e-5,
  },
  trainer = {
    max_steps = 100000,
    micro_batch_size = 1,
    global_batch_size = 512,
    recompute = "full",
  },
  parallelism = {
    tp = 8,
    pp = 4,
    zero1 = true,
  },
  executor = {
    kind = "slurm",  -- 8 nodes: the local executor runs on one host only
    nodes = 8,
    gpus_per_node = 8,
  },
  experiment = {
    name = "llama3_70b",
  },
}
