// RoPE's inverse frequencies: the one place the engine computes them. A run's table is made once
// (core/model/rope_table.hpp uploads it to the backend) and every RoPE and KV-cache kernel reads it
// (kernels/ops.hpp RopeArgs::inv_freq, KvCacheAppendArgs::rope_inv_freq); no kernel computes
// θ^(-2i/D) itself, so a scaled variant (Llama 3.1's "llama3") changes this file only, not four
// kernels.
//
// Layout of the table: f64 [D/2], D the head dim; entry i is the inverse frequency of the
// "rotate_half" pair (i, i + D/2). A kernel rotates that pair at position p by the angle
// p·inv_freq[i], computed in double.
//
// Like the rest of family/, this depends on nothing (not the plan, not the core, not kernels/).
#pragma once

#include <cstdint>
#include <vector>

#include "family/arch_shape.hpp"

namespace recipe::core {

// How the base frequencies θ^(-2i/D) are rescaled for long contexts. Only `none` today; Llama 3.1's
// "llama3" scaling becomes one more value here, its parameters (factor, low_freq_factor,
// high_freq_factor, original_max_position_embeddings) fields of RopeSpec, and one more case in
// rope_inv_freq's switch.
enum class RopeScaling : uint8_t { none };

struct RopeSpec {
  // The base θ (model.rope_theta). float because ArchShape holds it as float and the table must be
  // bitwise what the kernels computed from that float before the table existed.
  float theta = 10000.f;
  RopeScaling scaling = RopeScaling::none;
};

// The RoPE a model shape asks for (its θ; no scaling yet). The one translation from the architecture.
RopeSpec rope_spec(const ArchShape& s);

// The run's inverse-frequency table, D/2 doubles (layout above): without scaling entry i is
// std::pow(double(θ), -2.0·i/D), bitwise the value the CPU kernels computed before. Throws
// std::invalid_argument for an odd or non-positive head dim or a θ that is not positive and finite.
std::vector<double> rope_inv_freq(const RopeSpec& rope, int head_dim);

}  // namespace recipe::core
