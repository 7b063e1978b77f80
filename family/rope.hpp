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

// How the base frequencies θ^(-2i/D) are rescaled for long contexts (model.rope_scaling). The
// enum itself lives in arch_shape.hpp, beside the fields that carry its parameters:
//
//   none:   the base frequencies.
//   llama3: Llama 3.1's ("rope_type": "llama3" in config.json). With L = original_max_positions,
//           wavelength λ_i = 2π / f_i of base frequency f_i:
//             λ_i < L / high_freq_factor  (fast pairs)    f_i unchanged
//             λ_i > L / low_freq_factor   (slow pairs)    f_i / factor
//             otherwise, s = (L / λ_i − low) / (high − low):  (1 − s)·f_i / factor + s·f_i
//           The blend is continuous at both edges (s = 0 gives f_i / factor, s = 1 gives f_i), so a
//           pair whose wavelength sits on an edge gets the same value (to rounding) whichever side
//           a comparison puts it.
//
// Precision. transformers computes this table in float32 (_compute_llama3_parameters: float32
// base frequencies, wavelengths and blend) and rounds it there; this table is float64 throughout.
// We keep float64 (as the unscaled table, whose entries are bitwise what the kernels always used)
// rather than replaying float32's roundings: the two differ by float32's rounding of each entry,
// ≤ a few 1e-7 relative (tests/family/test_rope.cpp measures it against transformers' values),
// below what a float32 model can tell apart, and the same order as the unscaled table's own
// difference from transformers' float32 one. The edge rule above is why no entry can differ by
// more: an edge comparison decided differently in float32 lands on the same value.

struct RopeSpec {
  // The base θ (model.rope_theta). float because ArchShape holds it as float and the table must be
  // bitwise what the kernels computed from that float before the table existed.
  float theta = 10000.f;
  RopeScaling scaling = RopeScaling::none;
  // llama3 only (ArchShape's rope_* fields; model.rope_scaling_* keys).
  double factor = 0, low_freq_factor = 0, high_freq_factor = 0;
  int original_max_positions = 0;
};

// The RoPE a model shape asks for (its θ and scaling). The one translation from the architecture.
RopeSpec rope_spec(const ArchShape& s);

// The run's inverse-frequency table, D/2 doubles (layout above): without scaling entry i is
// std::pow(double(θ), -2.0·i/D), bitwise the value the CPU kernels computed before. Throws
// std::invalid_argument for an odd or non-positive head dim, a θ that is not positive and finite,
// or llama3 parameters the resolver would refuse (factor ≤ 0, low ≥ high, low ≤ 0, original ≤ 0),
// naming the model.rope_scaling_* key.
std::vector<double> rope_inv_freq(const RopeSpec& rope, int head_dim);

}  // namespace recipe::core
