-- Llama 3.3 70B (meta-llama/Llama-3.3-70B-Instruct): Llama 3 70B's shape with Llama 3.1's RoPE
-- scaling and 131072-position context, in llama3_70b's layout (8 nodes × 8 GPUs: tp 8, pp 4, dp 2).
--   recipe validate llama3_3_70b
return preset "llama3_70b" (preset "_llama31_rope") {
  experiment = {
    name = "llama3_3_70b",
  },
}
