// The device training step as one CUDA-graph launch (trainer.cuda_graph). The first step runs the
// step's work eagerly as the warm-up (cuBLASLt algorithm timing, cuDNN graph building), the second
// records it and launches the recording, every later step launches it again. The recording holds
// the pointers and arguments of its ops, so the values that change every step reach it through
// memory: the caller writes the step's tokens into this object's page-locked staging before
// run(), and the recorded work copies them to the device (upload_tokens) first. The optimizer's
// per-step scalars go the same way through the optimizer's own staging (Optimizer::stage,
// upload_staged: core/train/optimizer.hpp); the loss's per-row weights are fixed while captured
// (core/train/loss.hpp).
//
// Staging layout: tokens i32 [micro_batches, 2, N] — micro-batch m's inputs [N], then its
// targets [N].
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "kernels/ops.hpp"

namespace recipe::core {

class StepGraph {
 public:
  // `off`: why the step is not to be captured ("" = capture it). On, it allocates the staging;
  // if that fails it is off with the reason (one stderr line) and the step runs uncaptured.
  StepGraph(kernels::Backend& backend, int micro_batches, int64_t rows, std::string off);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // The step goes through this object (staged inputs; warm-up, capture or replay).
  bool on() const { return on_; }
  // The step is recorded: run() launches the recording.
  bool active() const { return work_ != nullptr; }
  int steps() const { return steps_; }  // steps run as a graph launch so far
  // Why the step is not captured ("" while it is, or while the capture is still to come).
  const std::string& status() const { return status_; }

  // ---- filling the staging (host, before run()) ----
  // Every step ends with a read-back that waits for the stream, so no launch still reads the
  // staging when the next step fills it; the synchronize here only guards that invariant.
  void begin_staging() { be_.synchronize(); }
  int32_t* inputs(int m) { return tokens_ + size_t(2 * m) * size_t(rows_); }
  int32_t* targets(int m) { return inputs(m) + rows_; }

  // ---- inside the step's work (recordable) ----
  void upload_tokens(int m, kernels::Tensor inputs, kernels::Tensor targets);
  // Before the first step: another part of the step could not get its staging (`why`); the
  // step runs uncaptured (one notice says why).
  void turn_off(const std::string& why);

  // Runs the step: the warm-up calls `work` (which reads only device memory and the staging),
  // the next call records it and launches the recording, later calls launch it. Returns false
  // when off — also on the call whose capture failed (one stderr line says why): the caller
  // then runs the step uncaptured.
  bool run(const std::function<void()>& work);

 private:
  kernels::Backend& be_;
  int64_t rows_;
  std::string status_;
  bool on_;
  bool warm_ = false;  // the warm-up step ran (uncaptured)
  std::unique_ptr<kernels::RecordedWork> work_;
  int steps_ = 0;
  int32_t* tokens_ = nullptr;  // page-locked staging, see above
};

}  // namespace recipe::core
