// The pipeline schedule (core/train/pipeline_schedule.hpp) without ranks: the 1F1B order each
// stage runs for pp = 1..4 and several micro-batch counts, written out for a few cases and
// checked for its invariants everywhere (every micro-batch once forward and once backward, in
// order; sends after and receives before the compute that needs them; activation slots never
// overwritten while in flight; the step's last backward is the last micro-batch's), and all the
// stages of a pipeline simulated together with blocking, unbuffered sends and receives: every
// send meets the receive of the same tensor, and no stage waits forever. The interleaved schedule
// (virtual pipeline stages) the same way over a grid of (pp, virtual_pp, micro-batches), its
// compute order against Megatron's written out by hand, and its sends and receives matched per
// rank pair in posting order (one MPI tag, one NCCL channel: pp = 2 carries x and dx both ways
// over the same pair).
#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/train/pipeline_schedule.hpp"

TEST_SUITE_BEGIN("core/train");

using namespace recipe::core;

namespace {

// One direction of a neighbour exchange: a send or a receive of x (stage output → next stage's
// input) or dx (stage input gradient → previous stage's output gradient) of micro-batch m.
struct Part {
  bool send;
  bool grad;  // dx, not x
  int peer;
  int m;
  int chunk = 0;  // the local chunk on this stage
};

// `ring`: neighbours round the ring (interleaved); otherwise stage -1 and P are missing stages.
std::vector<Part> parts(const PipeOp& op, int stage, int stages = 0) {
  int prev = stage - 1, next = stage + 1;
  if (stages > 0) prev = (stage + stages - 1) % stages, next = (stage + 1) % stages;
  switch (op.kind) {
    case PipeOp::recv_input:
      return {{false, false, prev, op.m, op.chunk}};
    case PipeOp::send_output:
      return {{true, false, next, op.m, op.chunk}};
    case PipeOp::recv_output_grad:
      return {{false, true, next, op.m, op.chunk}};
    case PipeOp::send_input_grad:
      return {{true, true, prev, op.m, op.chunk}};
    case PipeOp::send_output_recv_output_grad:
      return {{true, false, next, op.m, op.chunk}, {false, true, next, op.m2, op.chunk2}};
    case PipeOp::send_input_grad_recv_input:
      return {{true, true, prev, op.m, op.chunk}, {false, false, prev, op.m2, op.chunk2}};
    case PipeOp::send_output_recv_input:
      return {{true, false, next, op.m, op.chunk}, {false, false, prev, op.m2, op.chunk2}};
    case PipeOp::send_input_grad_recv_output_grad:
      return {{true, true, prev, op.m, op.chunk}, {false, true, next, op.m2, op.chunk2}};
    default:
      return {};
  }
}

// Runs every stage's list together. A comm op posts all its parts at once and completes when each
// has met its counterpart, posted by the peer's current op (NCCL-style: nothing is buffered).
// Returns "" or what went wrong.
std::string simulate(const std::vector<std::vector<PipeOp>>& ops) {
  const int P = int(ops.size());
  std::vector<size_t> pc(size_t(P), 0);
  std::vector<std::vector<Part>> pending(static_cast<size_t>(P));
  std::vector<bool> posted(size_t(P), false);
  for (;;) {
    bool progress = false, done = true;
    for (int k = 0; k < P; ++k) {
      auto& list = ops[size_t(k)];
      while (pc[size_t(k)] < list.size()) {
        const PipeOp& op = list[pc[size_t(k)]];
        if (!posted[size_t(k)]) {
          pending[size_t(k)] = parts(op, k);
          for (const Part& p : pending[size_t(k)])
            if (p.peer < 0 || p.peer >= P) return "stage " + std::to_string(k) + " talks to missing stage";
          posted[size_t(k)] = true;
        }
        if (!pending[size_t(k)].empty()) break;
        ++pc[size_t(k)];
        posted[size_t(k)] = false;
        progress = true;
      }
    }
    for (int k = 0; k < P; ++k) {
      auto& mine = pending[size_t(k)];
      for (size_t i = 0; i < mine.size();) {
        const Part p = mine[i];
        auto& theirs = pending[size_t(p.peer)];
        auto it = std::find_if(theirs.begin(), theirs.end(),
                               [&](const Part& q) { return q.send != p.send && q.grad == p.grad && q.peer == k; });
        if (it == theirs.end()) {
          ++i;
          continue;
        }
        if (it->m != p.m)
          return "stage " + std::to_string(k) + (p.grad ? " dx" : " x") + std::to_string(p.m) + " met " +
                 std::to_string(it->m) + " on stage " + std::to_string(p.peer);
        theirs.erase(it);
        mine.erase(mine.begin() + long(i));
        progress = true;
      }
    }
    for (int k = 0; k < P; ++k) done = done && pc[size_t(k)] == ops[size_t(k)].size();
    if (done) return "";
    if (!progress) return "deadlock";
  }
}

void check_invariants(int P, int k, int count, const std::vector<PipeOp>& ops) {
  CAPTURE(P);
  CAPTURE(k);
  CAPTURE(count);
  CAPTURE(to_string(ops));
  const int slots = pipeline_slots(P, k, count);
  std::vector<int> fwd_at(size_t(count), -1), bwd_at(size_t(count), -1);
  std::vector<int> got_x(size_t(count), -1), got_dx(size_t(count), -1), sent_x(size_t(count), -1),
      sent_dx(size_t(count), -1);
  int next_f = 0, next_b = 0, in_flight = 0, last_backward = -1;
  for (int i = 0; i < int(ops.size()); ++i) {
    const PipeOp& op = ops[size_t(i)];
    if (op.kind == PipeOp::forward) {
      REQUIRE(op.m == next_f++);  // forwards in order
      fwd_at[size_t(op.m)] = i;
      // Slot m % slots is free again: the micro-batch that used it before has run backward.
      if (op.m >= slots) CHECK(bwd_at[size_t(op.m - slots)] >= 0);
      CHECK(++in_flight <= slots);
    } else if (op.kind == PipeOp::backward) {
      REQUIRE(op.m == next_b++);  // backwards in order
      CHECK(fwd_at[size_t(op.m)] >= 0);
      bwd_at[size_t(op.m)] = i;
      --in_flight;
      last_backward = op.m;
    }
    for (const Part& p : parts(op, k)) {
      auto& at = p.send ? (p.grad ? sent_dx : sent_x) : (p.grad ? got_dx : got_x);
      REQUIRE(p.m >= 0);
      REQUIRE(p.m < count);
      CHECK(at[size_t(p.m)] == -1);  // once
      at[size_t(p.m)] = i;
      // A received input lands in slot m % slots: its previous user is done.
      if (!p.send && !p.grad && p.m >= slots) CHECK(bwd_at[size_t(p.m - slots)] >= 0);
    }
  }
  CHECK(next_f == count);
  CHECK(next_b == count);
  CHECK(last_backward == count - 1);  // the DP reduction hooks the step's last backward
  const bool first = k == 0, last = k == P - 1;
  for (int m = 0; m < count; ++m) {
    CAPTURE(m);
    if (first) {
      CHECK(got_x[size_t(m)] == -1);
      CHECK(sent_dx[size_t(m)] == -1);
    } else {
      CHECK(got_x[size_t(m)] >= 0);
      CHECK(got_x[size_t(m)] < fwd_at[size_t(m)]);
      CHECK(sent_dx[size_t(m)] > bwd_at[size_t(m)]);
    }
    if (last) {
      CHECK(sent_x[size_t(m)] == -1);
      CHECK(got_dx[size_t(m)] == -1);
    } else {
      CHECK(sent_x[size_t(m)] > fwd_at[size_t(m)]);
      CHECK(got_dx[size_t(m)] >= 0);
      CHECK(got_dx[size_t(m)] < bwd_at[size_t(m)]);
    }
  }
  // 1F1B: stage k runs min(P - k, count) forwards before its first backward.
  int before = 0;
  for (const PipeOp& op : ops) {
    if (op.kind == PipeOp::backward) break;
    before += op.kind == PipeOp::forward;
  }
  CHECK(before == std::min(P - k, count));
}

}  // namespace

