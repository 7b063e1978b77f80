-- Qwen3-0.6B (0.6B parameters with its tied 151936 × 1024 embedding) on one node of 8 GPUs, data
-- parallel: 28 layers of width 1024, 16 query heads sharing 8 KV heads, each 128 wide (so the
-- attention is 2048 wide, twice the model width), SwiGLU 3072; 256 sequences of 4096 tokens (1M
-- tokens) per step.
--   recipe pretrain qwen3_0_6b data.kind=indexed data.path=/data/my_text_document
return preset "_qwen3_base" {
  model = {
    num_layers = 28,
    hidden_size = 1024,
    num_attention_heads = 16,
    num_kv_heads = 8,
    ffn_hidden_size = 3072,
    tie_embeddings = true,
  },
  optimizer = {
    lr = 3e-4,
    min_lr = 3e-5,
  },
  trainer = {
    max_steps = 100000,
    micro_batch_size = 4,
    global_batch_size = 256,
  },
  executor = {
    nodes = 1,
    gpus_per_node = 8,
  },
  experiment = {
    name = "qwen3_0_6b",
  },
}
