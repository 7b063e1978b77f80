// The optimizer component's shared part (state allocation, segments) and its registry.
#include "core/train/optimizer.hpp"

#include <algorithm>
#include <stdexcept>

#include "core/train/adamw.hpp"

namespace recipe::core {

Optimizer::Optimizer(kernels::Backend& backend, const plan::OptimizerConfig& cfg, LrSchedule schedule,
                     std::vector<OptimizerSegment> segments, int64_t state_numel)
    : be_(backend), cfg_(cfg), schedule_(schedule), segments_(std::move(segments)), state_numel_(state_numel) {}

Optimizer::~Optimizer() {
  for (void* p : bufs_) be_.free(p);
}

void Optimizer::add_state(std::string checkpoint_prefix) {
  void* p = be_.alloc(std::max<size_t>(size_t(state_numel_), 1) * sizeof(float));  // zero-filled
  bufs_.push_back(p);
  state_.push_back(
      {std::move(checkpoint_prefix), kernels::Tensor(p, kernels::DType::f32, be_.device(), {state_numel_})});
}

kernels::Tensor Optimizer::state_span(size_t i, int64_t offset, int64_t n) const {
  if (offset < 0 || n < 0 || offset + n > state_numel_)
    throw std::out_of_range("optimizer " + name() + ": span outside the optimizer state");
  const kernels::Tensor& t = state_.at(i).data;
  return kernels::Tensor(static_cast<float*>(t.ptr) + offset, kernels::DType::f32, t.device, {n});
}

const OptimizerState& Optimizer::state(std::string_view checkpoint_prefix) const {
  for (const OptimizerState& s : state_)
    if (s.checkpoint_prefix == checkpoint_prefix) return s;
  throw std::out_of_range("optimizer " + name() + " has no state \"" + std::string(checkpoint_prefix) + "\"");
}

std::vector<OptimizerSegment> whole_groups(const ParamLayout& L) {
  std::vector<OptimizerSegment> g;
  if (L.decay_numel > 0) g.push_back({L.decay_begin, L.decay_numel, L.decay_begin, true});
  if (L.nodecay_numel > 0) g.push_back({L.nodecay_begin, L.nodecay_numel, L.nodecay_begin, false});
  return g;
}

// One line per optimizer.kind.
std::unique_ptr<Optimizer> make_optimizer(const plan::Plan& plan, kernels::Backend& backend,
                                          std::vector<OptimizerSegment> segments, int64_t state_numel) {
  switch (plan.optimizer.kind) {
    case plan::OptimizerKind::adamw:
      return std::make_unique<AdamW>(backend, plan.optimizer, LrSchedule::from_plan(plan), std::move(segments),
                                     state_numel);
  }
  throw std::invalid_argument("optimizer.kind: unknown value");
}

}  // namespace recipe::core
