// The pipeline schedule: in which order one pipeline stage runs the forwards and backwards of a
// step's micro-batches and exchanges stage tensors with its neighbours. Training uses 1F1B
// (Megatron's non-interleaved schedule): stage k of P first runs P-k-1 warm-up forwards, then
// alternates one forward and one backward, then runs the remaining backwards, so at most P-k
// micro-batches are in flight on it (its activation slots). With one stage it is F0 B0 F1 B1 ...
// Evaluation runs forwards only.
//
// A schedule is a list of PipeOps (pure, testable without ranks); PipelineSchedule runs a list
// on this rank: the forward and backward of a micro-batch are the caller's (token loading, loss
// rows, gradient hooks), the sends and receives move the model's stage tensors over the pipeline
// group. Where a send and a receive with the same neighbour cross in the steady state they go as
// one send_recv, so neighbours never wait on each other in a cycle.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/model/model.hpp"
#include "core/parallel/comm.hpp"

namespace recipe::core {

struct PipeOp {
  enum Kind : uint8_t {
    forward,                       // forward of micro-batch m
    backward,                      // backward of m
    recv_input,                    // m's stage input from the previous stage
    send_output,                   // m's stage output to the next stage
    recv_output_grad,              // d(m's stage output) from the next stage
    send_input_grad,               // d(m's stage input) to the previous stage
    send_output_recv_output_grad,  // m's output to the next stage, d(m2's output) from it
    send_input_grad_recv_input,    // d(m's input) to the previous stage, m2's input from it
  };
  Kind kind = forward;
  int m = 0;
  int m2 = -1;  // the received micro-batch of a combined send_recv
  bool operator==(const PipeOp&) const = default;
};

// The training order of stage `stage` of `stages` over `count` micro-batches (1F1B). Sends and
// receives appear only where there is a neighbour (none before the first stage or after the last).
std::vector<PipeOp> one_f_one_b(int stages, int stage, int count);
// The forward-only order: receive m's input, forward m, send m's output.
std::vector<PipeOp> forward_only(int stages, int stage, int count);
// Activation slots a stage needs under 1F1B: the micro-batches in flight on it at once.
int pipeline_slots(int stages, int stage, int count);
// One token per op, for tests and messages: F3 / B3 (forward / backward of micro-batch 3), Sx3 /
// Rx3 (send / receive its stage output / input), Sdx3 / Rdx3 (the same for its gradient), and
// "Sx3|Rdx0" for a combined send_recv.
std::string to_string(const std::vector<PipeOp>& ops);

class PipelineSchedule {
 public:
  // `pp`: the pipeline group (rank = stage). The model holds this stage's layers and slots.
  PipelineSchedule(Model& model, Comm& pp, int stages, int stage);

  // Micro-batch m lives in activation slot m mod slots.
  int slot(int m) const { return m % model_.slots(); }
  using MicroBatchFn = std::function<void(int m, int slot)>;
  // One step's micro-batches on this stage, 1F1B.
  void train(int count, const MicroBatchFn& forward, const MicroBatchFn& backward);
  // Forwards only.
  void forward(int count, const MicroBatchFn& forward);

 private:
  void run(const std::vector<PipeOp>& ops, const MicroBatchFn& forward, const MicroBatchFn& backward);
  Model& model_;
  Comm& pp_;
  int stages_, stage_;
};

}  // namespace recipe::core
