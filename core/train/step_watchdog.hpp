// The step watchdog (trainer.step_timeout_s): ends a run whose training makes no progress — a rank
// stopped (SIGSTOP, a frozen node), hung in a kernel, or waiting forever in a collective for such a
// peer — instead of letting it hold its GPUs until the time limit.
//
// The training loop marks progress (`enter(step, phase)` at each phase of a step); a thread of its
// own checks it. When no mark came for the limit, the watchdog describes the hang (this rank's step
// and phase, and what every other rank last reported, naming the ranks that stopped responding)
// and calls `on_hang`, which records the outcome and ends the process: the training thread is
// stuck, so nothing returns to it.
//
// The limit is max(trainer.step_timeout_s, 10 × the slowest step seen since the first), so a slow
// model is not cut off by a floor meant for fast ones; the first step (graph capture, autotuning)
// is not measured. Saving and loading checkpoints are not watched (`Paused`): writing a large
// checkpoint to a slow file system may take longer than any step.
//
// So that one rank can name another, each rank's watchdog writes its last progress to
// `<dir>/rank-<r>` every poll (one line: step, phase, seconds since the epoch of the last mark and
// of the write; a stopped process stops writing). `dir` is in the run dir, shared by the ranks of
// one host and, on clusters, usually by all; a rank whose file is missing is left out of the report.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace recipe::core {

class StepWatchdog {
 public:
  // floor_seconds ≤ 0: off (no thread, every call returns at once). `on_hang` runs on the
  // watchdog's thread with the report and must not return (it exits the process); when it is
  // empty, the report goes to stderr and the process exits with kExitHung.
  StepWatchdog(double floor_seconds, int rank, int world, std::string dir,
               std::function<void(const std::string& report)> on_hang);
  ~StepWatchdog();
  StepWatchdog(const StepWatchdog&) = delete;
  StepWatchdog& operator=(const StepWatchdog&) = delete;

  bool on() const { return floor_ > 0; }
  // Progress: step `step` (1-based, the step being computed) entered `phase` (a string literal).
  void enter(int step, const char* phase);
  // A step finished in `seconds`; steps after the first raise the limit to 10 × the slowest.
  void step_done(double seconds);
  double limit_seconds() const { return limit_.load(); }

  // Not watched while it lives (checkpoint save and load).
  class Paused {
   public:
    explicit Paused(StepWatchdog& w) : w_(w) { w_.paused_.fetch_add(1); }
    ~Paused() {
      w_.paused_.fetch_sub(1);
      w_.mark();
    }
    Paused(const Paused&) = delete;
    Paused& operator=(const Paused&) = delete;

   private:
    StepWatchdog& w_;
  };

  // The rank files' directory inside a run dir.
  static std::string dir_in(const std::string& run_dir);

 private:
  void mark();
  void loop();
  // `writer`: a distinct temporary-file suffix per writing thread (0 training, 1 poll), so two
  // threads never write one temporary file; the rename makes each version whole.
  void write_progress(double now_wall, int writer = 1) const;
  std::string report(double stalled_seconds, double now_wall) const;

  const double floor_;
  const int rank_, world_;
  const std::string dir_;
  const std::function<void(const std::string&)> on_hang_;
  const double poll_seconds_;

  std::atomic<double> limit_;
  std::atomic<int> step_{0};
  std::atomic<const char*> phase_{"start"};
  std::atomic<uint64_t> marks_{0};      // bumped by every enter()
  std::atomic<double> marked_at_{0};    // steady seconds of the last mark
  std::atomic<double> marked_wall_{0};  // epoch seconds of the last mark (for the rank files)
  std::atomic<int> paused_{0};
  int steps_seen_ = 0;  // training thread only

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace recipe::core
