-- Building block of the GPT presets (names starting with '_' are not listed by `recipe list`).
-- The GPT-2/GPT-3 architecture as in Megatron-LM: LayerNorm, learned positions, GELU MLP, biases,
-- tied input/output embeddings, GPT-2 vocabulary; AdamW as in the GPT-3 paper.
return {
  model = {
    arch = "gpt",
    norm = "layernorm",
    norm_eps = 1e-5,
    activation = "gelu",
    position_embedding = "learned",
    tie_embeddings = true,
    bias = true,
    init_std = 0.02,
    vocab_size = 50257,                 -- GPT-2 BPE
    make_vocab_size_divisible_by = 128, -- padded to 50304: faster GEMMs
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
    decay_style = "cosine",
  },
  trainer = {
    precision = "bf16",
  },
}
