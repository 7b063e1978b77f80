// The pipeline schedule on one rank: runs a pipeline order (plan/pipeline_order.hpp: 1F1B, or
// interleaved 1F1B over several model chunks) on this stage.
//
// A schedule is a list of PipeOps (pure, testable without ranks); PipelineSchedule runs a list
// on this rank: the forward and backward of a micro-batch are the caller's (token loading, loss
// rows, gradient hooks), the sends and receives move the model chunks' stage tensors over the
// pipeline group. Where a send and a receive cross they go as one send_recv, so neighbours never
// wait on each other in a cycle. With parallelism.pp_comm_overlap the exchanges are
// started early and waited for only by the compute that touches their activation slot
// (plan/pipeline_overlap.hpp); without it each one completes at its place in the order.
#pragma once

#include <functional>
#include <vector>

#include "core/model/model.hpp"
#include "core/parallel/comm.hpp"
#include "plan/pipeline_order.hpp"
#include "plan/pipeline_overlap.hpp"

namespace recipe::core {

using plan::forward_only;
using plan::interleaved_1f1b;
using plan::is_compute;
using plan::one_f_one_b;
using plan::overlapped_order;
using plan::pipeline_slots;
using plan::PipeOp;
using plan::to_string;
using plan::touched_slots;
using plan::training_order;

class PipelineSchedule {
 public:
  // `pp`: the pipeline group (rank = stage). `chunks`: this stage's model chunks, local chunk c
  // first (one Model each, holding the chunk's layers and slots). `overlap`: start the exchanges
  // early (parallelism.pp_comm_overlap).
  PipelineSchedule(std::vector<Model*> chunks, Comm& pp, int stages, int stage, bool overlap = false);

  // Micro-batch m of chunk c lives in activation slot m mod slots of that chunk's model.
  int slot(int chunk, int m) const { return m % chunks_[size_t(chunk)]->slots(); }
  using MicroBatchFn = std::function<void(int chunk, int m, int slot)>;
  // One step's micro-batches on this stage: 1F1B, or interleaved 1F1B with several chunks.
  void train(int count, const MicroBatchFn& forward, const MicroBatchFn& backward);
  // Forwards only.
  void forward(int count, const MicroBatchFn& forward);

 private:
  void run(const std::vector<PipeOp>& ops, const MicroBatchFn& forward, const MicroBatchFn& backward);
  // Sends and receives the tensors of one exchange op: at once (blocking), or started (overlap).
  void exchange(const PipeOp& op, const std::vector<int>& slots);
  // Overlap: waits for the started exchanges that touch the slot of forward/backward `op`.
  void wait_for(const PipeOp& op, const std::vector<int>& slots);
  void wait_for_slots(const std::vector<std::pair<int, int>>& mine);
  std::vector<Model*> chunks_;
  Comm& pp_;
  int stages_, stage_;
  bool overlap_;
  // Overlap: the started exchanges not waited for yet, with the (chunk, slot) pairs they touch.
  struct Started {
    Comm::Op op;
    std::vector<std::pair<int, int>> slots;
  };
  std::vector<Started> started_;
};

}  // namespace recipe::core
