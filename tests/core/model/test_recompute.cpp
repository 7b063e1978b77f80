// trainer.recompute levels (none, gelu, norm, full) on the CPU: the same training bit for bit, an
// activation arena that shrinks by the buffers each level stops keeping, and a memory estimate
// (dsl) that is the engine's arena byte for byte.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/model/activations.hpp"
#include "core/model/model.hpp"
#include "core/train/trainer.hpp"
#include "plan/memory_estimate.hpp"
#include "tests/core/core_test_util.hpp"

TEST_SUITE_BEGIN("core/model");

using namespace recipe;
using namespace recipe::core;

namespace {

const char* const kLevels[] = {"none", "gelu", "norm", "full"};

struct Run {
  std::vector<double> losses, grad_norms;
  std::vector<float> master;
  size_t activation_bytes = 0;
};

Run train(plan::Plan plan, const std::string& level, int steps) {
  plan.trainer.recompute = parse_recompute(level);
  auto be = test::cpu_backend();
  // One fixed batch (period = global batch): the loss falls within 10 steps.
  Trainer tr(plan, *be, nullptr, test::random_tokens(plan, 5, plan.trainer.global_batch_size), nullptr);
  Run r;
  for (int i = 0; i < steps; ++i) {
    const StepResult s = tr.step();
    REQUIRE(s.finite);
    r.losses.push_back(s.loss);
    r.grad_norms.push_back(s.grad_norm);
  }
  r.master = test::to_host(*be, tr.params().master());
  r.activation_bytes = tr.model().activation_bytes();
  return r;
}

size_t sum_bytes(const std::vector<ArenaEntry>& entries) {
  size_t n = 0;
  for (const auto& e : entries) n += e.bytes * size_t(e.count);
  return n;
}

int64_t count_of(const std::vector<ArenaEntry>& entries, const std::string& name) {
  int64_t n = 0;
  for (const auto& e : entries)
    if (e.name == name) n += e.count;
  return n;
}

size_t aligned(int64_t bytes) { return size_t((bytes + 255) / 256 * 256); }

plan::Plan tiny(bool llama, int layers) {
  plan::Plan p = llama ? test::llama_tiny_plan() : test::gpt_tiny_plan();
  p.model.num_layers = layers;
  test::fill_derived(p);
  return p;
}

}  // namespace

TEST_CASE("recompute: every level trains gpt_tiny and llama_tiny bit for bit like none") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    const plan::Plan plan = tiny(llama, 3);
    const Run none = train(plan, "none", 10);
    CHECK(none.losses.back() < none.losses.front());
    for (const char* level : {"gelu", "norm", "full"}) {
      CAPTURE(level);
      const Run r = train(plan, level, 10);
      REQUIRE(r.losses.size() == none.losses.size());
      CHECK(std::memcmp(r.losses.data(), none.losses.data(), none.losses.size() * sizeof(double)) == 0);
      CHECK(std::memcmp(r.grad_norms.data(), none.grad_norms.data(), none.grad_norms.size() * sizeof(double)) == 0);
      REQUIRE(r.master.size() == none.master.size());
      CHECK(std::memcmp(r.master.data(), none.master.data(), none.master.size() * sizeof(float)) == 0);
      CHECK(r.activation_bytes < none.activation_bytes);
    }
  }
}

