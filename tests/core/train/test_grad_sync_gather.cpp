// ZeRO-1's overlapped weight gather, its bookkeeping alone (GradSync against a recording
// communicator, no ranks): the gathers start in forward order (descending ready phase), each
// forward phase waits for exactly the buckets it is the first to need, stale weights are gathered
// by complete_weights, and the blocking form still gathers at once. And the seam it hangs on:
// Model::forward calls the weights hook with every phase of its chunk, in forward order, before
// reading that phase's weights.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/model/init.hpp"
#include "core/model/model.hpp"
#include "core/model/param_layout.hpp"
#include "core/train/grad_sync.hpp"
#include "tests/core/core_test_util.hpp"

TEST_SUITE_BEGIN("core/train");

using namespace recipe;
using namespace recipe::core;

namespace {

// DP rank 0 of 2 that moves nothing and records the calls GradSync makes.
class RecordingComm final : public Comm {
 public:
  struct Call {
    std::string what;  // "start", "wait", "gather", "wait_all"
    int64_t begin = 0;
    int64_t seq = -1;
  };
  std::vector<Call> calls;
  std::vector<const void*> started;  // out.ptr of op seq

  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string name() const override { return "recording"; }
  void all_reduce_sum(kernels::Tensor) override {}
  double all_reduce_sum(double v) override { return v; }
  double all_reduce_max(double v) override { return v; }
  void broadcast(kernels::Tensor, int) override {}
  void barrier() override {}
  void all_reduce_max(kernels::Tensor) override {}
  void reduce_scatter_sum(kernels::Tensor, kernels::Tensor) override {}
  void all_gather(kernels::Tensor out, kernels::Tensor) override { calls.push_back({"gather", offset(out), -1}); }
  void send_recv(kernels::Tensor, int, kernels::Tensor, int) override {}
  Op all_gather_start(kernels::Tensor out, kernels::Tensor) override {
    const int64_t seq = int64_t(started.size());
    started.push_back(out.ptr);
    calls.push_back({"start", offset(out), seq});
    return {seq};
  }
  void wait(Op op) override { calls.push_back({"wait", -1, op.seq}); }
  void wait_all() override { calls.push_back({"wait_all", -1, -1}); }

  const float* base = nullptr;  // the compute buffer, to turn pointers into offsets
  int64_t offset(const kernels::Tensor& t) const { return static_cast<const float*>(t.ptr) - base; }
};

struct Fixture {
  plan::Plan p = test::gpt_tiny_plan();
  std::unique_ptr<kernels::Backend> be = test::cpu_backend();
  RecordingComm dp;
  ParamLayout layout;
  std::unique_ptr<GradSync> sync;
  std::unique_ptr<ParamStore> store;

  explicit Fixture(int64_t bucket_elems) {
    p.model.num_layers = 4;
    test::fill_derived(p);
    LayoutOptions o;
    o.align = kParamAlign * 2;  // ZeRO-1 over 2 DP ranks
    layout = build_param_layout(model_shape(p), p.optimizer, o);
    sync = std::make_unique<GradSync>(layout, dp, /*zero1=*/true, bucket_elems);
    store = std::make_unique<ParamStore>(*be, layout);
    dp.base = static_cast<const float*>(store->compute().ptr);  // CPU: the compute copy is the f32 master
  }
  size_t bucket_at(int64_t begin) const {
    for (size_t i = 0; i < sync->buckets().size(); ++i)
      if (sync->buckets()[i].begin == begin) return i;
    FAIL("no bucket starts at " << begin);
    return 0;
  }
};

}  // namespace

