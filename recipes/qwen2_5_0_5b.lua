-- Qwen2.5 0.5B (494M parameters, tied embeddings) on one node of 8 GPUs: data parallel 8,
-- 256 sequences of 4096 tokens (1M tokens) per step. config.json: hidden 896, 24 layers, 14 heads,
-- 2 KV heads, intermediate 4864, vocabulary 151936, tie_word_embeddings true.
--   recipe pretrain qwen2_5_0_5b data.kind=indexed data.path=/data/my_text_document
return preset "_qwen2_base" {
  model = {
    num_layers = 24,
    hidden_size = 896,
    num_attention_heads = 14,
    num_kv_heads = 2,
    ffn_hidden_size = 4864,
    vocab_size = 151936,
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
    name = "qwen2_5_0_5b",
  },
}
