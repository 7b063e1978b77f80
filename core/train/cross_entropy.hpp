// Token-level cross-entropy: the step's loss is the mean of the per-token losses over the global
// batch's counted tokens (every position, or for masked data, data.kind=sft, its trained targets),
// so every counted row's gradient weight is the same scalar 1 / count. Rows whose target is < 0
// (masked, padding) get that weight too; the classifier gives them zero gradient regardless.
#pragma once

#include "core/train/loss.hpp"

namespace recipe::core {

class CrossEntropyLoss final : public Loss {
 public:
  explicit CrossEntropyLoss(const LossContext& ctx) : Loss(ctx) {}
  std::string name() const override { return "cross_entropy"; }
  // Fills every row with float(1 / denominator(s)) when that value changes: once for unmasked
  // data (the count is fixed), every step for masked data (which runs uncaptured, graph_off()).
  void prepare(int s) override;
  // The tokens step s's mean divides by: global batch × seq, or the trained targets of the step's
  // samples (at least 1: a batch without trained tokens has loss 0, not 0/0). The same on every
  // rank: the data is a pure function of the sample index.
  double denominator(int s) const override;
  std::string graph_off() const override;

 private:
  float written_ = 0;  // the value the dloss rows hold (0: none yet; a real weight is > 0)
  std::vector<float> host_;
};

}  // namespace recipe::core
