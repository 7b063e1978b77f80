-- Llama 3.2 1B (meta-llama/Llama-3.2-1B, 1.24B parameters, tied embeddings) on one GPU:
-- 16 sequences of 8192 tokens per step as 16 micro-batches.
--   recipe ckpt import ~/models/Llama-3.2-1B -o ckpt/llama32_1b --recipe llama3_2_1b
return preset "_llama3_base" (preset "_llama32") {
  model = {
    num_layers = 16,
    hidden_size = 2048,
    num_attention_heads = 32,
    num_kv_heads = 8,
    ffn_hidden_size = 8192,
  },
  optimizer = {
    lr = 3e-4,
    min_lr = 3e-5,
  },
  trainer = {
    max_steps = 100000,
    micro_batch_size = 1,
    global_batch_size = 16,
  },
  executor = {
    nodes = 1,
    gpus_per_node = 1,
  },
  experiment = {
    name = "llama3_2_1b",
  },
}
