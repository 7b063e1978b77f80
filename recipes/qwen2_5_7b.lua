-- Qwen2.5 7B (7.62B parameters, untied output layer) on one node of 8 GPUs: tensor parallel 4 ×
-- data parallel 2, 256 sequences of 4096 tokens (1M tokens) per step. config.json: hidden 3584,
-- 28 layers, 28 heads, 4 KV heads, intermediate 18944, vocabulary 152064, tie_word_embeddings false.
--   recipe pretrain qwen2_5_7b data.kind=indexed data.path=/data/my_text_document
return preset "_qwen2_base" {
  model = {
    num_layers = 28,
    hidden_size = 3584,
    num_attention_heads = 28,
    num_kv_heads = 4,
    ffn_hidden_size = 18944,
    vocab_size = 152064,
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
    name = "qwen2_5_7b",
  },
}
