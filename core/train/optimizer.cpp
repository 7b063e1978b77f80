#include "core/train/optimizer.hpp"

#include <cmath>
#include <stdexcept>

namespace recipe::core {

Optimizer::Optimizer(const plan::OptimizerConfig& cfg, LrSchedule schedule) : cfg_(cfg), schedule_(schedule) {
  auto in01 = [](double b) { return b >= 0 && b < 1; };
  if (!in01(cfg_.beta1) || !in01(cfg_.beta2))
    throw std::invalid_argument("optimizer.beta1/beta2 must be in [0, 1) (got " + std::to_string(cfg_.beta1) + ", " +
                                std::to_string(cfg_.beta2) + ")");
  if (!(cfg_.eps > 0)) throw std::invalid_argument("optimizer.eps must be positive");
  if (cfg_.lr < 0) throw std::invalid_argument("optimizer.lr must not be negative");
  if (cfg_.clip_grad < 0) throw std::invalid_argument("optimizer.clip_grad must be >= 0 (0 disables clipping)");
}

Optimizer Optimizer::from_plan(const plan::Plan& plan) {
  return Optimizer(plan.optimizer, LrSchedule::from_plan(plan));
}

double Optimizer::grad_norm(ParamStore& store, Comm& shard_group) const {
  double sq = store.backend().sum_squares(store.grads());
  return std::sqrt(shard_group.all_reduce_sum(sq));
}

OptimizerStepStats Optimizer::step(ParamStore& store, int step, Comm& shard_group) const {
  OptimizerStepStats st;
  st.lr = schedule_.at(step);
  st.grad_norm = grad_norm(store, shard_group);
  if (!std::isfinite(st.grad_norm)) return st;
  if (cfg_.clip_grad > 0) st.clip_factor = std::min(1.0, cfg_.clip_grad / (st.grad_norm + 1e-6));

  apply(store, step, float(st.clip_factor), nullptr, whole_groups(store.layout()));
  st.applied = true;
  return st;
}

void Optimizer::step_device_scaled(ParamStore& store, int step, kernels::Tensor norm_clip,
                                   const std::vector<AdamSegment>& segments) const {
  apply(store, step, 1.0f, norm_clip.as<float>() + 1, segments);
}

void Optimizer::step_device_recorded(ParamStore& store, kernels::Tensor norm_clip, kernels::Tensor schedule,
                                     const std::vector<AdamSegment>& segments) const {
  if (schedule.dtype != kernels::DType::f32 || schedule.numel() < 3)
    throw std::invalid_argument("Optimizer::step_device_recorded: schedule " + schedule.shape_str() +
                                " must be f32 with 3 elements");
  apply(store, 0, 1.0f, norm_clip.as<float>() + 1, segments, schedule.as<float>());
}

kernels::AdamWSchedule Optimizer::device_schedule(int step) const {
  kernels::AdamWArgs a{};
  a.lr = float(schedule_.at(step));
  a.beta1 = float(cfg_.beta1);
  a.beta2 = float(cfg_.beta2);
  a.step = step + 1;
  return kernels::adamw_schedule(a);
}

std::vector<AdamSegment> whole_groups(const ParamLayout& L) {
  std::vector<AdamSegment> g;
  if (L.decay_numel > 0) g.push_back({L.decay_begin, L.decay_numel, L.decay_begin, true});
  if (L.nodecay_numel > 0) g.push_back({L.nodecay_begin, L.nodecay_numel, L.nodecay_begin, false});
  return g;
}

void Optimizer::apply(ParamStore& store, int step, float grad_scale, const float* grad_scale_device,
                      const std::vector<AdamSegment>& segments, const float* schedule_device) const {
  kernels::AdamWArgs a{};
  a.lr = float(schedule_.at(step));
  a.beta1 = float(cfg_.beta1);
  a.beta2 = float(cfg_.beta2);
  a.eps = float(cfg_.eps);
  a.step = step + 1;
  a.grad_scale = grad_scale;
  a.grad_scale_device = grad_scale_device;
  a.schedule_device = schedule_device;
  for (const AdamSegment& seg : segments) {
    if (seg.numel == 0) continue;
    a.weight_decay = seg.decay ? float(cfg_.weight_decay) : 0.0f;
    kernels::Tensor copy = store.compute_is_master() ? kernels::Tensor() : store.compute_span(seg.offset, seg.numel);
    store.backend().adamw(store.master_span(seg.offset, seg.numel), store.grad_span(seg.offset, seg.numel),
                          store.m_span(seg.state_offset, seg.numel), store.v_span(seg.state_offset, seg.numel), copy,
                          a);
  }
}

}  // namespace recipe::core
