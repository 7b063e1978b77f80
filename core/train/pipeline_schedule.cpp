// Running a pipeline order on one stage (see pipeline_schedule.hpp).
#include "core/train/pipeline_schedule.hpp"

#include <utility>

namespace recipe::core {

using kernels::Tensor;

PipelineSchedule::PipelineSchedule(std::vector<Model*> chunks, Comm& pp, int stages, int stage)
    : chunks_(std::move(chunks)), pp_(pp), stages_(stages), stage_(stage) {}

void PipelineSchedule::train(int count, const MicroBatchFn& forward, const MicroBatchFn& backward) {
  run(training_order(stages_, stage_, int(chunks_.size()), count), forward, backward);
}

void PipelineSchedule::forward(int count, const MicroBatchFn& forward) {
  run(forward_only(stages_, stage_, count, int(chunks_.size())), forward, {});
}

// Neighbours round the ring: only the interleaved orders use the wrap (the last stage's next is
// the first), 1F1B never talks past either end.
void PipelineSchedule::run(const std::vector<PipeOp>& ops, const MicroBatchFn& forward, const MicroBatchFn& backward) {
  const int prev = (stage_ + stages_ - 1) % stages_, next = (stage_ + 1) % stages_;
  for (const PipeOp& op : ops) {
    const Model& a = *chunks_[size_t(op.chunk)];
    const int s = slot(op.chunk, op.m);
    // The received half of a combined op: micro-batch m2 of chunk2.
    auto other = [&] { return std::pair<const Model&, int>{*chunks_[size_t(op.chunk2)], slot(op.chunk2, op.m2)}; };
    switch (op.kind) {
      case PipeOp::forward:
        forward(op.chunk, op.m, s);
        break;
      case PipeOp::backward:
        backward(op.chunk, op.m, s);
        break;
      case PipeOp::recv_input:
        pp_.send_recv(Tensor(), -1, a.stage_input(s), prev);
        break;
      case PipeOp::send_output:
        pp_.send_recv(a.stage_output(s), next, Tensor(), -1);
        break;
      case PipeOp::recv_output_grad:
        pp_.send_recv(Tensor(), -1, a.stage_output_grad(s), next);
        break;
      case PipeOp::send_input_grad:
        pp_.send_recv(a.stage_input_grad(s), prev, Tensor(), -1);
        break;
      case PipeOp::send_output_recv_output_grad: {
        const auto [b, s2] = other();
        pp_.send_recv(a.stage_output(s), next, b.stage_output_grad(s2), next);
        break;
      }
      case PipeOp::send_input_grad_recv_input: {
        const auto [b, s2] = other();
        pp_.send_recv(a.stage_input_grad(s), prev, b.stage_input(s2), prev);
        break;
      }
      case PipeOp::send_output_recv_input: {
        const auto [b, s2] = other();
        pp_.send_recv(a.stage_output(s), next, b.stage_input(s2), prev);
        break;
      }
      case PipeOp::send_input_grad_recv_output_grad: {
        const auto [b, s2] = other();
        pp_.send_recv(a.stage_input_grad(s), prev, b.stage_output_grad(s2), next);
        break;
      }
    }
  }
}

}  // namespace recipe::core
