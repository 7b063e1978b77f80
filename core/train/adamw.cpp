#include "core/train/adamw.hpp"

#include <stdexcept>

namespace recipe::core {

AdamW::AdamW(kernels::Backend& backend, const plan::OptimizerConfig& cfg, LrSchedule schedule,
             std::vector<OptimizerSegment> segments, int64_t state_numel)
    : Optimizer(backend, cfg, schedule, std::move(segments), state_numel) {
  auto in01 = [](double b) { return b >= 0 && b < 1; };
  if (!in01(cfg.beta1) || !in01(cfg.beta2))
    throw std::invalid_argument("optimizer.beta1/beta2 must be in [0, 1) (got " + std::to_string(cfg.beta1) + ", " +
                                std::to_string(cfg.beta2) + ")");
  if (!(cfg.eps > 0)) throw std::invalid_argument("optimizer.eps must be positive");
  if (cfg.lr < 0) throw std::invalid_argument("optimizer.lr must not be negative");
  if (cfg.clip_grad < 0) throw std::invalid_argument("optimizer.clip_grad must be >= 0 (0 disables clipping)");
  add_state(kExpAvg);    // m
  add_state(kExpAvgSq);  // v
}

AdamW::~AdamW() {
  if (host_schedule_) backend().free_host(host_schedule_);
  if (schedule_buf_) backend().free(schedule_buf_);
}

void AdamW::step(ParamStore& store, int step, float grad_scale) { apply(store, step, grad_scale, nullptr); }

void AdamW::step_device(ParamStore& store, int step, kernels::Tensor norm_clip) {
  apply(store, step, 1.0f, norm_clip.as<float>() + 1);
}

std::string AdamW::enable_graph_staging() {
  try {
    host_schedule_ = static_cast<float*>(backend().alloc_host(3 * sizeof(float)));
  } catch (const std::exception& e) {
    return std::string("page-locked staging: ") + e.what();
  }
  schedule_buf_ = backend().alloc(3 * sizeof(float));
  return "";
}

void AdamW::stage(int step) { stage_schedule(device_schedule(step)); }

void AdamW::stage_schedule(const kernels::AdamWSchedule& s) {
  host_schedule_[0] = s.lr;
  host_schedule_[1] = s.inv_bias_correction1;
  host_schedule_[2] = s.inv_bias_correction2;
}

kernels::Tensor AdamW::staged_schedule() const {
  return schedule_buf_ ? kernels::Tensor(schedule_buf_, kernels::DType::f32, backend().device(), {3})
                       : kernels::Tensor();
}

void AdamW::upload_staged() { backend().from_host_async(staged_schedule(), host_schedule_); }

void AdamW::step_recorded(ParamStore& store, kernels::Tensor norm_clip) {
  apply(store, 0, 1.0f, norm_clip.as<float>() + 1, static_cast<const float*>(schedule_buf_));
}

kernels::AdamWSchedule AdamW::device_schedule(int step) const {
  kernels::AdamWArgs a{};
  a.lr = float(schedule().at(step));
  a.beta1 = float(config().beta1);
  a.beta2 = float(config().beta2);
  a.step = step + 1;
  return kernels::adamw_schedule(a);
}

void AdamW::apply(ParamStore& store, int step, float grad_scale, const float* grad_scale_device,
                  const float* schedule_device) const {
  kernels::AdamWArgs a{};
  a.lr = float(schedule().at(step));
  a.beta1 = float(config().beta1);
  a.beta2 = float(config().beta2);
  a.eps = float(config().eps);
  a.step = step + 1;
  a.grad_scale = grad_scale;
  a.grad_scale_device = grad_scale_device;
  a.schedule_device = schedule_device;
  for (const OptimizerSegment& seg : segments()) {
    if (seg.numel == 0) continue;
    a.weight_decay = seg.decay ? float(config().weight_decay) : 0.0f;
    kernels::Tensor copy = store.compute_is_master() ? kernels::Tensor() : store.compute_span(seg.offset, seg.numel);
    store.backend().adamw(store.master_span(seg.offset, seg.numel), store.grad_span(seg.offset, seg.numel),
                          state_span(0, seg.state_offset, seg.numel), state_span(1, seg.state_offset, seg.numel), copy,
                          a);
  }
}

}  // namespace recipe::core
