// 1F1B, interleaved 1F1B and forward-only pipeline orders (see pipeline_order.hpp).
#include "plan/pipeline_order.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

namespace recipe::plan {

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

namespace {

// One forward or backward of micro-batch m through local chunk `chunk`.
struct Unit {
  bool forward = true;
  int chunk = 0, m = 0;
};

// Megatron's virtual micro-batch i: groups of stages·chunks, chunk by chunk, `stages` micro-batches
// each. Backwards visit a group's chunks last to first.
Unit virtual_unit(int i, int stages, int chunks, bool forward) {
  const int group = stages * chunks, in_group = i % group;
  const int c = in_group / stages;
  return {forward, forward ? c : chunks - 1 - c, (i / group) * stages + in_group % stages};
}

// Stage k's compute order under interleaved 1F1B (Megatron's warm-up, steady state, cooldown).
std::vector<Unit> interleaved_units(int stages, int k, int chunks, int count) {
  const int total = count * chunks;
  // count == stages: every forward first (Megatron's rule; there is no steady state to speak of).
  const int warmup = count == stages ? total : std::min((stages - k - 1) * 2 + (chunks - 1) * stages, total);
  std::vector<Unit> u;
  u.reserve(2 * size_t(total));
  for (int i = 0; i < warmup; ++i) u.push_back(virtual_unit(i, stages, chunks, true));
  for (int i = 0; i < total - warmup; ++i) {
    u.push_back(virtual_unit(warmup + i, stages, chunks, true));
    u.push_back(virtual_unit(i, stages, chunks, false));
  }
  for (int i = total - warmup; i < total; ++i) u.push_back(virtual_unit(i, stages, chunks, false));
  return u;
}

// Forwards only, through every chunk: groups of up to `stages` micro-batches (the last group may be
// smaller), chunk by chunk.
std::vector<Unit> forward_units(int stages, int chunks, int count) {
  std::vector<Unit> u;
  for (int g = 0; g < count; g += stages)
    for (int c = 0; c < chunks; ++c)
      for (int m = g; m < std::min(count, g + stages); ++m) u.push_back({true, c, m});
  return u;
}

// Every stage's op list from every stage's compute order, in lock-step rounds (see the header):
// in a round a stage runs its next units while their inputs are there (at most one forward and
// one backward), then exchanges x (send to the next stage round the ring, receive from the
// previous) and then dx (send to the previous, receive from the next). What a stage sends in a
// round its neighbour receives in that round, into the micro-batch's slot of the chunk that
// consumes it: the last stage's chunk c feeds the first stage's chunk c+1, and back.
std::vector<std::vector<PipeOp>> lockstep(int stages, int chunks, int count,
                                          const std::vector<std::vector<Unit>>& order) {
  const int P = stages, V = chunks;
  auto at = [&](int c, int m) { return size_t(c) * size_t(count) + size_t(m); };
  const size_t items = size_t(V) * size_t(count);
  struct Stage {
    std::vector<char> fwd_done, have_x, have_dx;
    size_t next = 0;
  };
  std::vector<Stage> st(
      size_t(P), Stage{std::vector<char>(items, 0), std::vector<char>(items, 0), std::vector<char>(items, 0), 0});
  std::vector<std::vector<PipeOp>> ops(static_cast<size_t>(P));
  const bool training = [&] {
    for (const auto& o : order)
      for (const Unit& u : o)
        if (!u.forward) return true;
    return false;
  }();
  for (;;) {
    bool progress = false, done = true;
    // What each stage produced this round for a neighbour: (chunk, m).
    std::vector<std::optional<std::pair<int, int>>> x_out(static_cast<size_t>(P)), dx_out(static_cast<size_t>(P));
    for (int k = 0; k < P; ++k) {
      Stage& s = st[size_t(k)];
      const auto& list = order[size_t(k)];
      bool ran_f = false, ran_b = false;
      while (s.next < list.size()) {
        const Unit u = list[s.next];
        if (u.forward ? ran_f : ran_b) break;
        const size_t i = at(u.chunk, u.m);
        const bool ready = u.forward ? (k == 0 && u.chunk == 0) || s.have_x[i]
                                     : s.fwd_done[i] && ((k == P - 1 && u.chunk == V - 1) || s.have_dx[i]);
        if (!ready) break;
        ops[size_t(k)].push_back({u.forward ? PipeOp::forward : PipeOp::backward, u.m, -1, u.chunk, 0});
        if (u.forward) {
          ran_f = true;
          s.fwd_done[i] = 1;
          if (!(k == P - 1 && u.chunk == V - 1)) x_out[size_t(k)] = std::pair{u.chunk, u.m};
        } else {
          ran_b = true;
          if (!(k == 0 && u.chunk == 0)) dx_out[size_t(k)] = std::pair{u.chunk, u.m};
        }
        ++s.next;
        progress = true;
      }
      done = done && s.next == list.size();
    }
    for (int k = 0; k < P; ++k) {
      Stage& s = st[size_t(k)];
      const int prev = (k + P - 1) % P, next = (k + 1) % P;
      // x from the previous stage: the first stage takes the last stage's chunk c as its chunk c+1.
      std::optional<std::pair<int, int>> x_in = x_out[size_t(prev)], dx_in = dx_out[size_t(next)];
      if (x_in && k == 0) ++x_in->first;
      if (dx_in && k == P - 1) --dx_in->first;
      const auto& x_send = x_out[size_t(k)];
      const auto& dx_send = dx_out[size_t(k)];
      auto add = [&](PipeOp::Kind send_only, PipeOp::Kind recv_only, PipeOp::Kind both,
                     const std::optional<std::pair<int, int>>& send, const std::optional<std::pair<int, int>>& recv) {
        if (send && recv)
          ops[size_t(k)].push_back({both, send->second, recv->second, send->first, recv->first});
        else if (send)
          ops[size_t(k)].push_back({send_only, send->second, -1, send->first, 0});
        else if (recv)
          ops[size_t(k)].push_back({recv_only, recv->second, -1, recv->first, 0});
      };
      add(PipeOp::send_output, PipeOp::recv_input, PipeOp::send_output_recv_input, x_send, x_in);
      if (training)
        add(PipeOp::send_input_grad, PipeOp::recv_output_grad, PipeOp::send_input_grad_recv_output_grad, dx_send,
            dx_in);
      if (x_in) s.have_x[at(x_in->first, x_in->second)] = 1;
      if (dx_in) s.have_dx[at(dx_in->first, dx_in->second)] = 1;
    }
    if (done) return ops;
    if (!progress) throw std::logic_error("pipeline schedule: the stages' orders wait on each other");
  }
}

void check_chunked(int stages, int chunks, int count) {
  if (stages < 2 || chunks < 2 || count < 1)
    throw std::invalid_argument("interleaved pipeline schedule: needs ≥ 2 stages and ≥ 2 chunks, got pp=" +
                                std::to_string(stages) + ", virtual_pp=" + std::to_string(chunks));
}

}  // namespace

std::vector<PipeOp> interleaved_1f1b(int stages, int stage, int chunks, int count) {
  check_chunked(stages, chunks, count);
  if (count % stages != 0)
    throw std::invalid_argument("interleaved pipeline schedule: trainer.num_micro_batches=" + std::to_string(count) +
                                " is not a multiple of parallelism.pp=" + std::to_string(stages));
  std::vector<std::vector<Unit>> order;
  order.reserve(size_t(stages));
  for (int k = 0; k < stages; ++k) order.push_back(interleaved_units(stages, k, chunks, count));
  return lockstep(stages, chunks, count, order).at(size_t(stage));
}

std::vector<PipeOp> training_order(int stages, int stage, int chunks, int count) {
  return chunks == 1 ? one_f_one_b(stages, stage, count) : interleaved_1f1b(stages, stage, chunks, count);
}

std::vector<PipeOp> forward_only(int stages, int stage, int count, int chunks) {
  if (chunks > 1) {
    check_chunked(stages, chunks, count);
    return lockstep(stages, chunks, count,
                    std::vector<std::vector<Unit>>(size_t(stages), forward_units(stages, chunks, count)))
        .at(size_t(stage));
  }
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

std::vector<int> pipeline_slots(int stages, int stage, int chunks, int count) {
  if (chunks == 1) return {pipeline_slots(stages, stage, count)};
  // Two buffers of a slot are live at different times: the activations (the received input and
  // everything the forward saves, until the backward) and the gradient buffer (the received output
  // gradient until the input gradient is sent). Two micro-batches of a chunk may share a slot when
  // neither of their intervals overlap. The stage output is sent in the round of its forward,
  // before the chunk's next forward can overwrite it.
  const std::vector<PipeOp> ops = training_order(stages, stage, chunks, count);
  constexpr int kNone = -1;
  struct Live {
    int acts_begin = kNone, acts_end = kNone, grad_begin = kNone, grad_end = kNone;
  };
  std::vector<std::vector<Live>> live(static_cast<size_t>(chunks), std::vector<Live>(static_cast<size_t>(count)));
  auto touch = [](int& begin, int& end, int i) {
    if (begin == kNone) begin = i;
    end = i;
  };
  for (int i = 0; i < int(ops.size()); ++i) {
    const PipeOp& op = ops[size_t(i)];
    Live& a = live[size_t(op.chunk)][size_t(op.m)];
    switch (op.kind) {
      case PipeOp::forward:
      case PipeOp::recv_input:
        touch(a.acts_begin, a.acts_end, i);
        break;
      case PipeOp::send_output:  // the output buffer is sent in the round of its forward
        break;
      case PipeOp::backward:
        touch(a.acts_begin, a.acts_end, i);
        touch(a.grad_begin, a.grad_end, i);
        break;
      case PipeOp::recv_output_grad:
      case PipeOp::send_input_grad:
        touch(a.grad_begin, a.grad_end, i);
        break;
      case PipeOp::send_output_recv_input:
        touch(live[size_t(op.chunk2)][size_t(op.m2)].acts_begin, live[size_t(op.chunk2)][size_t(op.m2)].acts_end, i);
        break;
      case PipeOp::send_input_grad_recv_output_grad:
        touch(a.grad_begin, a.grad_end, i);
        touch(live[size_t(op.chunk2)][size_t(op.m2)].grad_begin, live[size_t(op.chunk2)][size_t(op.m2)].grad_end, i);
        break;
      default:  // the 1F1B pairs never occur in an interleaved order
        throw std::logic_error("pipeline_slots: unexpected op in an interleaved order");
    }
  }
  auto overlap = [](int b0, int e0, int b1, int e1) { return b0 != kNone && b1 != kNone && b1 <= e0 && b0 <= e1; };
  // Both intervals start in micro-batch order, so the first micro-batch after m that overlaps
  // neither of m's ends the search.
  std::vector<int> slots(size_t(chunks), 1);
  for (int c = 0; c < chunks; ++c) {
    const auto& l = live[size_t(c)];
    for (int m = 0; m < count; ++m)
      for (int n = m + 1; n < count; ++n) {
        const Live &a = l[size_t(m)], &b = l[size_t(n)];
        if (!overlap(a.acts_begin, a.acts_end, b.acts_begin, b.acts_end) &&
            !overlap(a.grad_begin, a.grad_end, b.grad_begin, b.grad_end))
          break;
        slots[size_t(c)] = std::max(slots[size_t(c)], n - m + 1);
      }
  }
  return slots;
}

std::string to_string(const std::vector<PipeOp>& ops) {
  const bool chunked = std::any_of(ops.begin(), ops.end(), [](const PipeOp& op) { return op.chunk || op.chunk2; });
  std::string s;
  for (const PipeOp& op : ops) {
    if (!s.empty()) s += ' ';
    const std::string m = (chunked ? std::to_string(op.chunk) + "." : "") + std::to_string(op.m);
    const std::string m2 = (chunked ? std::to_string(op.chunk2) + "." : "") + std::to_string(op.m2);
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
      case PipeOp::send_output_recv_input:
        s += "Sx" + m + "|Rx" + m2;
        break;
      case PipeOp::send_input_grad_recv_output_grad:
        s += "Sdx" + m + "|Rdx" + m2;
        break;
    }
  }
  return s;
}

}  // namespace recipe::plan