TEST_CASE("ZeRO-1 overlapped gather: forward order, and each phase waits for the buckets it needs first") {
  for (int64_t target : {int64_t(0), int64_t(20000), int64_t(1) << 40}) {  // per layer, a few layers, one per group
    CAPTURE(target);
    Fixture f(target);
    f.sync->set_overlap_gather(true);
    REQUIRE(f.sync->overlap_gather());
    const std::vector<GradBucket>& buckets = f.sync->buckets();
    const int top = f.layout.num_phases() - 1;  // the embeddings' phase

    f.sync->start_weight_gathers(*f.store);
    // Every bucket once, in forward order: descending ready phase, the embeddings' first.
    REQUIRE(f.dp.calls.size() == buckets.size());
    std::set<size_t> seen;
    int last_phase = top + 1;
    for (const auto& c : f.dp.calls) {
      REQUIRE(c.what == "start");
      const size_t i = f.bucket_at(c.begin);
      CHECK(seen.insert(i).second);
      CHECK(buckets[i].ready_phase <= last_phase);
      last_phase = buckets[i].ready_phase;
    }
    CHECK(buckets[f.bucket_at(f.dp.calls.front().begin)].ready_phase == top);

    // Forward: phase by phase, each bucket is waited for exactly when the first phase it holds comes.
    std::map<int64_t, size_t> bucket_of_seq;
    for (const auto& c : f.dp.calls) bucket_of_seq[c.seq] = f.bucket_at(c.begin);
    std::set<size_t> waited;
    for (int phase = top; phase >= 0; --phase) {
      f.dp.calls.clear();
      f.sync->wait_weights(phase);
      f.sync->wait_weights(phase);  // twice (the next micro-batch): nothing more
      for (const auto& c : f.dp.calls) {
        REQUIRE(c.what == "wait");
        CHECK(waited.insert(bucket_of_seq.at(c.seq)).second);
      }
      for (size_t i = 0; i < buckets.size(); ++i) {
        CAPTURE(phase);
        CAPTURE(i);
        CHECK(waited.count(i) == (buckets[i].ready_phase >= phase ? 1u : 0u));
      }
    }
    CHECK(waited.size() == buckets.size());

    // After AdamW nothing is gathered yet; complete_weights gathers every bucket and waits.
    f.dp.calls.clear();
    f.sync->weights_updated(*f.store);
    CHECK(f.dp.calls.empty());
    f.sync->complete_weights(*f.store);
    size_t starts = 0, waits = 0;
    for (const auto& c : f.dp.calls) starts += c.what == "start", waits += c.what == "wait";
    CHECK(starts == buckets.size());
    CHECK(waits == buckets.size());
    CHECK(f.dp.calls.back().what == "wait_all");
    f.dp.calls.clear();
    f.sync->complete_weights(*f.store);  // whole already: nothing to do
    CHECK(f.dp.calls.empty());
  }
}

TEST_CASE("ZeRO-1 blocking gather: AdamW's weights are gathered at once, and the overlap hooks do nothing") {
  Fixture f(0);
  f.sync->set_overlap_gather(false);
  CHECK_FALSE(f.sync->overlap_gather());
  f.sync->start_weight_gathers(*f.store);
  f.sync->wait_weights(0);
  f.sync->complete_weights(*f.store);
  CHECK(f.dp.calls.empty());
  f.sync->weights_updated(*f.store);
  REQUIRE(f.dp.calls.size() == f.sync->buckets().size());
  for (const auto& c : f.dp.calls) CHECK(c.what == "gather");
}

TEST_CASE("Model::forward asks for each phase's weights in forward order before reading them") {
  plan::Plan p = test::gpt_tiny_plan();
  p.model.num_layers = 4;
  p.trainer.micro_batch_size = 1;
  test::fill_derived(p);
  const ModelShape s = model_shape(p);
  auto be = test::cpu_backend();
  std::vector<int32_t> tokens(size_t(s.seq + 1));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(i % 7);
  std::vector<float> losses(size_t(s.seq));

  SUBCASE("one stage: the embeddings, the layers bottom-up, then the head") {
    ParamStore store(*be, build_param_layout(s, p.optimizer));
    init_params(store, 1);
    Model m(s, 1, Recompute::none, *be, store);
    std::vector<int> phases;
    m.set_weights_hook([&](int ph) { phases.push_back(ph); });
    m.load_tokens(0, tokens.data());
    m.forward(0, false, kernels::Tensor(losses.data(), kernels::DType::f32, kernels::Device::cpu, {s.seq}),
              kernels::Tensor());
    CHECK(phases == std::vector<int>{5, 4, 3, 2, 1, 0});
  }
  SUBCASE("interleaved stage 0 of PP2 x virtual_pp 2: chunk 0 (embeddings, layer 0), chunk 1 (layer 2)") {
    LayoutOptions o;
    o.chunks = {{.first_layer = 0, .num_layers = 1, .first_stage = true, .last_stage = false},
                {.first_layer = 2, .num_layers = 1, .first_stage = false, .last_stage = false}};
    ParamStore store(*be, build_param_layout(s, p.optimizer, o));
    init_params(store, 1);
    Model chunk0(s, 1, Recompute::none, *be, store, nullptr, 1, 0);
    Model chunk1(s, 1, Recompute::none, *be, store, nullptr, 1, 1, &chunk0);
    std::vector<int> phases;
    chunk0.set_weights_hook([&](int ph) { phases.push_back(ph); });
    chunk1.set_weights_hook([&](int ph) { phases.push_back(100 + ph); });
    chunk0.load_tokens(0, tokens.data());
    const kernels::Tensor none(losses.data(), kernels::DType::f32, kernels::Device::cpu, {s.seq});
    chunk0.forward(0, false, none, kernels::Tensor());
    be->copy(chunk1.stage_input(0), chunk0.stage_output(0));
    chunk1.forward(0, false, none, kernels::Tensor());
    // Layout phases: embeddings 3, layer 0 → 2, layer 2 → 1 (ParamSpec::ready_phase).
    CHECK(phases == std::vector<int>{3, 2, 101});
  }
}

TEST_SUITE_END();
