// The trainer: one rank's training state (parameters, model, optimizer, data streams) and the
// training step (Trainer::step: per micro-batch tokens → forward → backward with the DP reduction,
// then lr, grad norm, clip, AdamW). Beside the step, each in its own file: the 1F1B pipeline
// schedule (pipeline_schedule.hpp), the CUDA-graph capture and replay (step_graph.hpp), the
// phase timer (phase_timer.hpp) and the token loading (token_loader.hpp). `train()`
// (train_run.cpp) is the training loop: a whole run from a plan with progress output,
// metrics.jsonl/timing.jsonl, validation, checkpoints and the NaN/inf guard.
#pragma once

#include <cstdint>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/data/sample_source.hpp"
#include "core/train/grad_sync.hpp"
#include "core/model/model.hpp"
#include "core/train/loss.hpp"
#include "core/train/optimizer.hpp"
#include "core/parallel/parallel_state.hpp"
#include "core/model/param_store.hpp"
#include "core/train/phase_timer.hpp"
#include "core/train/pipeline_schedule.hpp"
#include "core/train/step_graph.hpp"
#include "core/train/token_loader.hpp"
#include "plan/plan.hpp"
#include "kernels/ops.hpp"

namespace recipe::core {

struct TrainOptions {
  std::string run_dir;          // metrics.jsonl, timing.jsonl written here; "" = write nothing
  std::ostream* log = nullptr;  // progress lines (nullptr = std::cout)
  std::ostream* err = nullptr;  // notices of slower paths taken (Backend::take_notices; nullptr = std::cerr)
  bool interactive = false;     // true: redraw one progress line (\r) on a terminal; false: plain lines
  // The parallel world (nullptr: train() bootstraps it from the plan and the launcher).
  ParallelState* parallel = nullptr;
  // The resolved plan as TOML (the run dir's resolved.toml), stored in every checkpoint.
  std::string plan_toml;
  // The step watchdog's report when training made no progress for trainer.step_timeout_s (called
  // on the watchdog's thread; must end the process, e.g. record the run's status and _exit with
  // kExitHung). Empty: the report goes to stderr and the process exits with kExitHung.
  std::function<void(const std::string& report)> on_hang;
  // Optional: set to the steps done after each step (and to the resumed step at start), so a
  // signal handler can record how far the run got without calling into the trainer.
  std::atomic<int>* steps_done = nullptr;
};

struct TrainResult {
  int steps_done = 0;
  double first_loss = 0, last_loss = 0;
  double last_val_loss = -1;  // -1 = never evaluated
  double tokens_per_sec = 0;  // mean over steps after the first 10% (≥1)
  double mean_step_ms = 0;
  size_t peak_memory_bytes = 0;
  bool diverged = false;        // NaN/inf guard fired
  std::string message;          // human summary / failure reason
  int resumed_from_step = -1;   // the checkpoint step a resumed run continued from; -1 = fresh
  std::string last_checkpoint;  // the newest checkpoint this run saved ("" = none)
  int stop_signal = 0;          // != 0: stopped early on this signal (after saving a checkpoint)
};

// Runs the whole training described by the plan (plan.trainer.device is "cpu" or "cuda"; "auto"
// picks CUDA when a GPU is usable).
//
// Checkpoints go to checkpoint.dir (default <run dir>/checkpoints; none without either) every
// checkpoint.save_interval steps, after the last step (checkpoint.save_final), and when a stop is
// requested (core/train/stop_request.hpp). A run whose checkpoint dir already holds one resumes from its
// `latest` (a requeued or resubmitted job); otherwise checkpoint.load, if set, is loaded: resumed
// for mode="pretrain", weights only for mode="finetune". Setup problems (bad plan values, missing data files, no GPU)
// throw std::runtime_error / std::invalid_argument with an actionable message; a diverging run
// returns with diverged = true and the reason in `message`.
TrainResult train(const plan::Plan& plan, const TrainOptions& opts);

// The backend options train() builds its backend with: the plan's `kernels` section,
// trainer.deterministic and trainer.cpu_threads.
kernels::BackendOptions backend_options(const plan::Plan& plan);

struct StepResult {
  int step = 0;     // 1-based number of the step just taken
  double loss = 0;  // mean loss over the global batch
  double lr = 0, grad_norm = 0, clip_factor = 1;
  int64_t consumed_samples = 0;  // after this step
  bool finite = true;            // false: diverged (see below), weights not updated
};

// The divergence guard: a step whose loss or grad norm is NaN/inf, or whose loss exceeds
// 100·ln(vocab) (uniform guessing scores ln(vocab); no healthy run gets near 100× that, while a
// run with an absurd learning rate reaches 1e10+ long before it overflows), is not applied.
double divergence_loss_limit(int vocab_size);

class Trainer {
 public:
  // Data streams from the plan (data::make_train_source / make_valid_source). `parallel` may be
  // null: the single-process world.
  Trainer(const plan::Plan& plan, kernels::Backend& backend, ParallelState* parallel = nullptr);
  // Explicit data streams (tests, tools); `valid` may be null.
  Trainer(const plan::Plan& plan, kernels::Backend& backend, ParallelState* parallel,
          std::unique_ptr<data::SampleSource> train, std::unique_ptr<data::SampleSource> valid);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One optimizer step over the global batch of step steps_done().
  StepResult step();
  // Zeroes the gradients and accumulates those of the global batch of step `s` (no update), reduced
  // over data parallelism (under ZeRO-1 only this rank's chunks hold the sums). Returns the mean
  // loss. step() is this plus the optimizer.
  double compute_gradients(int s);
  // Mean loss over the global batch of step `s`, forward only (gradients untouched).
  double compute_loss(int s);
  // Mean loss over the first trainer.eval_samples samples of the validation stream (the same
  // samples at every evaluation and at every layout). Throws std::logic_error when there is no
  // validation stream.
  double evaluate();
  bool has_validation() const { return valid_ != nullptr; }
  // Sequences one pass over the validation stream holds (0 without one): an eval_samples above it
  // reads some of them more than once.
  int64_t validation_sequences() const { return valid_ ? valid_->size() : 0; }

