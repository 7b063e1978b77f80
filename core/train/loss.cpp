// The dloss rows every Loss writes (loss.hpp) and the registry of objectives.
#include "core/train/loss.hpp"

#include "core/train/cross_entropy.hpp"

namespace recipe::core {

Loss::Loss(const LossContext& ctx) : ctx_(ctx) {
  const int64_t n = int64_t(ctx_.micro_batches) * ctx_.rows;
  buf_ = ctx_.backend->alloc(size_t(n) * sizeof(float));
  dloss_ = kernels::Tensor(buf_, kernels::DType::f32, ctx_.backend->device(), {int64_t(ctx_.micro_batches), ctx_.rows});
}

Loss::~Loss() {
  if (buf_) ctx_.backend->free(buf_);
}

void Loss::upload(const std::vector<float>& rows) { ctx_.backend->from_host(dloss_, rows.data()); }

// One line per objective.
std::unique_ptr<Loss> make_loss(const plan::Plan&, const LossContext& ctx) {
  return std::make_unique<CrossEntropyLoss>(ctx);
}

}  // namespace recipe::core
