// Parameter layout (groups, packs, alignment, TP shards), counter-based init, rank layout.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "core/model/init.hpp"
#include "core/model/param_layout.hpp"
#include "core/parallel/parallel_state.hpp"
#include "tests/core/core_test_util.hpp"

TEST_SUITE_BEGIN("core/model");

using namespace recipe;
using namespace recipe::core;

namespace {

std::vector<float> values(const ParamSpec& p, uint64_t seed) {
  std::vector<float> v(size_t(p.numel));
  init_values(p, seed, 0, p.numel, v.data());
  return v;
}

}  // namespace

TEST_CASE("layout: decayed weights first, then norms/biases/embeddings; packs are adjacent") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    plan::Plan plan = llama ? test::llama_tiny_plan() : test::gpt_tiny_plan();
    const ModelShape s = model_shape(plan);
    const ParamLayout L = build_param_layout(s, plan.optimizer);
    CHECK(L.decay_begin == 0);
    CHECK(L.nodecay_begin == L.decay_begin + L.decay_numel);
    CHECK(L.total_numel == L.nodecay_begin + L.nodecay_numel);
    std::set<std::string> names;
    int64_t prev_end = 0;
    for (const ParamSpec& p : L.params) {
      CAPTURE(p.name);
      CHECK(names.insert(p.name).second);
      CHECK(p.offset >= prev_end);  // no overlap, in buffer order
      prev_end = p.offset + p.numel;
      if (p.weight_decay)
        CHECK(p.offset + p.numel <= L.decay_begin + L.decay_numel);
      else
        CHECK(p.offset >= L.nodecay_begin);
      const bool is_norm_or_bias = p.name.ends_with(".bias") || p.name.find("norm") != std::string::npos;
      const bool is_embedding = p.name.starts_with("embedding.") || p.name == "lm_head.weight";
      CHECK(p.weight_decay == !(is_norm_or_bias || is_embedding));
    }
    for (int l = 0; l < s.arch.layers; ++l) {
      const std::string a = "layers." + std::to_string(l) + ".attention.";
      const ParamSpec &q = L.get(a + "q.weight"), &k = L.get(a + "k.weight"), &v = L.get(a + "v.weight");
      CHECK(q.offset % kParamAlign == 0);
      CHECK(k.offset == q.offset + q.numel);
      CHECK(v.offset == k.offset + k.numel);
      if (llama) {
        const std::string m = "layers." + std::to_string(l) + ".mlp.";
        CHECK(L.get(m + "up.weight").offset == L.get(m + "gate.weight").offset + L.get(m + "gate.weight").numel);
        CHECK(L.get(m + "down.weight").global_shape == std::vector<int64_t>{64, 192});
        CHECK(L.get(a + "k.weight").global_shape == std::vector<int64_t>{32, 64});
      } else {
        CHECK(L.get(a + "k.bias").offset == L.get(a + "q.bias").offset + 64);
        CHECK(L.get(a + "v.bias").offset == L.get(a + "k.bias").offset + 64);
      }
    }
    CHECK(bool(L.find("lm_head.weight")) == llama);
    CHECK(bool(L.find("embedding.position.weight")) == !llama);
    CHECK(bool(L.find("final_norm.bias")) == !llama);
    CHECK(L.get("embedding.word.weight").global_shape == std::vector<int64_t>{256, 64});
  }
  // GPT-2 small count: 124,439,808 parameters with the vocab padded to 50304.
  plan::Plan gpt2 = test::gpt_tiny_plan();
  gpt2.model.num_layers = 12;
  gpt2.model.hidden_size = 768;
  gpt2.model.num_attention_heads = 12;
  gpt2.model.vocab_size = 50257;
  gpt2.model.seq_length = 1024;
  gpt2.model.head_dim = gpt2.model.ffn_hidden_size = gpt2.model.max_position_embeddings = 0;
  gpt2.model.num_kv_heads = 0;
  test::fill_derived(gpt2);
  CHECK(build_param_layout(model_shape(gpt2), gpt2.optimizer).num_params() == 124475904);
}

TEST_CASE("layout: decay_embeddings moves embeddings into the decayed group") {
  plan::Plan plan = test::gpt_tiny_plan();
  plan.optimizer.decay_embeddings = true;
  const ParamLayout L = build_param_layout(model_shape(plan), plan.optimizer);
  CHECK(L.get("embedding.word.weight").weight_decay);
  CHECK(L.get("embedding.word.weight").offset < L.decay_numel);
  CHECK_FALSE(L.get("final_norm.weight").weight_decay);
}

