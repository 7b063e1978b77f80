-- LoRA fine-tuning of Llama 3.2 1B on one GPU: rank-16 adapters on every linear, the base frozen in
-- bf16. For a real run:
--   recipe finetune llama3_2_1b_lora checkpoint.load=ckpt/llama32_1b data.kind=sft data.path=data/chat
return preset "llama3_2_1b" (preset "_llama3_lora") {
  peft = {
    target_modules = { "qkv", "proj", "fc1", "fc2" },
  },
  trainer = {
    global_batch_size = 32,
  },
  experiment = {
    name = "llama3_2_1b_lora",
  },
}
