// The optimizer as a component. An Optimizer owns its state tensors (flat f32 buffers over this
// rank's segments), their checkpoint names, and the per-step scalars a CUDA-graph recording reads
// from memory (its graph staging). ParamStore keeps only what every optimizer shares (master
// weights, compute copy, gradients); the optimizer asks it for flat spans of those.
//
// Memory: each state tensor is f32 [state_numel]; a segment's run [offset, offset+numel) of the
// layout lives at [state_offset, state_offset+numel) of every state tensor. Unsharded the offsets
// are the layout's (state_numel = trainable_numel); under ZeRO-1 only this DP rank's chunk of every
// gradient bucket, packed back to back (GradSync::optimizer_segments, GradSync::state_numel).
// Allocated once, zero-filled, when the optimizer is made.
//
// Adding an optimizer (selected by optimizer.kind): one file beside adamw.cpp that implements this
// interface (its state list, step, staging), and one line in make_optimizer (optimizer.cpp) — plus
// the enum value in plan::OptimizerKind that selects it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/param_store.hpp"
#include "core/train/lr_schedule.hpp"
#include "kernels/ops.hpp"
#include "plan/plan.hpp"

namespace recipe::core {

// A run of the flat buffers one update call covers: [offset, offset+numel) of the master weights,
// compute copy and gradients, [state_offset, state_offset+numel) of the optimizer's state, all in
// one weight-decay group. Unsharded: the two groups (whole_groups), state offsets = layout offsets.
// ZeRO-1: this DP rank's chunk of every gradient bucket, the state packed back to back.
struct OptimizerSegment {
  int64_t offset = 0, numel = 0, state_offset = 0;
  bool decay = false;
};
std::vector<OptimizerSegment> whole_groups(const ParamLayout& layout);

// One state tensor: a checkpoint writes its run for parameter p as `checkpoint_prefix + p.name`.
struct OptimizerState {
  // e.g. "optimizer.exp_avg." (the names old checkpoints hold). Starts with "optimizer.": loading
  // weights skips those names (core/train/checkpointing.cpp).
  std::string checkpoint_prefix;
  kernels::Tensor data;  // f32 [state_numel], backend memory
};

class Optimizer {
 public:
  // `segments` and `state_numel`: this rank's share (see above). The implementation's constructor
  // declares its state tensors (add_state), which this base allocates and frees.
  Optimizer(kernels::Backend& backend, const plan::OptimizerConfig& cfg, LrSchedule schedule,
            std::vector<OptimizerSegment> segments, int64_t state_numel);
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string name() const = 0;
  // The state tensors, in a fixed order (what checkpoints save and load).
  const std::vector<OptimizerState>& state() const { return state_; }
  const OptimizerState& state(std::string_view checkpoint_prefix) const;
  int64_t state_numel() const { return state_numel_; }
  size_t state_bytes() const { return size_t(state_.size()) * size_t(state_numel_) * sizeof(float); }
  const std::vector<OptimizerSegment>& segments() const { return segments_; }

  // The host step (CPU, kernels.host_clip): update with lr = schedule(step) (0-based step),
  // gradients multiplied by grad_scale (the clip factor).
  virtual void step(ParamStore& store, int step, float grad_scale) = 0;
  // The step that never waits for the host: the clip factor is read from norm_clip[1] (f32 [2] in
  // backend memory, written by Backend::grad_norm_clip or clip_from_sums; NaN there skips the
  // update on the backend).
  virtual void step_device(ParamStore& store, int step, kernels::Tensor norm_clip) = 0;

  // ---- CUDA graph (StepGraph): the per-step scalars reach a recording through memory ----
  // Allocates the page-locked staging and the device copy a recording reads; "" on success, else
  // why not (the step then runs uncaptured). Called once, before the first step, if capturing.
  virtual std::string enable_graph_staging() = 0;
  // Host, before the step is launched: step s's scalars into the staging.
  virtual void stage(int step) = 0;
  // Inside the recorded work, before step_recorded: staging → device.
  virtual void upload_staged() = 0;
  // The update as recorded once and replayed every step: exactly the kernels step_device
  // launches, with bitwise the same per-step values, read from the uploaded staging.
  virtual void step_recorded(ParamStore& store, kernels::Tensor norm_clip) = 0;

  const LrSchedule& schedule() const { return schedule_; }
  const plan::OptimizerConfig& config() const { return cfg_; }

 protected:
  // Allocates one zero-filled state tensor (f32 [state_numel]) named by its checkpoint prefix.
  void add_state(std::string checkpoint_prefix);
  // [offset, offset+n) of state tensor i (a segment's run: state_offset, numel), bounds-checked.
  kernels::Tensor state_span(size_t i, int64_t offset, int64_t n) const;
  kernels::Backend& backend() const { return be_; }

 private:
  kernels::Backend& be_;
  plan::OptimizerConfig cfg_;
  LrSchedule schedule_;
  std::vector<OptimizerSegment> segments_;
  int64_t state_numel_ = 0;
  std::vector<OptimizerState> state_;
  std::vector<void*> bufs_;
};

// The plan's optimizer (optimizer.kind; AdamW is the only one). Throws std::invalid_argument for
// bad hyperparameters.
std::unique_ptr<Optimizer> make_optimizer(const plan::Plan& plan, kernels::Backend& backend,
                                          std::vector<OptimizerSegment> segments, int64_t state_numel);

}  // namespace recipe::core
