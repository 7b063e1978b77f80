// 1F1B and forward-only pipeline orders, and running them on one stage (see pipeline_schedule.hpp).
#include "core/train/pipeline_schedule.hpp"

#include <algorithm>

namespace recipe::core {

using kernels::Tensor;

std::vector<PipeOp> one_f_one_b(int stages, int stage, int count) {
  const bool first = stage == 0, last = stage == stages - 1;
  const int warmup = std::min(stages - stage - 1, count);
  const int steady = count - warmup;
  std::vector<PipeOp> ops;
  auto add = [&](PipeOp::Kind k, int m, int m2 = -1) { ops.push_back({k, m, m2}); };
  for (int m = 0; m < warmup; ++m) {
    if (!first) add(PipeOp::recv_input, m);
    add(PipeOp::forward, m);
    if (!last) add(PipeOp::send_output, m);
  }
  if (steady > 0 && !first) add(PipeOp::recv_input, warmup);
  for (int i = 0; i < steady; ++i) {
    const int mf = warmup + i, mb = i;
    add(PipeOp::forward, mf);
    if (!last) add(PipeOp::send_output_recv_output_grad, mf, mb);
    add(PipeOp::backward, mb);
    if (first) continue;
    if (i == steady - 1)
      add(PipeOp::send_input_grad, mb);
    else
      add(PipeOp::send_input_grad_recv_input, mb, mf + 1);
  }
  for (int i = 0; i < warmup; ++i) {
    const int mb = steady + i;
    if (!last) add(PipeOp::recv_output_grad, mb);
    add(PipeOp::backward, mb);
    if (!first) add(PipeOp::send_input_grad, mb);
  }
  return ops;
}

std::vector<PipeOp> forward_only(int stages, int stage, int count) {
  std::vector<PipeOp> ops;
  for (int m = 0; m < count; ++m) {
    if (stage > 0) ops.push_back({PipeOp::recv_input, m});
    ops.push_back({PipeOp::forward, m});
    if (stage < stages - 1) ops.push_back({PipeOp::send_output, m});
  }
  return ops;
}

int pipeline_slots(int stages, int stage, int count) {
  return stages == 1 ? 1 : std::min(count, stages - stage);  // count ≥ 1: the resolver derives it
}

std::string to_string(const std::vector<PipeOp>& ops) {
  std::string s;
  for (const PipeOp& op : ops) {
    if (!s.empty()) s += ' ';
    const std::string m = std::to_string(op.m), m2 = std::to_string(op.m2);
    switch (op.kind) {
      case PipeOp::forward:
        s += "F" + m;
        break;
      case PipeOp::backward:
        s += "B" + m;
        break;
      case PipeOp::recv_input:
        s += "Rx" + m;
        break;
      case PipeOp::send_output:
        s += "Sx" + m;
        break;
      case PipeOp::recv_output_grad:
        s += "Rdx" + m;
        break;
      case PipeOp::send_input_grad:
        s += "Sdx" + m;
        break;
      case PipeOp::send_output_recv_output_grad:
        s += "Sx" + m + "|Rdx" + m2;
        break;
      case PipeOp::send_input_grad_recv_input:
        s += "Sdx" + m + "|Rx" + m2;
        break;
    }
  }
  return s;
}

PipelineSchedule::PipelineSchedule(Model& model, Comm& pp, int stages, int stage)
    : model_(model), pp_(pp), stages_(stages), stage_(stage) {}

void PipelineSchedule::train(int count, const MicroBatchFn& forward, const MicroBatchFn& backward) {
  run(one_f_one_b(stages_, stage_, count), forward, backward);
}

void PipelineSchedule::forward(int count, const MicroBatchFn& forward) {
  run(forward_only(stages_, stage_, count), forward, {});
}

void PipelineSchedule::run(const std::vector<PipeOp>& ops, const MicroBatchFn& forward, const MicroBatchFn& backward) {
  const int prev = stage_ - 1, next = stage_ + 1;
  for (const PipeOp& op : ops) {
    const int s = slot(op.m);
    switch (op.kind) {
      case PipeOp::forward:
        forward(op.m, s);
        break;
      case PipeOp::backward:
        backward(op.m, s);
        break;
      case PipeOp::recv_input:
        pp_.send_recv(Tensor(), -1, model_.stage_input(s), prev);
        break;
      case PipeOp::send_output:
        pp_.send_recv(model_.stage_output(s), next, Tensor(), -1);
        break;
      case PipeOp::recv_output_grad:
        pp_.send_recv(Tensor(), -1, model_.stage_output_grad(s), next);
        break;
      case PipeOp::send_input_grad:
        pp_.send_recv(model_.stage_input_grad(s), prev, Tensor(), -1);
        break;
      case PipeOp::send_output_recv_output_grad:
        pp_.send_recv(model_.stage_output(s), next, model_.stage_output_grad(slot(op.m2)), next);
        break;
      case PipeOp::send_input_grad_recv_input:
        pp_.send_recv(model_.stage_input_grad(s), prev, model_.stage_input(slot(op.m2)), prev);
        break;
    }
  }
}

}  // namespace recipe::core
