// AdamW (decoupled weight decay, none on norms, biases and embeddings: the layout's no-decay
// group) over the flat f32 master weights, with the learning-rate schedule.
//
// State: two f32 tensors of state_numel elements (optimizer.hpp), saved in checkpoints as
//   optimizer.exp_avg.<name>     first moment m
//   optimizer.exp_avg_sq.<name>  second moment v
// Graph staging: f32 [3] = kernels::AdamWSchedule {lr, 1/(1-β1^t), 1/(1-β2^t)} of the step, written
// by stage() into page-locked host memory and copied by upload_staged() (inside the recording) into
// the device f32 [3] that the recorded AdamW kernels read.
#pragma once

#include "core/train/optimizer.hpp"

namespace recipe::core {

class AdamW final : public Optimizer {
 public:
  static constexpr const char* kExpAvg = "optimizer.exp_avg.";
  static constexpr const char* kExpAvgSq = "optimizer.exp_avg_sq.";

  // Throws std::invalid_argument for bad hyperparameters.
  AdamW(kernels::Backend& backend, const plan::OptimizerConfig& cfg, LrSchedule schedule,
        std::vector<OptimizerSegment> segments, int64_t state_numel);
  ~AdamW() override;

  std::string name() const override { return "adamw"; }
  void step(ParamStore& store, int step, float grad_scale) override;
  void step_device(ParamStore& store, int step, kernels::Tensor norm_clip) override;
  std::string enable_graph_staging() override;
  void stage(int step) override;
  void upload_staged() override;
  void step_recorded(ParamStore& store, kernels::Tensor norm_clip) override;

  // What the staging holds for 0-based `step`: {lr, 1/(1 − β1^(step+1)), 1/(1 − β2^(step+1))}.
  kernels::AdamWSchedule device_schedule(int step) const;
  // stage(step) is stage_schedule(device_schedule(step)); the device f32 [3] the recorded AdamW
  // reads (defined after enable_graph_staging).
  void stage_schedule(const kernels::AdamWSchedule& s);
  kernels::Tensor staged_schedule() const;

 private:
  // AdamW over the segments with lr = schedule(step), gradients multiplied by grad_scale (or by
  // the device scalar, AdamWArgs::grad_scale_device); schedule_device: AdamWArgs::schedule_device.
  void apply(ParamStore& store, int step, float grad_scale, const float* grad_scale_device,
             const float* schedule_device = nullptr) const;

  float* host_schedule_ = nullptr;  // page-locked f32 [3] (graph staging)
  void* schedule_buf_ = nullptr;    // device f32 [3], read by the recorded AdamW
};

}  // namespace recipe::core
