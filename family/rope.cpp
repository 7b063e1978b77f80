#include "family/rope.hpp"

#include <cmath>
#include <numbers>
#include <sstream>
#include <stdexcept>
#include <string>

namespace recipe::core {

namespace {

std::string num(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

// llama3 scaling of the base table in place (the rule in rope.hpp), in double.
void scale_llama3(const RopeSpec& r, std::vector<double>& inv_freq) {
  const char* fix = " (Llama 3.1: factor 8, low_freq_factor 1, high_freq_factor 4, original_max_positions 8192)";
  if (!(r.factor > 0) || !std::isfinite(r.factor))
    throw std::invalid_argument("model.rope_scaling_factor=" + num(r.factor) + " must be positive" + fix);
  if (!(r.low_freq_factor > 0) || !std::isfinite(r.high_freq_factor) || !(r.low_freq_factor < r.high_freq_factor))
    throw std::invalid_argument("model.rope_scaling_low_freq_factor=" + num(r.low_freq_factor) +
                                " and high_freq_factor=" + num(r.high_freq_factor) + " must satisfy 0 < low < high" +
                                fix);
  if (r.original_max_positions <= 0)
    throw std::invalid_argument("model.rope_scaling_original_max_positions=" +
                                std::to_string(r.original_max_positions) + " must be positive" + fix);
  const double L = r.original_max_positions;
  const double low_wavelen = L / r.low_freq_factor, high_wavelen = L / r.high_freq_factor;
  for (double& f : inv_freq) {
    const double wavelen = 2 * std::numbers::pi / f;
    if (wavelen < high_wavelen) continue;  // fast pairs keep their frequency
    if (wavelen > low_wavelen) {           // slow pairs: interpolated positions
      f /= r.factor;
      continue;
    }
    const double s = (L / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
    f = (1 - s) * f / r.factor + s * f;
  }
}

}  // namespace

RopeSpec rope_spec(const ArchShape& s) {
  return {.theta = s.rope_theta,
          .scaling = s.rope_scaling,
          .factor = s.rope_factor,
          .low_freq_factor = s.rope_low_freq_factor,
          .high_freq_factor = s.rope_high_freq_factor,
          .original_max_positions = s.rope_original_max_positions};
}

std::vector<double> rope_inv_freq(const RopeSpec& rope, int head_dim) {
  const int D = head_dim;
  if (D <= 0 || D % 2 != 0)
    throw std::invalid_argument("RoPE needs a positive, even head dim; got " + std::to_string(D) +
                                " (model.hidden_size / model.num_attention_heads)");
  if (!(rope.theta > 0.f) || !std::isfinite(rope.theta))
    throw std::invalid_argument("model.rope_theta=" + std::to_string(rope.theta) +
                                " must be positive and finite (Llama 3: 500000, Llama 2: 10000)");
  std::vector<double> inv_freq(size_t(D / 2));
  // The base frequencies, in the exact expression the CPU kernels used (kept so CPU runs stay
  // bitwise the same; the CUDA kernels used exp(−ln θ·2i/D), which may differ in a double's last bit).
  for (int i = 0; i < D / 2; ++i) inv_freq[size_t(i)] = std::pow(double(rope.theta), -2.0 * i / D);
  switch (rope.scaling) {
    case RopeScaling::none:
      break;
    case RopeScaling::llama3:
      scale_llama3(rope, inv_freq);
      break;
  }
  return inv_freq;
}

}  // namespace recipe::core
