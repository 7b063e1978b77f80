-- Qwen3-8B (8.2B parameters) on one node of 8 GPUs: tensor parallel 4 × data parallel 2; 36 layers
-- of width 4096, 32 query heads sharing 8 KV heads of 128, SwiGLU 12288, untied output layer;
-- 256 sequences of 4096 tokens (1M tokens) per step.
--   recipe pretrain qwen3_8b data.kind=indexed data.path=/data/my_text_document
return preset "_qwen3_base" {
  model = {
    num_layers = 36,
    hidden_size = 4096,
    num_attention_heads = 32,
    num_kv_heads = 8,
    ffn_hidden_size = 12288,
    tie_embeddings = false,
  },
  optimizer = {
    lr = 3e-4,
    min_lr = 3e-5,
  },
  trainer = {
    max_steps = 100000,
    micro_batch_size = 1,
    global_batch_size = 256,
  },
  parallelism = {
    tp = 4,
  },
  executor = {
    nodes = 1,
    gpus_per_node = 8,
  },
  experiment = {
    name = "qwen3_8b",
  },
}
