// Cross entropy over logits [N, Vp] whose first `vocab` columns are real (the rest is padding to a
// multiple the GEMMs like). The log-sum-exp is taken stably (max subtracted, sum in double). With
// compute_grad the logits are overwritten in place by dlogits = (softmax − onehot(target))·dloss[n]
// (each row its own weight, f32 [N]), padding columns and ignored rows (target < 0) by zeros, so no
// second [N, Vp] buffer is needed.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/cpu_detail.hpp"

namespace recipe::kernels {

void CpuBackend::cross_entropy(Tensor losses, Tensor logits, Tensor targets, int vocab, Tensor dloss,
                               bool compute_grad) {
  const char* op = "cross_entropy";
  cpu::require_tensor(logits, op, "logits", DType::f32);
  cpu::require_tensor(losses, op, "losses", DType::f32);
  cpu::require_tensor(targets, op, "targets", DType::i32);
  const int64_t N = losses.numel();
  cpu::require_numel(targets, N, op, "targets");
  const int64_t Vp = logits.dim(-1);
  cpu::require(logits.ndim >= 1 && logits.numel() == N * Vp, op,
               "logits " + logits.shape_str() + " must be [N=" + std::to_string(N) + ", padded vocab]");
  cpu::require(vocab > 0 && vocab <= Vp, op,
               "vocab=" + std::to_string(vocab) + " must be in [1, padded vocab " + std::to_string(Vp) + "]");
  if (compute_grad) {
    cpu::require_tensor(dloss, op, "dloss", DType::f32);
    cpu::require_numel(dloss, N, op, "dloss");
  }
  const float* row_dloss = compute_grad ? dloss.as<float>() : nullptr;
  const int32_t* tgt = targets.as<int32_t>();
  for (int64_t n = 0; n < N; ++n)
    cpu::require(tgt[n] < vocab, op,
                 "target " + std::to_string(tgt[n]) + " at row " + std::to_string(n) + " is outside the vocab [0, " +
                     std::to_string(vocab) + "); is the tokenizer's vocab larger than model.vocab_size?");
  float* loss = losses.as<float>();
  for (int64_t n = 0; n < N; ++n) {
    float* z = logits.as<float>() + n * Vp;
    if (tgt[n] < 0) {
      loss[n] = 0.0f;
      if (compute_grad) std::memset(z, 0, sizeof(float) * size_t(Vp));
      continue;
    }
    float max_z = z[0];
    for (int v = 1; v < vocab; ++v) max_z = std::max(max_z, z[v]);
    double sum = 0.0;
    for (int v = 0; v < vocab; ++v) sum += std::exp(double(z[v] - max_z));
    const double lse = double(max_z) + std::log(sum);
    loss[n] = float(lse - double(z[tgt[n]]));
    if (compute_grad) {
      const float dloss_n = row_dloss[n];
      for (int v = 0; v < vocab; ++v) {
        double prob = std::exp(double(z[v]) - lse);
        z[v] = float((prob - (v == tgt[n] ? 1.0 : 0.0)) * double(dloss_n));
      }
      for (int64_t v = vocab; v < Vp; ++v) z[v] = 0.0f;
    }
  }
}

}  // namespace recipe::kernels
