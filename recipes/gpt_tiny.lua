-- A two-layer byte-level GPT that trains on two CPU cores in seconds: the smoke test of the whole
-- stack (recipe → plan → worker → trainer). With fixed_batch it memorizes one batch, so the loss
-- must fall from ln(256) ≈ 5.5 towards 0.
return preset "_gpt_base" {
  model = {
    num_layers = 2,
    hidden_size = 64,
    num_attention_heads = 4,
    vocab_size = 256,                 -- bytes (data.tokenizer=byte for text data)
    make_vocab_size_divisible_by = 1,
    seq_length = 64,
  },
  data = {
    kind = "mock",
    fixed_batch = true,
  },
  optimizer = {
    lr = 1e-3,
    min_lr = 1e-4,
    weight_decay = 0.0,
  },
  schedule = {
    warmup_steps = 10,
    decay_style = "cosine",
  },
  trainer = {
    max_steps = 200,
    micro_batch_size = 8,
    global_batch_size = 8,
    precision = "fp32",
    device = "cpu",
  },
  experiment = {
    name = "gpt_tiny",
  },
}
