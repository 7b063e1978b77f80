// Synchronized phase timing of the device step (see phase_timer.hpp).
#include "core/train/phase_timer.hpp"

#include <chrono>
#include <cstdio>

namespace recipe::core {

void PhaseTimer::start() { tick(-1); }
void PhaseTimer::mark(Phase p) { tick(int(p)); }

// Phase p ends now: synchronize and add the time since the previous mark (p = -1 only restarts).
void PhaseTimer::tick(int p) {
  if (!on_) return;
  be_.synchronize();
  const double now =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
  if (p >= 0) ms_[p] += now - t0_;
  t0_ = now;
}

std::string PhaseTimer::report() const {
  if (!on_ || steps_ == 0) return "";
  static const char* names[kPhases] = {"forward+backward (all micro-batches)", "grad norm + clip + AdamW",
                                       "loss/norm read-back", "forward alone (one extra micro-batch)"};
  std::string r = "phase timing (kernels.phase_timing, mean ms/step over " + std::to_string(steps_) +
                  " steps, synchronized between phases):\n";
  for (int i = 0; i < kPhases; ++i) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "  %-40s %9.3f ms\n", names[i], ms_[i] / steps_);
    r += buf;
  }
  return r;
}

}  // namespace recipe::core