TEST_CASE("init: Megatron statistics (normal std, scaled output projections, zero biases, unit norms)") {
  plan::Plan plan = test::gpt_tiny_plan();
  plan.model.num_layers = 4;
  plan.model.hidden_size = 128;
  test::fill_derived(plan);
  const ParamLayout L = build_param_layout(model_shape(plan), plan.optimizer);
  auto stats = [&](const std::string& name) {
    std::vector<float> v = values(L.get(name), 5);
    double s = 0, s2 = 0;
    for (float x : v) s += x, s2 += double(x) * x;
    const double mean = s / v.size();
    return std::pair{mean, std::sqrt(s2 / v.size() - mean * mean)};
  };
  auto [m1, sd1] = stats("layers.1.mlp.fc1.weight");
  CHECK(std::fabs(m1) < 1e-3);
  CHECK(sd1 == doctest::Approx(0.02).epsilon(0.03));
  auto [m2, sd2] = stats("layers.2.attention.proj.weight");
  CHECK(sd2 == doctest::Approx(0.02 / std::sqrt(8.0)).epsilon(0.03));
  CHECK(stats("layers.3.mlp.fc2.weight").second == doctest::Approx(0.02 / std::sqrt(8.0)).epsilon(0.03));
  CHECK(stats("embedding.word.weight").second == doctest::Approx(0.02).epsilon(0.03));
  for (float x : values(L.get("layers.0.mlp.fc1.bias"), 5)) CHECK(x == 0.0f);
  for (float x : values(L.get("layers.0.attention_norm.weight"), 5)) CHECK(x == 1.0f);
  CHECK(values(L.get("layers.0.mlp.fc1.weight"), 5) != values(L.get("layers.0.mlp.fc1.weight"), 6));
  CHECK(values(L.get("layers.0.mlp.fc1.weight"), 5) != values(L.get("layers.1.mlp.fc1.weight"), 5));
}

TEST_CASE("init: a parameter's values depend only on (seed, name, index), not on the other parameters") {
  plan::Plan small = test::gpt_tiny_plan();
  plan::Plan big = small;
  big.model.num_layers = 3;
  big.model.vocab_size = 1000;  // shifts every offset
  big.optimizer.decay_embeddings = true;
  test::fill_derived(big);
  auto be = test::cpu_backend();
  ParamStore a(*be, build_param_layout(model_shape(small), small.optimizer));
  ParamStore b(*be, build_param_layout(model_shape(big), big.optimizer));
  init_params(a, 1234);
  init_params(b, 1234);
  // (Output projections are excluded: their std depends on the layer count by design.)
  for (std::string name : {"layers.0.attention.q.weight", "layers.1.mlp.fc1.weight", "embedding.position.weight",
                           "layers.1.attention.v.weight"}) {
    CAPTURE(name);
    CHECK(a.layout().get(name).offset != b.layout().get(name).offset);
    CHECK(test::to_host(*be, a.master(name)) == test::to_host(*be, b.master(name)));
  }
  // The first 256 rows of the bigger vocabulary's embedding are the small model's embedding.
  std::vector<float> wa = test::to_host(*be, a.master("embedding.word.weight"));
  std::vector<float> wb = test::to_host(*be, b.master("embedding.word.weight"));
  CHECK(std::equal(wa.begin(), wa.end(), wb.begin()));
  // Alignment gaps are zero.
  std::vector<float> all = test::to_host(*be, b.master());
  std::vector<bool> covered(all.size(), false);
  for (const ParamSpec& p : b.layout().params)
    for (int64_t i = 0; i < p.numel; ++i) covered[size_t(p.offset + i)] = true;
  for (size_t i = 0; i < all.size(); ++i)
    if (!covered[i]) REQUIRE(all[i] == 0.0f);
}