TEST_CASE("pipeline schedule: 1F1B orders written out") {
  CHECK(to_string(one_f_one_b(1, 0, 3)) == "F0 B0 F1 B1 F2 B2");
  // pp = 4, 6 micro-batches: warm-up forwards, one forward one backward, the remaining backwards.
  CHECK(to_string(one_f_one_b(4, 0, 6)) ==
        "F0 Sx0 F1 Sx1 F2 Sx2 F3 Sx3|Rdx0 B0 F4 Sx4|Rdx1 B1 F5 Sx5|Rdx2 B2 Rdx3 B3 Rdx4 B4 Rdx5 B5");
  CHECK(to_string(one_f_one_b(4, 1, 6)) ==
        "Rx0 F0 Sx0 Rx1 F1 Sx1 Rx2 F2 Sx2|Rdx0 B0 Sdx0|Rx3 F3 Sx3|Rdx1 B1 Sdx1|Rx4 F4 Sx4|Rdx2 B2 "
        "Sdx2|Rx5 F5 Sx5|Rdx3 B3 Sdx3 Rdx4 B4 Sdx4 Rdx5 B5 Sdx5");
  CHECK(to_string(one_f_one_b(4, 3, 6)) ==
        "Rx0 F0 B0 Sdx0|Rx1 F1 B1 Sdx1|Rx2 F2 B2 Sdx2|Rx3 F3 B3 Sdx3|Rx4 F4 B4 Sdx4|Rx5 F5 B5 Sdx5");
  // Fewer micro-batches than stages: the warm-up is cut to the count.
  CHECK(to_string(one_f_one_b(3, 0, 2)) == "F0 Sx0 F1 Sx1 Rdx0 B0 Rdx1 B1");
  CHECK(to_string(one_f_one_b(3, 1, 2)) == "Rx0 F0 Sx0 Rx1 F1 Sx1|Rdx0 B0 Sdx0 Rdx1 B1 Sdx1");
  CHECK(to_string(one_f_one_b(3, 2, 2)) == "Rx0 F0 B0 Sdx0|Rx1 F1 B1 Sdx1");
  CHECK(to_string(forward_only(2, 0, 2)) == "F0 Sx0 F1 Sx1");
  CHECK(to_string(forward_only(2, 1, 2)) == "Rx0 F0 Rx1 F1");
  CHECK(to_string(forward_only(1, 0, 2)) == "F0 F1");
}

