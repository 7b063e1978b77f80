-- Llama 3.2 3B (meta-llama/Llama-3.2-3B, 3.21B parameters, tied embeddings) on one node of 8 GPUs:
-- tensor parallel 2 × data parallel 4, 64 sequences of 8192 tokens per step.
--   recipe ckpt import ~/models/Llama-3.2-3B -o ckpt/llama32_3b --recipe llama3_2_3b
return preset "_llama3_base" (preset "_llama32") {
  model = {
    num_layers = 28,
    hidden_size = 3072,
    num_attention_heads = 24,
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
    global_batch_size = 64,
  },
  parallelism = {
    tp = 2,
  },
  executor = {
    nodes = 1,
    gpus_per_node = 8,
  },
  experiment = {
    name = "llama3_2_3b",
  },
}
