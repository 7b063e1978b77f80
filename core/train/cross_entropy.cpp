#include "core/train/cross_entropy.hpp"

#include <algorithm>

namespace recipe::core {

void CrossEntropyLoss::prepare(int s) {
  // The same float as the scalar the classifier took before the per-row form: bitwise neutral.
  const float w = float(1.0 / denominator(s));
  if (w == written_) return;
  const LossContext& c = context();
  host_.assign(size_t(c.micro_batches) * size_t(c.rows), w);
  upload(host_);
  written_ = w;
}

double CrossEntropyLoss::denominator(int s) const {
  const LossContext& c = context();
  if (!c.train->loss_masked()) return double(c.global_batch) * double(c.seq);
  int64_t n = 0;
  for (int64_t i = int64_t(s) * c.global_batch; i < int64_t(s + 1) * c.global_batch; ++i)
    n += c.train->trained_tokens(i);
  return double(std::max<int64_t>(n, 1));
}

std::string CrossEntropyLoss::graph_off() const {
  if (context().train->loss_masked())
    return "data.kind=sft divides the loss by each step's count of trained tokens, which a recording would fix";
  return "";
}

}  // namespace recipe::core
