// AdamW over the two flat parameter groups (decayed, not decayed), with global grad-norm clipping
// and the learning-rate schedule.
#pragma once

#include <vector>

#include "core/train/lr_schedule.hpp"
#include "core/parallel/parallel_state.hpp"
#include "core/model/param_store.hpp"

namespace recipe::core {

struct OptimizerStepStats {
  double grad_norm = 0;    // global L2 norm of the (already DP-reduced) gradients, before clipping
  double clip_factor = 1;  // min(1, clip/(norm+1e-6)); 1 when clipping is off
  double lr = 0;
  bool applied = false;  // false when the norm was not finite (weights left untouched)
};

// A run of the flat buffers one AdamW call updates: [offset, offset+numel) of the master weights,
// compute copy and gradients, [state_offset, state_offset+numel) of the Adam moments, all in one
// weight-decay group. Unsharded: the two groups, state offsets = layout offsets. ZeRO-1: this DP
// rank's chunk of every gradient bucket, the moments packed back to back.
struct AdamSegment {
  int64_t offset = 0, numel = 0, state_offset = 0;
  bool decay = false;
};
std::vector<AdamSegment> whole_groups(const ParamLayout& layout);

class Optimizer {
 public:
  Optimizer(const plan::OptimizerConfig& cfg, LrSchedule schedule);
  // AdamW (optimizer.kind has no other value). Throws std::invalid_argument for bad hyperparameters.
  static Optimizer from_plan(const plan::Plan& plan);

  // sqrt(Σ g²) over this rank's grads, summed over `shard_group` (the ranks that hold different
  // slices of the parameters: TP/PP; the identity in one process).
  double grad_norm(ParamStore& store, Comm& shard_group) const;
  // One optimizer step: norm, clip, AdamW with lr = schedule(step). `step` is 0-based; Adam's bias
  // correction uses step+1. Skips the update (applied=false) when the norm is NaN/inf.
  OptimizerStepStats step(ParamStore& store, int step, Comm& shard_group) const;

  // The step that never waits for the host: launches AdamW over `segments` (this rank's: all of
  // its parameters, or its ZeRO-1 chunks) with the clip factor read from norm_clip[1] (f32 [2] in
  // backend memory, written by Backend::grad_norm_clip or clip_from_sums; NaN there skips the
  // update on the backend). `step` is 0-based.
  void step_device_scaled(ParamStore& store, int step, kernels::Tensor norm_clip,
                          const std::vector<AdamSegment>& segments) const;
  // The same step for a recording replayed every step (CUDA graph): lr and Adam's bias
  // corrections are read from `schedule` (f32 [3] in backend memory, holding device_schedule(step)
  // when the step runs), the clip factor from norm_clip[1]. Launches exactly the kernels
  // step_device_scaled launches, with bitwise the same per-step values.
  void step_device_recorded(ParamStore& store, kernels::Tensor norm_clip, kernels::Tensor schedule,
                            const std::vector<AdamSegment>& segments) const;
  // What `schedule` must hold for 0-based `step`: {lr, 1/(1 − β1^(step+1)), 1/(1 − β2^(step+1))}.
  kernels::AdamWSchedule device_schedule(int step) const;

  // AdamW with lr = schedule(step) over `segments`, gradients multiplied by grad_scale (or by the
  // device scalar, see AdamWArgs::grad_scale_device).
  // schedule_device: see AdamWArgs::schedule_device (nullptr: lr and step from the host).
  void apply(ParamStore& store, int step, float grad_scale, const float* grad_scale_device,
             const std::vector<AdamSegment>& segments, const float* schedule_device = nullptr) const;

  const LrSchedule& schedule() const { return schedule_; }
  const plan::OptimizerConfig& config() const { return cfg_; }

 private:
  plan::OptimizerConfig cfg_;
  LrSchedule schedule_;
};

}  // namespace recipe::core
