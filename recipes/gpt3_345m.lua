-- GPT-2 Medium / Megatron's 345M GPT (354.9M parameters with the tied, padded embedding): the
-- benchmark workload of docs/performance.md. One fixed batch of random tokens repeated for 100
-- steps (the model memorizes it, so the loss falls from ≈11 to below 0.01), bf16 with fp32 master
-- weights, lr 3e-4 after 10 warmup steps, cosine to 0.
--   recipe pretrain gpt3_345m trainer.micro_batch_size=8
return preset "_gpt_base" {
  model = {
    num_layers = 24,
    hidden_size = 1024,
    num_attention_heads = 16,
    ffn_hidden_size = 4096,
    seq_length = 1024,
  },
  data = {
    kind = "mock",
    fixed_batch = true,
  },
  optimizer = {
    lr = 3e-4,
    min_lr = 0.0,
  },
  schedule = {
    warmup_steps = 10,
    decay_style = "cosine",
  },
  trainer = {
    max_steps = 100,
    micro_batch_size = 4,
    -- 0 = micro × dp: 4 on one GPU (the benchmark), and still valid when all GPUs of a host are used.
    global_batch_size = 0,
    precision = "bf16",
  },
  experiment = {
    name = "gpt3_345m",
  },
}
