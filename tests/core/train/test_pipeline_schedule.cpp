// The pipeline schedule (core/train/pipeline_schedule.hpp) without ranks: the 1F1B order each
// stage runs for pp = 1..4 and several micro-batch counts, written out for a few cases and
// checked for its invariants everywhere (every micro-batch once forward and once backward, in
// order; sends after and receives before the compute that needs them; activation slots never
// overwritten while in flight; the step's last backward is the last micro-batch's), and all the
// stages of a pipeline simulated together with blocking, unbuffered sends and receives: every
// send meets the receive of the same tensor, and no stage waits forever.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
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
};

std::vector<Part> parts(const PipeOp& op, int stage) {
  const int prev = stage - 1, next = stage + 1;
  switch (op.kind) {
    case PipeOp::recv_input:
      return {{false, false, prev, op.m}};
    case PipeOp::send_output:
      return {{true, false, next, op.m}};
    case PipeOp::recv_output_grad:
      return {{false, true, next, op.m}};
    case PipeOp::send_input_grad:
      return {{true, true, prev, op.m}};
    case PipeOp::send_output_recv_output_grad:
      return {{true, false, next, op.m}, {false, true, next, op.m2}};
    case PipeOp::send_input_grad_recv_input:
      return {{true, true, prev, op.m}, {false, false, prev, op.m2}};
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

TEST_SUITE_END();