TEST_CASE("pipeline schedule: activation slots are the micro-batches in flight") {
  CHECK(pipeline_slots(1, 0, 8) == 1);
  CHECK(pipeline_slots(4, 0, 8) == 4);
  CHECK(pipeline_slots(4, 3, 8) == 1);
  CHECK(pipeline_slots(4, 1, 2) == 2);
  CHECK(pipeline_slots(2, 0, 1) == 1);
}

TEST_CASE("pipeline schedule: 1F1B keeps its invariants and the stages meet, pp = 1..4") {
  for (int P = 1; P <= 4; ++P) {
    for (int count = 1; count <= 9; ++count) {
      std::vector<std::vector<PipeOp>> train, eval;
      for (int k = 0; k < P; ++k) {
        train.push_back(one_f_one_b(P, k, count));
        eval.push_back(forward_only(P, k, count));
        check_invariants(P, k, count, train.back());
      }
      CAPTURE(P);
      CAPTURE(count);
      CHECK(simulate(train) == "");
      CHECK(simulate(eval) == "");
    }
  }
}

namespace {

// The interleaved stages of a ring of P: every stage's list run together, blocking and unbuffered.
// A send from stage a to stage b meets the receive that b posted from a, whatever that receive is
// for (MPI matches one tag in posting order; NCCL one channel), and only then is the payload
// compared: the same x or dx, of the same micro-batch, from the sender's chunk c to the chunk that
// consumes it (the first stage's chunk c+1 after the last stage's chunk c, and back for dx).
std::string simulate_ring(const std::vector<std::vector<PipeOp>>& ops) {
  const int P = int(ops.size());
  std::vector<size_t> pc(size_t(P), 0);
  std::vector<std::vector<Part>> pending(static_cast<size_t>(P));
  std::vector<bool> posted(size_t(P), false);
  for (;;) {
    bool progress = false, done = true;
    for (int k = 0; k < P; ++k) {
      auto& list = ops[size_t(k)];
      while (pc[size_t(k)] < list.size()) {
        if (!posted[size_t(k)]) {
          pending[size_t(k)] = parts(list[pc[size_t(k)]], k, P);
          posted[size_t(k)] = true;
        }
        if (!pending[size_t(k)].empty()) break;
        ++pc[size_t(k)];
        posted[size_t(k)] = false;
        progress = true;
      }
    }
    for (int k = 0; k < P; ++k) {
      auto& mine = pending[size_t(k)];
      for (size_t i = 0; i < mine.size();) {
        const Part p = mine[i];
        if (!p.send) {
          ++i;
          continue;
        }
        auto& theirs = pending[size_t(p.peer)];
        auto it = std::find_if(theirs.begin(), theirs.end(), [&](const Part& q) { return !q.send && q.peer == k; });
        if (it == theirs.end()) {
          ++i;
          continue;
        }
        // The chunk the payload lands in on the receiver.
        int chunk = p.chunk;
        if (!p.grad && k == P - 1) ++chunk;
        if (p.grad && k == 0) --chunk;
        if (it->grad != p.grad || it->m != p.m || it->chunk != chunk)
          return "stage " + std::to_string(k) + " sent " + (p.grad ? "dx" : "x") + std::to_string(p.chunk) + "." +
                 std::to_string(p.m) + " into stage " + std::to_string(p.peer) + "'s receive of " +
                 (it->grad ? "dx" : "x") + std::to_string(it->chunk) + "." + std::to_string(it->m);
        theirs.erase(it);
        mine.erase(mine.begin() + long(i));
        progress = true;
      }
    }
    for (int k = 0; k < P; ++k) done = done && pc[size_t(k)] == ops[size_t(k)].size();
    if (done) return "";
    if (!progress) return "deadlock";
  }
}

// The compute order alone: "F1.3 B0.2 ..." (chunk.micro-batch).
std::string computes(const std::vector<PipeOp>& ops) {
  std::string s;
  for (const PipeOp& op : ops)
    if (op.kind == PipeOp::forward || op.kind == PipeOp::backward)
      s += (s.empty() ? "" : " ") + std::string(op.kind == PipeOp::forward ? "F" : "B") + std::to_string(op.chunk) +
           "." + std::to_string(op.m);
  return s;
}

// Stage k of P with V chunks over `count` micro-batches (training: with backwards): every
// (chunk, micro-batch) forward once and backward once; per chunk in micro-batch order; a
// micro-batch's forward of chunk c after its forward of chunk c-1 on this stage, and its backward
// of chunk c before that of c-1; inputs received before the forward that reads them, gradients
// before the backward; outputs sent after the forward; no two live micro-batches of a chunk in
// one slot (m mod slots); the last micro-batch's backwards in reverse chunk order, so the DP
// reduction's phases (the chunks' layers, last first) arrive in order.
void check_interleaved(int P, int k, int V, int count, const std::vector<PipeOp>& ops, bool training) {
  CAPTURE(P);
  CAPTURE(k);
  CAPTURE(V);
  CAPTURE(count);
  CAPTURE(to_string(ops));
  // Evaluation reuses the training slots (of trainer.num_micro_batches, a multiple of P; or one
  // micro-batch at a time).
  const std::vector<int> slots = count % P == 0 ? pipeline_slots(P, k, V, count) : std::vector<int>(size_t(V), 1);
  REQUIRE(int(slots.size()) == V);
  auto idx = [&](int c, int m) { return size_t(c) * size_t(count) + size_t(m); };
  const size_t n = size_t(V) * size_t(count);
  std::vector<int> fwd(n, -1), bwd(n, -1), got_x(n, -1), got_dx(n, -1), sent_x(n, -1), sent_dx(n, -1);
  std::vector<int> next_f(size_t(V), 0), next_b(size_t(V), 0);
  // Live intervals, as pipeline_slots defines them: activations from the input (or forward) to the
  // backward (or the output's send), the gradient buffer from its receive to the input gradient's send.
  std::vector<int> acts_begin(n, -1), acts_end(n, -1), grad_begin(n, -1), grad_end(n, -1);
  auto touch = [](std::vector<int>& b, std::vector<int>& e, size_t i, int at) {
    if (b[i] < 0) b[i] = at;
    e[i] = at;
  };
  for (int i = 0; i < int(ops.size()); ++i) {
    const PipeOp& op = ops[size_t(i)];
    REQUIRE(op.chunk >= 0);
    REQUIRE(op.chunk < V);
    if (op.kind == PipeOp::forward) {
      REQUIRE(op.m == next_f[size_t(op.chunk)]++);
      fwd[idx(op.chunk, op.m)] = i;
      if (op.chunk > 0) CHECK(fwd[idx(op.chunk - 1, op.m)] >= 0);
      touch(acts_begin, acts_end, idx(op.chunk, op.m), i);
    } else if (op.kind == PipeOp::backward) {
      REQUIRE(op.m == next_b[size_t(op.chunk)]++);
      CHECK(fwd[idx(op.chunk, op.m)] >= 0);
      if (op.chunk < V - 1) CHECK(bwd[idx(op.chunk + 1, op.m)] >= 0);
      bwd[idx(op.chunk, op.m)] = i;
      touch(acts_begin, acts_end, idx(op.chunk, op.m), i);
      touch(grad_begin, grad_end, idx(op.chunk, op.m), i);
    }
    for (const Part& p : parts(op, k, P)) {
      REQUIRE(p.m >= 0);
      REQUIRE(p.m < count);
      REQUIRE(p.chunk >= 0);
      REQUIRE(p.chunk < V);
      const size_t j = idx(p.chunk, p.m);
      auto& at = p.send ? (p.grad ? sent_dx : sent_x) : (p.grad ? got_dx : got_x);
      CHECK(at[j] == -1);  // once
      at[j] = i;
      if (p.grad)
        touch(grad_begin, grad_end, j, i);
      else if (!p.send)  // the output is sent in the round of its forward (checked below)
        touch(acts_begin, acts_end, j, i);
    }
  }
  const bool first = k == 0, last = k == P - 1;
  for (int c = 0; c < V; ++c)
    for (int m = 0; m < count; ++m) {
      CAPTURE(c);
      CAPTURE(m);
      const size_t j = idx(c, m);
      REQUIRE(fwd[j] >= 0);
      CHECK((bwd[j] >= 0) == training);
      if (first && c == 0) {
        CHECK(got_x[j] == -1);
        CHECK(sent_dx[j] == -1);
      } else {
        REQUIRE(got_x[j] >= 0);
        CHECK(got_x[j] < fwd[j]);
        if (training) CHECK(sent_dx[j] > bwd[j]);
      }
      if (last && c == V - 1) {
        CHECK(sent_x[j] == -1);
        CHECK(got_dx[j] == -1);
      } else {
        CHECK(sent_x[j] > fwd[j]);
        if (m + 1 < count) CHECK(sent_x[j] < fwd[idx(c, m + 1)]);  // before the next forward overwrites it
        if (training) {
          REQUIRE(got_dx[j] >= 0);
          CHECK(got_dx[j] < bwd[j]);
        }
      }
      // Slot m mod slots: the previous user of the slot is done with both buffers.
      if (m >= slots[size_t(c)]) {
        const size_t prior = idx(c, m - slots[size_t(c)]);
        CHECK(acts_end[prior] < acts_begin[j]);
        if (training) CHECK(grad_end[prior] < grad_begin[j]);
      }
    }
  if (training)
    for (int c = 0; c + 1 < V; ++c) CHECK(bwd[idx(c + 1, count - 1)] < bwd[idx(c, count - 1)]);
}

// Megatron's interleaved compute order, from its rules (virtual micro-batch i of stage k: chunk
// (i mod P·V) / P, micro-batch (i / (P·V))·P + i mod P; backwards with the chunks reversed;
// warm-up (P-k-1)·2 + (V-1)·P, everything when count == P).
std::string megatron_order(int P, int k, int V, int count) {
  const int total = V * count;
  const int warmup = count == P ? total : std::min(2 * (P - k - 1) + (V - 1) * P, total);
  auto unit = [&](int i, bool f) {
    const int g = i % (P * V), c = g / P;
    return std::string(f ? "F" : "B") + std::to_string(f ? c : V - 1 - c) + "." +
           std::to_string(i / (P * V) * P + i % P);
  };
  std::string s;
  auto add = [&](const std::string& t) { s += (s.empty() ? "" : " ") + t; };
  for (int i = 0; i < warmup; ++i) add(unit(i, true));
  for (int i = 0; i < total - warmup; ++i) {
    add(unit(warmup + i, true));
    add(unit(i, false));
  }
  for (int i = total - warmup; i < total; ++i) add(unit(i, false));
  return s;
}

}  // namespace

