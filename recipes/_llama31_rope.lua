-- Building block of the Llama 3.1 and 3.3 presets: Llama 3.1's "llama3" RoPE scaling (its
-- config.json rope_scaling: factor 8, low_freq_factor 1, high_freq_factor 4, pretrained at 8192
-- positions) and the 131072-position context it stretches them to. Training sequences stay at
-- model.seq_length (8192 in _llama3_base); the scaled table is what the model was trained with.
return {
  model = {
    max_position_embeddings = 131072,
    rope_scaling = "llama3",
    rope_scaling_factor = 8.0,
    rope_scaling_low_freq_factor = 1.0,
    rope_scaling_high_freq_factor = 4.0,
    rope_scaling_original_max_positions = 8192,
  },
}
