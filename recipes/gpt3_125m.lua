-- GPT-3 Small (125M) with the GPT-3 paper's schedule: 0.5M-token batches (256 × 2048), lr 6e-4
-- warmed up over 375M tokens and decayed over 260B tokens to 10%, 300B tokens in all.
-- Train on real data with data.kind=indexed data.path=<prefix> (GPT-2 BPE tokens).
return preset "_gpt_base" {
  model = {
    num_layers = 12,
    hidden_size = 768,
    num_attention_heads = 12,
    seq_length = 2048,
  },
  optimizer = {
    lr = 6e-4,
    min_lr = 6e-5,
  },
  schedule = {
    warmup_steps = 715,
    decay_steps = 496000,
  },
  trainer = {
    max_steps = 572000,
    micro_batch_size = 4,
    global_batch_size = 256,
  },
  experiment = {
    name = "gpt3_125m",
  },
}