  int steps_done() const { return steps_done_; }
  // Continue from `steps` completed steps (a resumed checkpoint): the next step() is step
  // `steps`, with its learning rate, Adam bias correction and data samples.
  void restore_steps_done(int steps) { steps_done_ = steps; }
  int64_t consumed_samples() const { return int64_t(steps_done_) * global_batch_; }
  double last_loss() const { return last_loss_; }
  int num_micro_batches() const { return num_micro_; }
  int64_t global_batch() const { return global_batch_; }
  int64_t tokens_per_step() const { return global_batch_ * int64_t(shape_.seq); }
  double flops_per_token() const { return flops_per_token_; }

  const plan::Plan& plan() const { return plan_; }
  const ModelShape& shape() const { return shape_; }
  kernels::Backend& backend() const { return backend_; }
  ParamStore& params() { return *params_; }
  // The model of this rank: its first model chunk, or (parallelism.virtual_pp) chunk `c` of them.
  Model& model(int c = 0) { return *chunks_.at(size_t(c)); }
  int num_chunks() const { return int(chunks_.size()); }
  // The optimizer component (optimizer.kind): its state tensors, checkpoint names, staging.
  const Optimizer& optimizer() const { return *optimizer_; }
  const GradSync& grad_sync() const { return *grad_sync_; }
  // Makes every rank's f32 master weights whole again (ZeRO-1 with a bf16 compute copy keeps them
  // current only in this rank's chunks); call before reading or saving whole master tensors.
  // The compute weights too (complete_weights first).
  void gather_master_weights() {
    complete_weights();
    grad_sync_->gather_masters(*params_);
  }
  // Makes every rank's compute weights whole: ZeRO-1's overlapped gather
  // (parallelism.zero1_overlap_gather) leaves them current only in this rank's chunks after a
  // step, until the next step's forward. Collective over DP; evaluation, checkpoint saving and the
  // end of train() call it; call it before reading weights after step().
  void complete_weights() { grad_sync_->complete_weights(*params_); }
  // Global L2 norm of the reduced gradients (every parameter counted once over the world).
  double global_grad_norm();
  // True when step() runs without waiting for the host between backward and AdamW (CUDA, any
  // layout): the clip factor and the divergence guard are computed on the device
  // (Backend::grad_norm_clip; with several ranks Backend::norm_loss_sums, a world all-reduce on the
  // device and Backend::clip_from_sums) and the step's one wait is the read-back of loss and norm.
  // kernels.host_clip=true forces the host path (for A/B timing).
  bool device_step() const { return device_step_; }
  // True once step() replays the whole device step (token upload, forward/backward of every
  // micro-batch, norm + clip + guard, AdamW) as one CUDA-graph launch: trainer.cuda_graph on the
  // device step. The first step runs uncaptured as the warm-up (cuBLASLt algorithm timing, cuDNN
  // graph building), the second is captured and every later one is a replay. Per-step values
  // reach the graph through memory: the tokens and the lr / Adam bias corrections are written to
  // page-locked staging that the graph's copy nodes read. Off with trainer.cuda_graph=false or
  // kernels.phase_timing=true, and after a failed capture (one backend notice says
  // why; the step then runs uncaptured).
  bool graph_active() const { return graph_->active(); }
  int graph_steps() const { return graph_->steps(); }  // steps run as a graph launch so far
  // Why the step is not captured ("" while it is, or while the capture is still to come).
  const std::string& graph_status() const { return graph_->status(); }
  // With kernels.phase_timing=true, step() synchronizes between phases and times
  // them (this perturbs the step slightly); "" otherwise. One line per phase, mean ms per step.
  std::string phase_report() const { return phases_->report(); }
  ParallelState& parallel() { return *parallel_; }

