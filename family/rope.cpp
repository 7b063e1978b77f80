#include "family/rope.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace recipe::core {

RopeSpec rope_spec(const ArchShape& s) { return {.theta = s.rope_theta, .scaling = RopeScaling::none}; }

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
  }
  return inv_freq;
}

}  // namespace recipe::core
