// The bookkeeping that lets the CUDA backend skip the per-step gradient memset: which writes may
// overwrite, which bytes must be zeroed first (and only those), what end() zeroes.
#include <doctest/doctest.h>

#include <utility>
#include <vector>

#include "kernels/grad_write_tracker.hpp"

TEST_SUITE_BEGIN("kernels");

using namespace recipe::kernels;

namespace {
struct Fixture {
  std::vector<float> buf = std::vector<float>(100, 0.f);
  std::vector<std::pair<int64_t, int64_t>> zeroed;  // [first, last) in floats of buf
  GradWriteTracker tracker{[this](void* p, size_t bytes) {
    const int64_t first = static_cast<float*>(p) - buf.data();
    zeroed.emplace_back(first, first + int64_t(bytes / sizeof(float)));
  }};
  Tensor at(int64_t first, int64_t n) { return Tensor(buf.data() + first, DType::f32, Device::cpu, {n}); }
};
using Span = std::pair<int64_t, int64_t>;
}  // namespace

TEST_CASE("grad tracker: first whole write overwrites, later ones accumulate") {
  Fixture f;
  // a = [0,10), b = [10,30) adjacent (like q and k), c = [40,50) after a gap.
  f.tracker.begin({f.at(0, 10), f.at(10, 20), f.at(40, 10)});
  CHECK(f.tracker.fresh_bytes() == 40 * sizeof(float));
  CHECK(f.tracker.whole_write(f.at(0, 10)) == GradWriteTracker::Write::overwrite);
  CHECK(f.tracker.whole_write(f.at(0, 10)) == GradWriteTracker::Write::accumulate);
  CHECK(f.zeroed.empty());
  f.tracker.end();
  // b and c were never written: end() zeroes exactly them (b, c; not the gap [30, 40)).
  CHECK(f.zeroed == std::vector<Span>{{10, 30}, {40, 50}});
  CHECK(f.tracker.fresh_bytes() == 0);
  CHECK_FALSE(f.tracker.active());
}

TEST_CASE("grad tracker: a packed view over adjacent tensors is one whole write") {
  Fixture f;
  f.tracker.begin({f.at(0, 10), f.at(10, 10), f.at(20, 10)});
  CHECK(f.tracker.whole_write(f.at(0, 30)) == GradWriteTracker::Write::overwrite);
  f.tracker.end();
  CHECK(f.zeroed.empty());
}

TEST_CASE("grad tracker: a write over partly written memory zeroes only the fresh parts") {
  Fixture f;
  f.tracker.begin({f.at(0, 30)});
  CHECK(f.tracker.whole_write(f.at(10, 5)) == GradWriteTracker::Write::overwrite);  // middle
  CHECK(f.tracker.whole_write(f.at(0, 30)) == GradWriteTracker::Write::accumulate);
  CHECK(f.zeroed == std::vector<Span>{{0, 10}, {15, 30}});
  f.zeroed.clear();
  f.tracker.end();
  CHECK(f.zeroed.empty());
}

TEST_CASE("grad tracker: a scatter (partial write) into fresh memory zeroes it first") {
  Fixture f;
  f.tracker.begin({f.at(0, 20), f.at(20, 4)});
  f.tracker.partial_write(f.at(0, 20));
  CHECK(f.zeroed == std::vector<Span>{{0, 20}});
  f.tracker.partial_write(f.at(0, 20));  // now written: nothing more to zero
  CHECK(f.zeroed.size() == 1);
  // A whole write after the scatter accumulates (tied embedding: classifier after embedding).
  CHECK(f.tracker.whole_write(f.at(0, 20)) == GradWriteTracker::Write::accumulate);
  f.tracker.end();
  CHECK(f.zeroed == std::vector<Span>{{0, 20}, {20, 24}});
}

TEST_CASE("grad tracker: outside begin/end everything accumulates and nothing is zeroed") {
  Fixture f;
  CHECK(f.tracker.whole_write(f.at(0, 10)) == GradWriteTracker::Write::accumulate);
  f.tracker.partial_write(f.at(0, 10));
  f.tracker.end();
  CHECK(f.zeroed.empty());
  // Memory outside the tracked tensors accumulates even while active.
  f.tracker.begin({f.at(0, 10)});
  CHECK(f.tracker.whole_write(f.at(50, 10)) == GradWriteTracker::Write::accumulate);
  CHECK(f.zeroed.empty());
  f.tracker.end();
}

TEST_CASE("grad tracker: overlapping gradient tensors are refused") {
  Fixture f;
  CHECK_THROWS_AS(f.tracker.begin({f.at(0, 10), f.at(5, 10)}), std::invalid_argument);
  CHECK_THROWS_AS(f.tracker.begin({f.at(5, 10), f.at(0, 10)}), std::invalid_argument);
}

TEST_CASE("grad tracker: begin again restarts the step (micro-batches of the next step)") {
  Fixture f;
  f.tracker.begin({f.at(0, 10)});
  CHECK(f.tracker.whole_write(f.at(0, 10)) == GradWriteTracker::Write::overwrite);
  f.tracker.end();
  f.tracker.begin({f.at(0, 10)});
  CHECK(f.tracker.whole_write(f.at(0, 10)) == GradWriteTracker::Write::overwrite);
  f.tracker.end();
  CHECK(f.zeroed.empty());
}

TEST_SUITE_END();
