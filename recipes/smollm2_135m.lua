-- SmolLM2 135M (HuggingFaceTB/SmolLM2-135M, 135M parameters): a Llama (LlamaForCausalLM) with 30
-- layers of width 576, 9 query heads sharing 3 KV heads, tied embeddings, RoPE θ = 100000, RMSNorm
-- eps 1e-5, the 49152-token vocabulary, 8192 positions; on one GPU, 64 sequences of 2048 tokens.
--   recipe ckpt import ~/models/SmolLM2-135M -o ckpt/smollm2 --recipe smollm2_135m
return preset "_llama3_base" {
  model = {
    num_layers = 30,
    hidden_size = 576,
    num_attention_heads = 9,
    num_kv_heads = 3,
    ffn_hidden_size = 1536,
    vocab_size = 49152,
    seq_length = 2048,
    max_position_embeddings = 8192,
    rope_theta = 100000.0,
    tie_embeddings = true,
    init_std = 0.041666666666666664,
  },
  optimizer = {
    lr = 3e-3,
    min_lr = 3e-4,
  },
  trainer = {
    max_steps = 100000,
    micro_batch_size = 8,
    global_batch_size = 64,
  },
  experiment = {
    name = "smollm2_135m",
  },
}
