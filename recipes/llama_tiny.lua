-- gpt_tiny's Llama twin: the same size and training settings with RMSNorm, RoPE, SwiGLU, grouped
-- query attention (4 heads sharing 2 KV heads), no biases and an untied output layer.
return preset "gpt_tiny" {
  model = {
    arch = "llama",
    norm = "rmsnorm",
    position_embedding = "rope",
    rope_theta = 10000.0,
    activation = "swiglu",
    bias = false,
    tie_embeddings = false,
    num_kv_heads = 2,
    ffn_hidden_size = 176,
  },
  experiment = {
    name = "llama_tiny",
  },
}
