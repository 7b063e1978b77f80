// The objective as a component: what the step minimizes, seen from the classifier. The classifier
// (Model::forward's fused logits → loss → dlogits) writes every token row's loss into the
// trainer's losses buffer and, training, scales row r's dlogits by dloss[r]: the gradient of the
// objective with respect to that row's loss. A Loss owns those per-row weights (how they follow from
// the batch: masks, token counts, micro-batch scaling) and the value the step reports.
//
// Memory: dloss rows, f32 [micro-batches, N] (N = Model::rows(), one micro-batch per row of the
// buffer), allocated once through the backend when the Loss is made; nothing is allocated in the
// step. CUDA graphs: prepare(s) runs on the host before the step's work is enqueued or launched, so
// a recorded step reads whatever the buffer holds at replay. A Loss whose weights change from step
// to step says so in graph_off() (the step then runs uncaptured); one whose weights are fixed
// writes them before the warm-up step and never again, so every replay reads the same values.
//
// Adding an objective (e.g. DPO: per-sequence log-probs, then a per-row gradient) is one file
// beside cross_entropy.cpp that implements Loss, and one line in make_loss (loss.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/data/sample_source.hpp"
#include "kernels/ops.hpp"
#include "plan/plan.hpp"

namespace recipe::core {

// What a Loss needs to know about the step it serves (all fixed for the run).
struct LossContext {
  kernels::Backend* backend = nullptr;
  const data::SampleSource* train = nullptr;  // the training stream (masks, trained token counts)
  int64_t global_batch = 0;                   // sequences per optimizer step, over all DP ranks
  int64_t seq = 0;                            // tokens per sequence
  int micro_batches = 1;                      // micro-batches per step on this rank
  int64_t rows = 0;                           // token rows of one micro-batch on this rank (Model::rows())
};

class Loss {
 public:
  explicit Loss(const LossContext& ctx);
  virtual ~Loss();
  Loss(const Loss&) = delete;
  Loss& operator=(const Loss&) = delete;

  virtual std::string name() const = 0;
  // Writes step s's per-row weights into the dloss rows (host side, outside any recording; a
  // no-op when they already hold them). Call before the step's work is enqueued.
  virtual void prepare(int s) = 0;
  // What step s's summed per-row losses divide by (tokens for cross-entropy): the reported value
  // is loss_sum / denominator(s), and the divergence guard scales its limit by it.
  virtual double denominator(int s) const = 0;
  // The value the step reports, from the world sum of step s's per-row losses.
  double value(int s, double loss_sum) const { return loss_sum / denominator(s); }
  // Why a recorded (CUDA-graph) step could not replay this objective ("" = it can).
  virtual std::string graph_off() const = 0;

  // Micro-batch m's per-row weights, f32 [rows] in backend memory (as of the last prepare).
  kernels::Tensor dloss(int m) const { return dloss_.rows(m, 1).view({ctx_.rows}); }

 protected:
  // Uploads host f32 [micro_batches, rows] into the dloss rows (synchronous; outside recordings).
  void upload(const std::vector<float>& rows);
  const LossContext& context() const { return ctx_; }

 private:
  LossContext ctx_;
  void* buf_ = nullptr;
  kernels::Tensor dloss_;  // f32 [micro_batches, rows]
};

// The plan's objective (cross-entropy today: the only one).
std::unique_ptr<Loss> make_loss(const plan::Plan& plan, const LossContext& ctx);

}  // namespace recipe::core
