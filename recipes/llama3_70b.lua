-- Llama 3 70B (70.6B parameters) on 4 nodes of 8 GPUs: tensor parallel 8 within a node, pipeline
-- parallel 4 across nodes, full activation recompute and a distributed optimizer (ZeRO-1);
-- 512 sequences of 8192 tokens (4M tokens) per step.
--   recipe validate llama3_70b --nodes 4 --gpus-per-node 8
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
    nodes = 4,
    gpus_per_node = 8,
  },
  experiment = {
    name = "llama3_70b",
  },
}