TEST_CASE("pipeline schedule: interleaved compute order is Megatron's, written out by hand") {
  // pp = 2, virtual_pp = 2, 4 micro-batches. Stage 0 warms up with (2-0-1)·2 + (2-1)·2 = 4 forwards,
  // stage 1 with 2; virtual forwards 0..7 are chunk.micro 0.0 0.1 1.0 1.1 0.2 0.3 1.2 1.3, virtual
  // backwards 1.0 1.1 0.0 0.1 1.2 1.3 0.2 0.3.
  CHECK(computes(interleaved_1f1b(2, 0, 2, 4)) ==
        "F0.0 F0.1 F1.0 F1.1 F0.2 B1.0 F0.3 B1.1 F1.2 B0.0 F1.3 B0.1 B1.2 B1.3 B0.2 B0.3");
  CHECK(computes(interleaved_1f1b(2, 1, 2, 4)) ==
        "F0.0 F0.1 F1.0 B1.0 F1.1 B1.1 F0.2 B0.0 F0.3 B0.1 F1.2 B1.2 F1.3 B1.3 B0.2 B0.3");
  // count == pp: every forward first.
  CHECK(computes(interleaved_1f1b(2, 1, 2, 2)) == "F0.0 F0.1 F1.0 F1.1 B1.0 B1.1 B0.0 B0.1");
  for (int P : {2, 3, 4})
    for (int V : {2, 3})
      for (int count : {P, 2 * P, 3 * P})
        for (int k = 0; k < P; ++k) {
          CAPTURE(P);
          CAPTURE(V);
          CAPTURE(count);
          CAPTURE(k);
          CHECK(computes(interleaved_1f1b(P, k, V, count)) == megatron_order(P, k, V, count));
        }
}

