-- Llama 3 8B (8.03B parameters) on one node of 8 GPUs: tensor parallel 4 × data parallel 2,
-- 128 sequences of 8192 tokens (1M tokens) per step.
--   recipe pretrain llama3_8b data.kind=indexed data.path=/data/my_text_document
return preset "_llama3_base" {
  model = {
    num_layers = 32,
    hidden_size = 4096,
    num_attention_heads = 32,
    num_kv_heads = 8,
    ffn_hidden_size = 14336,
  },
  optimizer = {
    lr = 3e-4,
    min_lr = 3e-5,
  },
  trainer = {
    max_steps = 100000,
    micro_batch_size = 1,
    global_batch_size = 128,
  },
  parallelism = {
    tp = 4,
  },
  executor = {
    nodes = 1,
    gpus_per_node = 8,
  },
  experiment = {
    name = "llama3_8b",
  },
}
