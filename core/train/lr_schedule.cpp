#include "core/train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace recipe::core {

LrSchedule::LrSchedule(double lr, double min_lr, int warmup_steps, int decay_steps, Decay decay)
    : lr_(lr), min_lr_(min_lr), warmup_(warmup_steps), decay_steps_(decay_steps), decay_(decay) {
  if (min_lr > lr && decay != Decay::constant)
    throw std::invalid_argument("optimizer.min_lr=" + std::to_string(min_lr) +
                                " is above optimizer.lr=" + std::to_string(lr) + "; set min_lr <= lr");
}

LrSchedule LrSchedule::from_plan(const plan::Plan& plan) {
  const auto& s = plan.schedule;
  Decay d = Decay::cosine;
  switch (s.decay_style) {
    case plan::DecayStyle::cosine:
      d = Decay::cosine;
      break;
    case plan::DecayStyle::linear:
      d = Decay::linear;
      break;
    case plan::DecayStyle::constant:
      d = Decay::constant;
      break;
  }
  // schedule.decay_steps is derived by the resolver (0 in a recipe = max(max_steps, warmup_steps)).
  return LrSchedule(plan.optimizer.lr, plan.optimizer.min_lr, s.warmup_steps, s.decay_steps, d);
}

double LrSchedule::at(int step) const {
  if (warmup_ > 0 && step < warmup_) return lr_ * double(step + 1) / double(warmup_);
  if (decay_ == Decay::constant) return lr_;
  if (step >= decay_steps_) return min_lr_;
  const double span = double(decay_steps_ - warmup_);
  const double progress = span > 0 ? std::clamp(double(step - warmup_) / span, 0.0, 1.0) : 1.0;
  const double coeff = decay_ == Decay::cosine ? 0.5 * (1.0 + std::cos(std::numbers::pi * progress)) : 1.0 - progress;
  return min_lr_ + coeff * (lr_ - min_lr_);
}

}  // namespace recipe::core