TEST_CASE("pipeline schedule: interleaved exchanges written out for pp = 2, virtual_pp = 2") {
  // Each round: the compute, then x round the ring (Sx to the next stage | Rx from the previous),
  // then dx the other way. Stage 1's chunk 0 output is stage 0's chunk 1 input (Sx0.m on stage 1
  // meets Rx1.m on stage 0), and stage 0's chunk 1 input gradient goes back to stage 1's chunk 0.
  // Round 0: stage 0 runs F0.0 and sends it; stage 1 receives it. Round 1: stage 1 runs F0.0 and
  // sends it round the ring to stage 0 (Rx1.0 there) while stage 0 sends F0.1. Round 3: stage 1
  // runs F1.0 (the last chunk: the loss) and B1.0, and sends dx1.0 back to stage 0's chunk 1.
  CHECK(to_string(interleaved_1f1b(2, 0, 2, 4)) ==
        "F0.0 Sx0.0 F0.1 Sx0.1|Rx1.0 F1.0 Sx1.0|Rx1.1 F1.1 Sx1.1 Rdx1.0 F0.2 B1.0 Sx0.2 Sdx1.0|Rdx1.1 F0.3 B1.1 "
        "Sx0.3|Rx1.2 Sdx1.1|Rdx0.0 F1.2 B0.0 Sx1.2|Rx1.3 Rdx0.1 F1.3 B0.1 Sx1.3 Rdx1.2 B1.2 Sdx1.2|Rdx1.3 B1.3 "
        "Sdx1.3|Rdx0.2 B0.2 Rdx0.3 B0.3");
  CHECK(to_string(interleaved_1f1b(2, 1, 2, 4)) ==
        "Rx0.0 F0.0 Sx0.0|Rx0.1 F0.1 Sx0.1|Rx1.0 F1.0 B1.0 Rx1.1 Sdx1.0 F1.1 B1.1 Rx0.2 Sdx1.1|Rdx0.0 F0.2 B0.0 "
        "Sx0.2|Rx0.3 Sdx0.0|Rdx0.1 F0.3 B0.1 Sx0.3|Rx1.2 Sdx0.1 F1.2 B1.2 Rx1.3 Sdx1.2 F1.3 B1.3 Sdx1.3|Rdx0.2 B0.2 "
        "Sdx0.2|Rdx0.3 B0.3 Sdx0.3");
}

