-- GPT-3 XL (1.3B) with the GPT-3 paper's schedule: 1M-token batches (512 × 2048), lr 2e-4 warmed
-- up over 375M tokens and decayed over 260B tokens to 10%, 300B tokens in all.
-- Train on real data with data.kind=indexed data.path=<prefix> (GPT-2 BPE tokens).
return preset "_gpt_base" {
  model = {
    num_layers = 24,
    hidden_size = 2048,
    num_attention_heads = 16,
    seq_length = 2048,
  },
  optimizer = {
    lr = 2e-4,
    min_lr = 2e-5,
  },
  schedule = {
    warmup_steps = 358,
    decay_steps = 248000,
  },
  trainer = {
    max_steps = 286000,
    micro_batch_size = 4,
    global_batch_size = 512,
  },
  experiment = {
    name = "gpt3_1p3b",
  },
}