TEST_CASE("init: a TP shard initializes exactly like its slice of the serial tensor") {
  plan::Plan plan = test::llama_tiny_plan();
  plan.model.num_kv_heads = 4;
  test::fill_derived(plan);
  const ModelShape s = model_shape(plan);
  const ParamLayout serial = build_param_layout(s, plan.optimizer);
  for (int rank = 0; rank < 2; ++rank) {
    const ParamLayout shard = build_param_layout(s, plan.optimizer, 2, rank);
    for (const char* name :
         {"layers.0.attention.q.weight", "layers.0.attention.proj.weight", "layers.1.mlp.down.weight",
          "embedding.word.weight", "lm_head.weight", "layers.0.mlp.up.weight"}) {
      CAPTURE(name);
      CAPTURE(rank);
      const ParamSpec& g = serial.get(name);
      const ParamSpec& p = shard.get(name);
      REQUIRE(p.shard_dim >= 0);
      CHECK(p.numel * 2 == g.numel);
      const std::vector<float> full = values(g, 42), mine = values(p, 42);
      const int64_t rows = p.local_shape[0], cols = p.local_shape[1];
      const int64_t gcols = g.local_shape[1];
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t gr = p.shard_dim == 0 ? p.shard_begin + r : r;
          const int64_t gc = p.shard_dim == 1 ? p.shard_begin + c : c;
          REQUIRE(mine[size_t(r * cols + c)] == full[size_t(gr * gcols + gc)]);
        }
    }
    CHECK(shard.get("layers.0.attention_norm.weight").shard_dim == -1);
  }
  // 2 kv heads: tp=2 gives each rank one whole kv head; tp=4 would split a head, which the
  // resolver refuses (there is no kv-head replication path).
  plan::Plan gqa = test::llama_tiny_plan();
  const ModelShape gs = model_shape(gqa);
  CHECK(build_param_layout(gs, gqa.optimizer, 2, 1).get("layers.0.attention.k.weight").shard_begin == 16);
  CHECK_THROWS_WITH_AS(build_param_layout(gs, gqa.optimizer, 4, 1), doctest::Contains("model.num_kv_heads=2"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(build_param_layout(gs, gqa.optimizer, 3, 0), doctest::Contains("parallelism.tp=3"),
                       std::invalid_argument);
}

TEST_CASE("parallel state: Megatron rank order tp -> cp -> dp -> pp") {
  ParallelSizes s{2, 1, 2, 2};
  CHECK(s.world() == 8);
  RankCoords c = rank_coords(s, 5);
  CHECK(c.tp == 1);
  CHECK(c.cp == 0);
  CHECK(c.dp == 0);
  CHECK(c.pp == 1);
  for (int r = 0; r < 8; ++r) CHECK(world_rank_of(s, rank_coords(s, r)) == r);
  CHECK(group_ranks(s, 5, Group::tp) == std::vector<int>{4, 5});
  CHECK(group_ranks(s, 5, Group::dp) == std::vector<int>{5, 7});
  CHECK(group_ranks(s, 5, Group::pp) == std::vector<int>{1, 5});
  CHECK_THROWS_AS(rank_coords(s, 8), std::invalid_argument);

  ParallelState one = ParallelState::single_process();
  CHECK(one.world_size() == 1);
  CHECK(one.dp().all_reduce_sum(2.5) == 2.5);
  CHECK_THROWS_AS(ParallelState(s, 0, std::make_unique<SingleProcessComm>(), std::make_unique<SingleProcessComm>(),
                                std::make_unique<SingleProcessComm>(), std::make_unique<SingleProcessComm>(),
                                std::make_unique<SingleProcessComm>()),
                  std::invalid_argument);

  plan::Plan plan;
  plan.parallelism.tp = 2;
  plan.parallelism.pp = 2;
  plan.parallelism.dp = 4;  // derived by the resolver (world 16 / (tp·pp)); core reads it as it is
  plan.parallelism.world_size = 16;
  CHECK(parallel_sizes(plan).dp == 4);
}

TEST_CASE("model shape: plan errors name the field and a fix") {
  plan::Plan plan = test::gpt_tiny_plan();
  plan.model.num_kv_heads = 3;
  CHECK_THROWS_WITH_AS(model_shape(plan), doctest::Contains("model.num_kv_heads=3"), std::invalid_argument);
  plan = test::gpt_tiny_plan();
  plan.model.ffn_hidden_size = 0;  // a derived field left unset: core does not re-derive it
  CHECK_THROWS_WITH_AS(model_shape(plan), doctest::Contains("ffn_hidden_size=0"), std::invalid_argument);
  plan = test::gpt_tiny_plan();
  plan.model.max_position_embeddings = 32;
  CHECK_THROWS_WITH_AS(model_shape(plan), doctest::Contains("model.seq_length=64"), std::invalid_argument);
}

TEST_SUITE_END();
