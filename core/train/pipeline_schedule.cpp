// Running a pipeline order on one stage (see pipeline_schedule.hpp).
#include "core/train/pipeline_schedule.hpp"

#include <algorithm>
#include <utility>

namespace recipe::core {

using kernels::Tensor;

PipelineSchedule::PipelineSchedule(std::vector<Model*> chunks, Comm& pp, int stages, int stage, bool overlap)
    : chunks_(std::move(chunks)), pp_(pp), stages_(stages), stage_(stage), overlap_(overlap && stages > 1) {}

void PipelineSchedule::train(int count, const MicroBatchFn& forward, const MicroBatchFn& backward) {
  run(training_order(stages_, stage_, int(chunks_.size()), count), forward, backward);
}

void PipelineSchedule::forward(int count, const MicroBatchFn& forward) {
  run(forward_only(stages_, stage_, count, int(chunks_.size())), forward, {});
}

void PipelineSchedule::run(const std::vector<PipeOp>& order, const MicroBatchFn& forward,
                           const MicroBatchFn& backward) {
  std::vector<int> slots;
  for (const Model* c : chunks_) slots.push_back(c->slots());
  const std::vector<PipeOp> ops = overlap_ ? overlapped_order(order, slots) : order;
  for (const PipeOp& op : ops) {
    if (!is_compute(op)) {
      exchange(op, slots);
      continue;
    }
    wait_for(op, slots);
    if (op.kind == PipeOp::forward)
      forward(op.chunk, op.m, slot(op.chunk, op.m));
    else
      backward(op.chunk, op.m, slot(op.chunk, op.m));
  }
  if (overlap_) {
    pp_.wait_all();  // the last sends (and any exchange no compute waited for) complete in the step
    started_.clear();
  }
}

void PipelineSchedule::wait_for(const PipeOp& op, const std::vector<int>& slots) {
  if (!started_.empty()) wait_for_slots(touched_slots(op, slots));
}

void PipelineSchedule::wait_for_slots(const std::vector<std::pair<int, int>>& mine) {
  for (auto it = started_.begin(); it != started_.end();) {
    const bool shared = std::any_of(it->slots.begin(), it->slots.end(), [&](const auto& s) {
      return std::find(mine.begin(), mine.end(), s) != mine.end();
    });
    if (!shared) {
      ++it;
      continue;
    }
    pp_.wait(it->op);
    it = started_.erase(it);
  }
}

// Neighbours round the ring: only the interleaved orders use the wrap (the last stage's next is
// the first), 1F1B never talks past either end.
void PipelineSchedule::exchange(const PipeOp& op, const std::vector<int>& slots) {
  const int prev = (stage_ + stages_ - 1) % stages_, next = (stage_ + 1) % stages_;
  const Model& a = *chunks_[size_t(op.chunk)];
  const int s = slot(op.chunk, op.m);
  Tensor send, recv;
  int dst = -1, src = -1;
  // The received half of a combined op: micro-batch m2 of chunk2.
  auto other = [&] { return std::pair<const Model&, int>{*chunks_[size_t(op.chunk2)], slot(op.chunk2, op.m2)}; };
  switch (op.kind) {
    case PipeOp::recv_input:
      recv = a.stage_input(s), src = prev;
      break;
    case PipeOp::send_output:
      send = a.stage_output(s), dst = next;
      break;
    case PipeOp::recv_output_grad:
      recv = a.stage_output_grad(s), src = next;
      break;
    case PipeOp::send_input_grad:
      send = a.stage_input_grad(s), dst = prev;
      break;
    case PipeOp::send_output_recv_output_grad: {
      const auto [b, s2] = other();
      send = a.stage_output(s), dst = next, recv = b.stage_output_grad(s2), src = next;
      break;
    }
    case PipeOp::send_input_grad_recv_input: {
      const auto [b, s2] = other();
      send = a.stage_input_grad(s), dst = prev, recv = b.stage_input(s2), src = prev;
      break;
    }
    case PipeOp::send_output_recv_input: {
      const auto [b, s2] = other();
      send = a.stage_output(s), dst = next, recv = b.stage_input(s2), src = prev;
      break;
    }
    case PipeOp::send_input_grad_recv_output_grad: {
      const auto [b, s2] = other();
      send = a.stage_input_grad(s), dst = prev, recv = b.stage_output_grad(s2), src = next;
      break;
    }
    case PipeOp::forward:
    case PipeOp::backward:
      return;
  }
  if (!overlap_) {
    pp_.send_recv(send, dst, recv, src);
    return;
  }
  auto mine = touched_slots(op, slots);
  // A communicator whose started ops may run at once (MPI): an earlier exchange of the same slot
  // may still read the buffer this one receives into (a slot's gradient buffer is both the dx
  // received and the dx sent), so it completes first. NCCL runs them in order on its stream.
  if (!pp_.started_ops_in_order()) wait_for_slots(mine);
  started_.push_back({pp_.send_recv_start(send, dst, recv, src), std::move(mine)});
}

}  // namespace recipe::core
