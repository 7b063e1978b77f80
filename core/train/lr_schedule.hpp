// Learning-rate schedule: linear warmup, then cosine / linear / constant decay to min_lr.
//
// `step` is the 0-based index of the optimizer step about to be taken. Warmup uses (step+1)/warmup
// (as nanoGPT/llm.c), so the first step already moves the weights; Megatron's scheduler instead
// starts at lr·0/warmup and reaches lr one step later. After warmup, progress runs from 0 at step
// `warmup_steps` to 1 at step `decay_steps` (which counts the warmup, as Megatron's
// lr_decay_iters); past decay_steps the rate stays at min_lr (cosine, linear) or lr (constant).
#pragma once

#include <string>

#include "plan/plan.hpp"

namespace recipe::core {

class LrSchedule {
 public:
  enum class Decay { cosine, linear, constant };
  LrSchedule(double lr, double min_lr, int warmup_steps, int decay_steps, Decay decay);
  // decay_steps 0 in the plan means trainer.max_steps. Throws std::invalid_argument for an unknown
  // schedule.decay_style or min_lr > lr.
  static LrSchedule from_plan(const plan::Plan& plan);

  double at(int step) const;
  int warmup_steps() const { return warmup_; }
  int decay_steps() const { return decay_steps_; }

 private:
  double lr_, min_lr_;
  int warmup_, decay_steps_;
  Decay decay_;
};

}  // namespace recipe::core
