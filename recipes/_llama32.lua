-- Building block of the Llama 3.2 presets (1B, 3B): tied input/output embeddings and Llama 3.1's
-- RoPE scaling with factor 32 (their config.json: factor 32, low_freq_factor 1, high_freq_factor 4,
-- original_max_position_embeddings 8192, max_position_embeddings 131072).
return preset "_llama31_rope" {
  model = {
    tie_embeddings = true,
    rope_scaling_factor = 32.0,
  },
}