TEST_CASE("recompute: the arena sheds one [N, ffn] per layer (gelu) and two [N, C] per layer (norm)") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    const plan::Plan plan = tiny(llama, 4);
    const ModelShape s = model_shape(plan);
    const int B = plan.trainer.micro_batch_size, L = s.arch.layers;
    const int64_t N = int64_t(B) * s.seq;
    const size_t fc_act = aligned(N * s.arch.ffn * 4), ln = aligned(N * s.arch.hidden * 4);
    auto breakdown = [&](Recompute r) { return activation_breakdown(s, B, r, kernels::DType::f32); };
    const auto none = breakdown(Recompute::none), gelu = breakdown(Recompute::gelu), norm = breakdown(Recompute::norm),
               full = breakdown(Recompute::full);
    CHECK(count_of(none, "fc_act") == L);
    CHECK(count_of(gelu, "fc_act") == 0);
    CHECK(count_of(gelu, "ln1") == L);
    CHECK(count_of(norm, "ln1") == 0);
    CHECK(count_of(norm, "ln2") == 0);
    CHECK(count_of(norm, "ln (shared, recomputed)") == 1);
    CHECK(count_of(full, "residual") == L);
    CHECK(count_of(full, "fc_pre") == 1);  // the scratch set
    // The shared fc_act sits inside the transient region, which it may enlarge by at most itself.
    CHECK(sum_bytes(none) - sum_bytes(gelu) >= size_t(L - 1) * fc_act);
    CHECK(sum_bytes(none) - sum_bytes(gelu) <= size_t(L) * fc_act);
    CHECK(sum_bytes(gelu) - sum_bytes(norm) == size_t(2 * L - 1) * ln);
    CHECK(sum_bytes(full) < sum_bytes(norm));

    // The model's arena is exactly what the breakdown lists.
    for (Recompute r : {Recompute::none, Recompute::gelu, Recompute::norm, Recompute::full}) {
      CAPTURE(recompute_name(r));
      plan::Plan p = plan;
      p.trainer.recompute = r;
      auto be = test::cpu_backend();
      Trainer tr(p, *be, nullptr, test::random_tokens(p), nullptr);
      CHECK(tr.model().activation_bytes() == sum_bytes(breakdown(r)));
      CHECK(sum_bytes(tr.model().activation_breakdown()) == tr.model().activation_bytes());
    }
  }
}

TEST_CASE("recompute: the dsl memory estimate is the engine's arena, per level, stage and slot count") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    for (const char* level : kLevels) {
      CAPTURE(level);
      plan::Plan plan = tiny(llama, 4);
      plan.trainer.recompute = parse_recompute(level);
      const ModelShape s = model_shape(plan);
      const Recompute r = parse_recompute(level);
      const size_t one = sum_bytes(activation_breakdown(s, plan.trainer.micro_batch_size, r, kernels::DType::f32));
      CHECK(plan::estimate_memory(plan).activations == int64_t(one));

      // Two pipeline stages of two layers, 4 micro-batches: stage 0 keeps 2 in flight, stage 1 one.
      plan::Plan pp = plan;
      pp.parallelism.pp = 2;
      pp.trainer.global_batch_size = 4 * pp.trainer.micro_batch_size;
      test::fill_derived(pp);
      ModelShape half = s;
      half.arch.layers = 2;
      CHECK(plan::estimate_stage_memory(pp, 0).activations ==
            int64_t(sum_bytes(activation_breakdown(half, pp.trainer.micro_batch_size, r, kernels::DType::f32, 2))));
      CHECK(plan::estimate_stage_memory(pp, 1).activations ==
            int64_t(sum_bytes(activation_breakdown(half, pp.trainer.micro_batch_size, r, kernels::DType::f32, 1))));
    }
  }
}

