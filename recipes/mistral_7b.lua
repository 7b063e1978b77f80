-- Mistral 7B v0.3 (mistralai/Mistral-7B-v0.3, 7.25B parameters): a Llama-family model read and
-- written as Hugging Face MistralForCausalLM (model.hf_architecture), RMSNorm eps 1e-5, RoPE
-- θ = 1e6, the 32768-token vocabulary and context, no sliding window (v0.3's config has
-- sliding_window null); on one node of 8 GPUs (tp 4 × dp 2), 128 sequences of 8192 tokens per step.
--   recipe ckpt import ~/models/Mistral-7B-v0.3 -o ckpt/mistral7b --recipe mistral_7b
return preset "_llama3_base" {
  model = {
    num_layers = 32,
    hidden_size = 4096,
    num_attention_heads = 32,
    num_kv_heads = 8,
    ffn_hidden_size = 14336,
    vocab_size = 32768,
    max_position_embeddings = 32768,
    rope_theta = 1000000.0,
    hf_architecture = "mistral",
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
    name = "mistral_7b",
  },
}
