-- Llama 3.1 8B (meta-llama/Llama-3.1-8B, -Instruct): Llama 3 8B's shape with Llama 3.1's RoPE
-- scaling and 131072-position context, on one node of 8 GPUs (tensor parallel 4 × data parallel 2),
-- 128 sequences of 8192 tokens per step.
--   recipe ckpt import ~/models/Llama-3.1-8B-Instruct -o ckpt/llama31 --recipe llama3_1_8b
return preset "llama3_8b" (preset "_llama31_rope") {
  experiment = {
    name = "llama3_1_8b",
  },
}