TEST_CASE("pipeline schedule: interleaved keeps its invariants and the ring meets, pp 2..4 x virtual_pp 2..3") {
  for (int P = 2; P <= 4; ++P)
    for (int V = 2; V <= 3; ++V)
      for (int count = P; count <= 4 * P; count += P) {
        std::vector<std::vector<PipeOp>> train;
        for (int k = 0; k < P; ++k) {
          train.push_back(interleaved_1f1b(P, k, V, count));
          check_interleaved(P, k, V, count, train.back(), true);
        }
        CAPTURE(P);
        CAPTURE(V);
        CAPTURE(count);
        CHECK(simulate_ring(train) == "");
      }
  // Forwards only (evaluation): any count, one micro-batch included.
  for (int P = 2; P <= 4; ++P)
    for (int V = 2; V <= 3; ++V)
      for (int count : {1, P, 2 * P, 3 * P}) {
        std::vector<std::vector<PipeOp>> eval;
        for (int k = 0; k < P; ++k) {
          eval.push_back(forward_only(P, k, count, V));
          check_interleaved(P, k, V, count, eval.back(), false);
        }
        CAPTURE(P);
        CAPTURE(V);
        CAPTURE(count);
        CHECK(simulate_ring(eval) == "");
      }
}

TEST_CASE("pipeline schedule: interleaved activation slots per chunk") {
  // One chunk: 1F1B's pp - stage.
  for (int P = 1; P <= 4; ++P)
    for (int k = 0; k < P; ++k)
      for (int count : {1, 3, 8})
        CHECK(pipeline_slots(P, k, 1, count) == std::vector<int>{pipeline_slots(P, k, count)});
  // pp = 2, virtual_pp = 2 from 4 micro-batches on (the written-out orders above): stage 0 holds
  // all four micro-batches of chunk 0 before B0.0, two of chunk 1; stage 1 three of chunk 0 (0.3
  // arrives before B0.1) and one of chunk 1 (the last: its backward follows its forward).
  CHECK(pipeline_slots(2, 0, 2, 4) == std::vector<int>{4, 2});
  CHECK(pipeline_slots(2, 1, 2, 4) == std::vector<int>{3, 1});
  CHECK(pipeline_slots(2, 0, 2, 16) == std::vector<int>{4, 2});  // bounded, whatever the count
  CHECK(pipeline_slots(4, 0, 2, 8) == std::vector<int>{8, 4});
  CHECK(pipeline_slots(4, 3, 2, 8) == std::vector<int>{5, 1});
}

TEST_CASE("pipeline schedule: a rejected interleaved shape says why") {
  CHECK_THROWS_WITH_AS(interleaved_1f1b(2, 0, 2, 3), doctest::Contains("num_micro_batches=3"), std::invalid_argument);
  CHECK_THROWS_AS(interleaved_1f1b(1, 0, 2, 4), std::invalid_argument);
}

// ---- The overlapped issue order (parallelism.pp_comm_overlap, plan/pipeline_overlap.hpp) ----

