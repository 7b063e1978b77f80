-- LoRA fine-tuning of SmolLM2 135M on the CPU (fp32, 512-token sequences, 8 per step): rank-8
-- adapters on every linear, small enough to run on a laptop. For a real run:
--   recipe finetune smollm2_135m_lora checkpoint.load=ckpt/smollm2 data.kind=sft data.path=data/chat
return preset "smollm2_135m" (preset "_tiny_lora") {
  model = {
    seq_length = 512,
  },
  trainer = {
    max_steps = 200,
    micro_batch_size = 1,
    global_batch_size = 8,
    precision = "fp32",
    device = "cpu",
  },
  experiment = {
    name = "smollm2_135m_lora",
  },
}
