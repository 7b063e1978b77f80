-- Building block of the Qwen2.5 presets (names starting with '_' are not listed by `recipe list`).
-- The Qwen2.5 architecture (model.arch = "qwen2"): RMSNorm (eps 1e-6), RoPE with θ = 1000000,
-- SwiGLU, grouped-query attention, biases on q/k/v only (the family's own; model.bias = false
-- means no others), 32768 positions (the Instruct models' config.json; the engine's RoPE has no
-- position table, so this only bounds model.seq_length). Each preset sets its size, vocabulary and
-- tying. Trained here at 4096 tokens, Qwen2.5's first pre-training stage.
return {
  model = {
    arch = "qwen2",
    norm = "rmsnorm",
    norm_eps = 1e-6,
    activation = "swiglu",
    position_embedding = "rope",
    rope_theta = 1000000.0,
    bias = false,
    init_std = 0.02,
    make_vocab_size_divisible_by = 128,
    seq_length = 4096,
    max_position_embeddings = 32768,
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