namespace {

bool shares_slot(const PipeOp& a, const PipeOp& b, const std::vector<int>& slots) {
  const auto x = touched_slots(a, slots), y = touched_slots(b, slots);
  return std::any_of(x.begin(), x.end(), [&](const auto& s) { return std::find(y.begin(), y.end(), s) != y.end(); });
}

std::vector<PipeOp> only(const std::vector<PipeOp>& ops, bool compute) {
  std::vector<PipeOp> r;
  for (const PipeOp& op : ops)
    if (is_compute(op) == compute) r.push_back(op);
  return r;
}

// The rearrangement: the same forwards and backwards in the same order, the same exchanges in the
// same order (what every rank posts to the communicator is unchanged), and no exchange ahead of a
// forward or backward that came before it in the blocking order and touches one of its slots.
void check_overlapped(const std::vector<PipeOp>& blocking, const std::vector<int>& slots) {
  const std::vector<PipeOp> ops = overlapped_order(blocking, slots);
  CAPTURE(to_string(blocking));
  CAPTURE(to_string(ops));
  REQUIRE(ops.size() == blocking.size());
  CHECK(only(ops, true) == only(blocking, true));
  CHECK(only(ops, false) == only(blocking, false));
  // Ops are distinct, so each has one position in either list.
  auto at = [](const std::vector<PipeOp>& list, const PipeOp& op) {
    return size_t(std::find(list.begin(), list.end(), op) - list.begin());
  };
  for (size_t i = 0; i < blocking.size(); ++i) {
    if (is_compute(blocking[i])) continue;
    for (size_t j = 0; j < i; ++j)
      if (is_compute(blocking[j]) && shares_slot(blocking[i], blocking[j], slots))
        CHECK(at(ops, blocking[j]) < at(ops, blocking[i]));
    CHECK(at(ops, blocking[i]) <= i);  // exchanges only move earlier
  }
}

// Every stage's overlapped list run together the way the engine runs it: the host issues an
// exchange without waiting, onto the stage's comm queue, which runs its exchanges one at a time in
// order (NCCL's one stream: the head posts all its parts and completes once each has met its
// counterpart at the head of the peer's queue, nothing buffered); a forward or backward first
// waits until every issued exchange touching its slot is complete. Checks that no stage waits
// forever, each payload lands in the receive of the same tensor (x or dx, micro-batch, the
// consuming chunk), a send is issued after the compute that produced it, and a forward has its
// input, a backward its output gradient. `ring`: the interleaved neighbours (round the ring).
std::string simulate_overlapped(const std::vector<std::vector<PipeOp>>& blocking,
                                const std::vector<std::vector<int>>& slots, bool ring) {
  const int P = int(blocking.size());
  const int V = [&] {
    int v = 1;
    for (const auto& list : blocking)
      for (const PipeOp& op : list) v = std::max(v, op.chunk + 1);
    return v;
  }();
  std::vector<std::vector<PipeOp>> ops(static_cast<size_t>(P));
  for (int k = 0; k < P; ++k) ops[size_t(k)] = overlapped_order(blocking[size_t(k)], slots[size_t(k)]);
  using Key = std::pair<int, int>;  // (chunk, micro-batch)
  struct Stage {
    size_t pc = 0;
    std::deque<size_t> queue;         // issued, not complete, in order
    std::vector<Part> pending;        // the head's parts not met yet
    bool posted = false;              // the head's parts are posted
    std::set<size_t> complete;        // op indices
    std::set<Key> fwd, bwd, got_x, got_dx;
  };
  std::vector<Stage> st(static_cast<size_t>(P));
  auto name = [](int k, const PipeOp& op) { return "stage " + std::to_string(k) + " " + to_string({op}); };
  for (;;) {
    bool progress = false;
    for (int k = 0; k < P; ++k) {  // the hosts
      Stage& s = st[size_t(k)];
      const auto& list = ops[size_t(k)];
      while (s.pc < list.size()) {
        const PipeOp& op = list[s.pc];
        if (!is_compute(op)) {
          for (const Part& p : parts(op, k, ring ? P : 0))
            if (p.send && !(p.grad ? s.bwd : s.fwd).count({p.chunk, p.m})) return name(k, op) + " sends before its compute";
          s.queue.push_back(s.pc++);
          progress = true;
          continue;
        }
        bool blocked = false;
        for (size_t i : s.queue) blocked = blocked || shares_slot(list[i], op, slots[size_t(k)]);
        if (blocked) break;
        const Key key{op.chunk, op.m};
        if (op.kind == PipeOp::forward) {
          if (!(k == 0 && op.chunk == 0) && !s.got_x.count(key)) return name(k, op) + " runs without its input";
          s.fwd.insert(key);
        } else {
          if (!(k == P - 1 && op.chunk == V - 1) && !s.got_dx.count(key))
            return name(k, op) + " runs without its output gradient";
          s.bwd.insert(key);
        }
        ++s.pc;
        progress = true;
      }
      if (!s.queue.empty() && !s.posted) {
        s.pending = parts(list[s.queue.front()], k, ring ? P : 0);
        for (const Part& p : s.pending)
          if (p.peer < 0 || p.peer >= P) return name(k, list[s.queue.front()]) + " talks to a missing stage";
        s.posted = true;
      }
    }
    for (int k = 0; k < P; ++k) {  // the comm queues' heads meet
      auto& mine = st[size_t(k)].pending;
      for (size_t i = 0; i < mine.size();) {
        const Part p = mine[i];
        auto& theirs = st[size_t(p.peer)].pending;
        auto it = p.send ? std::find_if(theirs.begin(), theirs.end(), [&](const Part& q) { return !q.send && q.peer == k; })
                         : theirs.end();
        if (it == theirs.end()) {
          ++i;
          continue;
        }
        int chunk = p.chunk;  // the chunk the payload lands in on the receiver
        if (ring && !p.grad && k == P - 1) ++chunk;
        if (ring && p.grad && k == 0) --chunk;
        if (it->grad != p.grad || it->m != p.m || it->chunk != chunk)
          return "stage " + std::to_string(k) + " sent " + (p.grad ? "dx" : "x") + std::to_string(p.chunk) + "." +
                 std::to_string(p.m) + " into stage " + std::to_string(p.peer) + "'s receive of " +
                 (it->grad ? "dx" : "x") + std::to_string(it->chunk) + "." + std::to_string(it->m);
        (p.grad ? st[size_t(p.peer)].got_dx : st[size_t(p.peer)].got_x).insert({it->chunk, it->m});
        theirs.erase(it);
        mine.erase(mine.begin() + long(i));
        progress = true;
      }
    }
    bool done = true;
    for (int k = 0; k < P; ++k) {
      Stage& s = st[size_t(k)];
      if (s.posted && s.pending.empty()) {
        s.complete.insert(s.queue.front());
        s.queue.pop_front();
        s.posted = false;
        progress = true;
      }
      done = done && s.pc == ops[size_t(k)].size() && s.queue.empty();
    }
    if (done) return "";
    if (!progress) return "deadlock";
  }
}

}  // namespace

