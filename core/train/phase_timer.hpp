// Phase timing of the device training step (kernels.phase_timing=true): the step synchronizes at the
// end of each phase and the time since the previous mark goes to that phase; report() gives the
// mean per step. Synchronizing perturbs the step slightly, and a step that waits for the host
// cannot be captured in a CUDA graph, so timing and the graph exclude each other. Off, every
// call returns at once (no synchronization).
#pragma once

#include <string>

#include "kernels/ops.hpp"

namespace recipe::core {

class PhaseTimer {
 public:
  enum Phase {
    forward_backward = 0,  // forward + backward of every micro-batch
    update = 1,            // grad norm + clip + AdamW
    read_back = 2,         // loss and norm to the host
    forward_alone = 3,     // one extra forward of a micro-batch, to split forward from backward
  };
  static constexpr int kPhases = 4;

  PhaseTimer(kernels::Backend& backend, bool on) : be_(backend), on_(on) {}
  bool on() const { return on_; }
  // Synchronizes and restarts the clock (the step begins).
  void start();
  // Synchronizes; the time since the previous start() or mark() goes to `p`.
  void mark(Phase p);
  // One more step was timed.
  void end_step() {
    if (on_) ++steps_;
  }
  // One line per phase, mean ms per step; "" when off or before the first timed step.
  std::string report() const;

 private:
  void tick(int p);
  kernels::Backend& be_;
  bool on_;
  double ms_[kPhases] = {0, 0, 0, 0};
  int steps_ = 0;
  double t0_ = 0;
};

}  // namespace recipe::core