 private:
  int64_t first_sample(int s, int m) const;
  void sum_over_context_parallel();
  void fp8_end_step();  // FP8 delayed scaling: the amax histories roll (trainer.cpp)
  // The device step (device_step()): its work in launch order, eager or recorded (staged: the
  // per-step values come from the graph's staging); the staging of step s; phase timing's extra
  // forward.
  void enqueue_device_step(int s, bool staged);
  void stage_step_inputs(int s);
  void time_forward_alone();
  // Forward (and with_grad: backward) of `count` micro-batches through this pipeline stage in the
  // schedule's order (1F1B or interleaved 1F1B when training), gradients reduced over DP at the end. sample_of(m):
  // the first sample of micro-batch m. Returns this rank's share of the loss sum (the last
  // stage's TP rank 0 holds it; 0 elsewhere).
  // The gradient of each token row's loss is scaled by the loss component's weight for that row
  // (loss_->dloss(m), written by loss_->prepare before).
  double run_micro_batches(const data::SampleSource& src, const std::function<int64_t(int)>& sample_of, bool with_grad,
                           int count);
  // The same work, enqueued only (no read-back); staged: the tokens come from the graph's staging.
  void enqueue_micro_batches(const data::SampleSource& src, const std::function<int64_t(int)>& sample_of,
                             bool with_grad, int count, bool staged);
  void backward_micro(int chunk, int m, int slot, int count);
  double world_loss_sum(double local);
  double sum_losses(int64_t count);

  bool device_step_ = false;
  void* norm_clip_buf_ = nullptr;  // f32 [2]: ‖g‖, clip factor (NaN = skip)
  kernels::Tensor norm_clip_;
  void* world_sums_buf_ = nullptr;  // f64 [2], several ranks: Σ g², Σ losses (this rank's, then the world's)
  kernels::Tensor world_sums_;
  std::unique_ptr<PhaseTimer> phases_;
  std::unique_ptr<StepGraph> graph_;

  plan::Plan plan_;
  kernels::Backend& backend_;
  std::unique_ptr<ParallelState> owned_parallel_;
  ParallelState* parallel_;
  ModelShape shape_;
  std::unique_ptr<data::SampleSource> train_, valid_;
  std::unique_ptr<ParamStore> params_;
  // One model per model chunk this rank holds (one without virtual pipeline stages); model_ is the
  // first, the only one of the single-rank device step.
  std::vector<std::unique_ptr<Model>> chunks_;
  Model* model_ = nullptr;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Loss> loss_;  // the objective: per-row gradient weights and the reported value
  std::unique_ptr<PipelineSchedule> schedule_;
  std::unique_ptr<TokenLoader> loader_;
  int micro_ = 0, dp_ = 1, dp_rank_ = 0, num_micro_ = 1;
  int pp_ = 1, pp_rank_ = 0;
  bool loss_holder_ = true;  // the last stage's TP rank 0: its per-token losses are the ones summed
  std::unique_ptr<GradSync> grad_sync_;
  std::vector<std::pair<int64_t, int64_t>> norm_ranges_;
  int64_t global_batch_ = 0;
  double flops_per_token_ = 0;
  void* losses_buf_ = nullptr;  // f32 [num_micro, B·T] (device)
  kernels::Tensor losses_;
  std::vector<float> host_losses_;
  int steps_done_ = 0;
  double last_loss_ = 0;
};

}  // namespace recipe::core