TEST_CASE("pipeline overlap: exchanges move ahead of compute on other slots, written out for pp = 2, virtual_pp = 2") {
  // Stage 0 (slots: chunk 0 four, chunk 1 two). Blocking, each round's x exchange waits for the
  // round's backward too: "F0.2 B1.0 Sx0.2". Overlapped, x0.2 leaves right after its forward and
  // travels while B1.0 runs; likewise Sx0.3|Rx1.2 goes under B1.1 (chunk 1 slot 1, while x1.2 lands
  // in chunk 1 slot 0), and Rdx1.2 (chunk 1 slot 0) is received while B0.1 runs.
  const std::vector<PipeOp> blocking = interleaved_1f1b(2, 0, 2, 4);
  const std::vector<int> slots = pipeline_slots(2, 0, 2, 4);
  REQUIRE(slots == std::vector<int>{4, 2});
  CHECK(to_string(overlapped_order(blocking, slots)) ==
        "F0.0 Sx0.0 F0.1 Sx0.1|Rx1.0 F1.0 Sx1.0|Rx1.1 F1.1 Sx1.1 Rdx1.0 F0.2 Sx0.2 B1.0 Sdx1.0|Rdx1.1 F0.3 "
        "Sx0.3|Rx1.2 B1.1 Sdx1.1|Rdx0.0 F1.2 Sx1.2|Rx1.3 Rdx0.1 B0.0 F1.3 Sx1.3 Rdx1.2 B0.1 B1.2 Sdx1.2|Rdx1.3 "
        "B1.3 Sdx1.3|Rdx0.2 Rdx0.3 B0.2 B0.3");
  // 1F1B: each exchange carries the input or gradient the next compute needs, so nothing moves.
  const std::vector<PipeOp> plain = one_f_one_b(4, 1, 6);
  CHECK(overlapped_order(plain, {pipeline_slots(4, 1, 6)}) == plain);
}

TEST_CASE("pipeline overlap: same ops, same exchange order, data dependencies kept; the stages meet without waiting forever") {
  for (int P = 1; P <= 4; ++P)
    for (int count = 1; count <= 9; ++count) {
      std::vector<std::vector<PipeOp>> train, eval;
      std::vector<std::vector<int>> slots;
      for (int k = 0; k < P; ++k) {
        train.push_back(one_f_one_b(P, k, count));
        eval.push_back(forward_only(P, k, count));
        slots.push_back({pipeline_slots(P, k, count)});
        check_overlapped(train.back(), slots.back());
        check_overlapped(eval.back(), slots.back());
      }
      CAPTURE(P);
      CAPTURE(count);
      CHECK(simulate_overlapped(train, slots, false) == "");
      CHECK(simulate_overlapped(eval, slots, false) == "");
    }
  for (int P = 2; P <= 4; ++P)
    for (int V = 2; V <= 3; ++V)
      for (int count = P; count <= 4 * P; count += P) {
        std::vector<std::vector<PipeOp>> train, eval;
        std::vector<std::vector<int>> slots;
        for (int k = 0; k < P; ++k) {
          train.push_back(interleaved_1f1b(P, k, V, count));
          eval.push_back(forward_only(P, k, count, V));
          slots.push_back(pipeline_slots(P, k, V, count));
          check_overlapped(train.back(), slots.back());
          check_overlapped(eval.back(), slots.back());
        }
        CAPTURE(P);
        CAPTURE(V);
        CAPTURE(count);
        CHECK(simulate_overlapped(train, slots, true) == "");
        CHECK(simulate_overlapped(eval, slots, true) == "");
      }
}

TEST_CASE("pipeline overlap: the simulation catches a compute that would run without its input") {
  // A sanity check of the checker: dropping the stage-1 receive leaves F0 without its input (the
  // peer's send then has no partner, which the simulation reports first or as a deadlock).
  std::vector<std::vector<PipeOp>> train{one_f_one_b(2, 0, 2), one_f_one_b(2, 1, 2)};
  const std::vector<std::vector<int>> slots{{pipeline_slots(2, 0, 2)}, {pipeline_slots(2, 1, 2)}};
  REQUIRE(simulate_overlapped(train, slots, false) == "");
  train[1].erase(train[1].begin());  // Rx0
  CHECK(simulate_overlapped(train, slots, false) != "");
}

TEST_SUITE_END();