TEST_CASE("sequence parallelism: the dsl memory estimate is the arena of N/tp residual rows, and smaller") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    for (const char* level : kLevels) {
      CAPTURE(level);
      plan::Plan tp2 = tiny(llama, 4);
      tp2.trainer.recompute = parse_recompute(level);
      tp2.parallelism.tp = 2;
      test::fill_derived(tp2);
      plan::Plan sp = tp2;
      sp.parallelism.sequence_parallel = true;
      sp.trainer.classifier_chunk_rows = plan::classifier_chunk_rows(sp);
      // TP rank 0's arena (Model carves its local shape) plus the vocab-parallel loss scratch.
      auto arena = [&](const plan::Plan& p) {
        ModelShape local = model_shape(p);
        local.arch.heads /= 2;
        local.arch.kv_heads /= 2;
        local.arch.ffn /= 2;
        local.arch.padded_vocab /= 2;
        const int B = p.trainer.micro_batch_size;
        const auto entries = activation_breakdown(local, B, p.trainer.recompute, kernels::DType::f32);
        const int64_t chunk = std::min<int64_t>(p.trainer.classifier_chunk_rows, int64_t(B) * p.model.seq_length);
        return std::pair{entries, sum_bytes(entries) + aligned(chunk * 4) + aligned(2 * chunk * 4)};
      };
      const auto [tp_entries, tp_bytes] = arena(tp2);
      const auto [sp_entries, sp_bytes] = arena(sp);
      CHECK(model_shape(sp).sequence_parallel == 2);
      CHECK(plan::estimate_memory(tp2).activations == int64_t(tp_bytes));
      CHECK(plan::estimate_memory(sp).activations == int64_t(sp_bytes));
      CHECK(sp_bytes < tp_bytes);
      CHECK(count_of(sp_entries, "sequence-parallel whole rows") == 2);
      CHECK(count_of(tp_entries, "sequence-parallel whole rows") == 0);
      // The residual stream holds half the rows.
      const int64_t N = int64_t(sp.trainer.micro_batch_size) * sp.model.seq_length, C = sp.model.hidden_size;
      for (const auto& e : sp_entries)
        if (e.name == "residual" || e.name == "dresidual") CHECK(e.bytes == aligned(N / 2 * C * 4));
    }
  }
}

namespace {

// A TP group of two seen from rank 0, for building a Model of one TP rank in one process: the
// constructor communicates nothing, and any collective here would be a bug of the test.
class TwoRankGroup final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string name() const override { return "tp (test stub)"; }
  void all_reduce_sum(kernels::Tensor) override { fail(); }
  double all_reduce_sum(double) override { fail(); }
  double all_reduce_max(double) override { fail(); }
  void broadcast(kernels::Tensor, int) override { fail(); }
  void barrier() override { fail(); }
  void all_reduce_max(kernels::Tensor) override { fail(); }
  void reduce_scatter_sum(kernels::Tensor, kernels::Tensor) override { fail(); }
  void all_gather(kernels::Tensor, kernels::Tensor) override { fail(); }
  void send_recv(kernels::Tensor, int, kernels::Tensor, int) override { fail(); }

 private:
  [[noreturn]] static void fail() { throw std::logic_error("TwoRankGroup: no collective expected"); }
};

}  // namespace

TEST_CASE("sequence parallelism: a TP2+SP plan's Model holds N/2 residual rows in the arena the estimate says") {
  for (bool llama : {false, true}) {
    for (bool sp : {false, true}) {
      CAPTURE(llama);
      CAPTURE(sp);
      plan::Plan p = tiny(llama, 2);
      p.parallelism.tp = 2;
      p.parallelism.sequence_parallel = sp;
      test::fill_derived(p);
      const ModelShape s = model_shape(p);
      LayoutOptions lo;
      lo.tp_size = 2;
      auto be = test::cpu_backend();
      ParamStore store(*be, build_param_layout(s, p.optimizer, lo));
      TwoRankGroup tp;
      const Model m(s, p.trainer.micro_batch_size, p.trainer.recompute, *be, store, &tp);
      CHECK(m.residual_rows() == (sp ? m.rows() / 2 : m.rows()));
      CHECK(m.stage_input(0).numel() == m.residual_rows() * s.arch.hidden);
      CHECK(m.stage_output_grad(0).numel() == m.residual_rows() * s.arch.hidden);
      CHECK(int64_t(m.activation_bytes()) == plan::estimate_memory(p).activations);
    }
  }
}

TEST_CASE("recompute: names round-trip and a wrong one names the key and the choices") {
  for (const char* level : kLevels) CHECK(std::string(recompute_name(parse_recompute(level))) == level);
  CHECK_THROWS_WITH_AS(parse_recompute("selective"), doctest::Contains("\"gelu\""), std::invalid_argument);
  CHECK(plan::to_string(plan::TrainerConfig{}.recompute) == "gelu");
}

TEST_SUITE_END();
