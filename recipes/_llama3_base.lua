-- Building block of the Llama 3 presets (names starting with '_' are not listed by `recipe list`).
-- The Llama 3 architecture: RMSNorm (eps 1e-5), RoPE with θ = 500000, SwiGLU, grouped-query
-- attention, no biases, untied output layer, the 128256-token vocabulary, 8192-token context.
return {
  model = {
    arch = "llama",
    norm = "rmsnorm",
    norm_eps = 1e-5,
    activation = "swiglu",
    position_embedding = "rope",
    rope_theta = 500000.0,
    tie_embeddings = false,
    bias = false,
    init_std = 0.02,
    vocab_size = 128256,
    make_vocab_size_divisible_by = 128,
    seq_length = 8192,
  },
  data = {
    kind = "mock",  -- point at real data with data.kind=indexed data.path=<prefix>
  },
  optimizer = {
    kind = "adamw",
    beta1 = 0.9,
    beta2 = 0.95,
    eps = 1e-8,
    weight_decay = 0.1,
    clip_grad = 1.0,
  },
  schedule = {
    warmup_steps = 2000,
    decay_style = "cosine",
  },
  trainer = {
    precision = "bf16",
    micro_batch_size = 1,
  },
}
