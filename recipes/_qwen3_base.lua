-- Building block of the Qwen3 presets (names starting with '_' are not listed by `recipe list`).
-- The Qwen3 dense architecture (Qwen3ForCausalLM): RMSNorm (eps 1e-6), RoPE with θ = 1000000,
-- SwiGLU, grouped-query attention with qk-norm (an RMSNorm over every q and k head before RoPE),
-- 128-wide heads whatever the width, no biases, the 151936-token vocabulary, 40960 positions;
-- trained here at Qwen3's first-stage context of 4096 tokens.
return {
  model = {
    arch = "qwen3",
    norm = "rmsnorm",
    norm_eps = 1e-6,
    activation = "swiglu",
    position_embedding = "rope",
    rope_theta = 1000000.0,
    qk_norm = true,
    head_dim = 128,
    bias = false,
    init_std = 0.02,
    vocab_size = 151936,
    make_vocab_size_divisible_by = 128,
    seq_length = 4096,
    max_position_embeddings = 40960,
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
