// The pieces beside Trainer::step, on the CPU reference: the token loader (one routine reads a
// micro-batch, checks it against the vocabulary and splits it into inputs and targets, for the
// model's slot and for the graph's staging alike), the step graph's warm-up / capture / fall-back
// sequence (the CPU backend cannot record, so the capture fails with the reason and the step runs
// uncaptured from then on), and the phase timer (silent when off, one line per phase when on).
// The captured CUDA step itself is tested in tests/kernels/cuda/test_cuda_graph.cpp.
#include <doctest/doctest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/model/token_rows.hpp"
#include "core/train/adamw.hpp"
#include "core/train/phase_timer.hpp"
#include "core/train/step_graph.hpp"
#include "core/train/token_loader.hpp"
#include "tests/core/core_test_util.hpp"

TEST_SUITE_BEGIN("core/train");

using namespace recipe;
using namespace recipe::core;

namespace {

// Sample i is T+1 consecutive ids starting at i·10, modulo `vocab` unless `bad` is set.
class CountingSource : public data::SampleSource {
 public:
  CountingSource(int seq_plus_one, int vocab, bool bad = false) : n_(seq_plus_one), vocab_(vocab), bad_(bad) {}
  int seq_plus_one() const override { return n_; }
  int64_t size() const override { return 1000; }
  void sample(int64_t idx, int32_t* out) const override {
    for (int t = 0; t < n_; ++t) out[t] = int32_t((idx * 10 + t) % vocab_);
    if (bad_ && idx == 1) out[2] = vocab_;
  }

 private:
  int n_, vocab_;
  bool bad_;
};

}  // namespace

TEST_CASE("token loader: a micro-batch split into inputs [:, :T] and targets [:, 1:], checked") {
  const int B = 2, T = 4, V = 50;
  CountingSource src(T + 1, V);
  TokenLoader loader(B, T, V);
  std::vector<int32_t> in(B * T), tg(B * T);
  loader.split(src, 3, in.data(), tg.data());  // samples 3 and 4
  CHECK(in == std::vector<int32_t>{30, 31, 32, 33, 40, 41, 42, 43});
  CHECK(tg == std::vector<int32_t>{31, 32, 33, 34, 41, 42, 43, 44});
  CountingSource bad(T + 1, V, true);
  try {
    loader.split(bad, 0, in.data(), tg.data());
    FAIL("an id outside the vocabulary was accepted");
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    CHECK(m.find("token id 50 (sample row 1, position 2) is outside model.vocab_size=50") != std::string::npos);
  }
}

TEST_CASE("step graph: off with a reason, or warm-up then a failed capture on a backend that cannot record") {
  auto be = test::cpu_backend();
  {
    StepGraph off(*be, 2, 8, "trainer.cuda_graph=false");
    CHECK_FALSE(off.on());
    CHECK_FALSE(off.active());
    int runs = 0;
    CHECK_FALSE(off.run([&] { ++runs; }));
    CHECK(runs == 0);
    CHECK(off.status() == "trainer.cuda_graph=false");
  }
  StepGraph g(*be, 2, 4, "");
  REQUIRE(g.on());
  CHECK(g.status().empty());  // the capture is still to come
  // The staging: micro-batch m's inputs then its targets; the uploads copy them to the device.
  for (int m = 0; m < 2; ++m)
    for (int i = 0; i < 4; ++i) {
      g.inputs(m)[i] = 100 * m + i;
      g.targets(m)[i] = 100 * m + i + 1;
    }
  // The optimizer's per-step scalars travel through its own staging (AdamW: lr, bias corrections).
  AdamW opt(*be, plan::OptimizerConfig{}, LrSchedule(1e-3, 0.0, 0, 10, LrSchedule::Decay::constant), {}, 0);
  REQUIRE(opt.enable_graph_staging().empty());
  opt.stage_schedule({0.5f, 2.0f, 4.0f});
  using kernels::DType;
  using kernels::Tensor;
  Tensor in(be->alloc(4 * sizeof(int32_t)), DType::i32, be->device(), {4});
  Tensor tg(be->alloc(4 * sizeof(int32_t)), DType::i32, be->device(), {4});
  int runs = 0;
  auto work = [&] {
    ++runs;
    opt.upload_staged();
    g.upload_tokens(1, in, tg);
  };
  CHECK(g.run(work));  // the warm-up runs the work eagerly
  CHECK(runs == 1);
  std::vector<int32_t> h(4);
  be->to_host(h.data(), tg);
  CHECK(h == std::vector<int32_t>{101, 102, 103, 104});
  CHECK(test::to_host(*be, opt.staged_schedule()) == std::vector<float>{0.5f, 2.0f, 4.0f});
  CHECK_FALSE(g.run(work));  // the capture fails: this step runs uncaptured, by the caller
  CHECK(runs == 1);
  CHECK_FALSE(g.on());
  CHECK_FALSE(g.active());
  CHECK(g.steps() == 0);
  CHECK(g.status().find("capture failed: ") == 0);
  CHECK(g.status().find("cannot record") != std::string::npos);
  CHECK_FALSE(g.run(work));
  be->free(in.ptr);
  be->free(tg.ptr);
}

TEST_CASE("phase timer: silent when off, one line per phase when on") {
  auto be = test::cpu_backend();
  PhaseTimer off(*be, false);
  off.start();
  off.mark(PhaseTimer::forward_backward);
  off.end_step();
  CHECK(off.report().empty());
  PhaseTimer on(*be, true);
  CHECK(on.report().empty());  // no step timed yet
  on.start();
  for (PhaseTimer::Phase p :
       {PhaseTimer::forward_backward, PhaseTimer::update, PhaseTimer::read_back, PhaseTimer::forward_alone})
    on.mark(p);
  on.end_step();
  const std::string r = on.report();
  CHECK(r.find("mean ms/step over 1 steps") != std::string::npos);
  for (const char* name : {"forward+backward", "grad norm + clip + AdamW", "loss/norm read-back", "forward alone"})
    CHECK(r.find(name) != std::string::npos);
}

TEST_SUITE_END();
