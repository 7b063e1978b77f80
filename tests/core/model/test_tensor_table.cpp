// The family tensor table is the one source: the parameter layout, the plan's parameter counts and
// the HF mapping that iterate it must agree with each other for every shape and TP split.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>

#include "hf/hf_convert.hpp"
#include "family/tensor_table.hpp"
#include "core/model/param_layout.hpp"
#include "plan/model_size.hpp"
#include "tests/core/core_test_util.hpp"

TEST_SUITE_BEGIN("core/model");

using namespace recipe;
using namespace recipe::core;

namespace {

// The shapes the tests walk: GPT-2-like and Llama-like, with the flags flipped that the table
// keys rows on (biases, tied head, GQA).
std::vector<std::pair<std::string, plan::Plan>> shapes() {
  std::vector<std::pair<std::string, plan::Plan>> r;
  r.emplace_back("gpt_tiny", test::gpt_tiny_plan());
  plan::Plan untied = test::gpt_tiny_plan();
  untied.model.tie_embeddings = false;
  r.emplace_back("gpt untied", untied);
  r.emplace_back("llama_tiny", test::llama_tiny_plan());
  plan::Plan biased = test::llama_tiny_plan();
  biased.model.bias = true;
  biased.model.tie_embeddings = true;
  r.emplace_back("llama with biases, tied", biased);
  plan::Plan mha = test::llama_tiny_plan();
  mha.model.num_kv_heads = 4;
  r.emplace_back("llama mha", mha);
  return r;
}

}  // namespace

TEST_CASE("tensor table: layout, plan counts and the table agree, whole and TP-split") {
  for (const auto& [label, plan] : shapes()) {
    CAPTURE(label);
    const ModelShape s = model_shape(plan);
    const plan::ModelConfig& m = plan.model;
    const int64_t total = plan::count_params(m, m.padded_vocab_size);

    // Σ over the table's present rows (layer rows once per layer) is the plan's count.
    int64_t from_table = 0;
    for (const TensorDecl& d : tensor_table(s))
      if (present(d, s)) from_table += (d.scope == Scope::layer ? s.arch.layers : 1) * global_numel(d, s);
    CHECK(from_table == total);
    const plan::LayerParams lp = plan::layer_params(m);
    CHECK(total == s.arch.layers * lp.total() + plan::final_norm_params(m) + plan::position_embedding_params(m) +
                       plan::word_embedding_params(m, m.padded_vocab_size) * (s.arch.tied ? 1 : 2));

    for (int tp : {1, 2}) {
      CAPTURE(tp);
      int64_t summed = 0, replicated = 0;
      for (int rank = 0; rank < tp; ++rank) {
        const ParamLayout L = build_param_layout(s, plan.optimizer, tp, rank);
        summed += L.num_params();
        std::map<std::string, int> seen;
        for (const ParamSpec& p : L.params) {
          REQUIRE(p.decl != nullptr);
          CHECK(p.name == tensor_name(*p.decl, p.layer));
          CHECK(p.global_shape == global_shape(*p.decl, s));
          CHECK(p.shard_dim == (tp == 1 ? -1 : shard_dim(p.decl->shard)));
          CHECK(p.init == p.decl->init);
          ++seen[p.name];
          if (rank == 0 && p.tp_replicated()) replicated += p.numel;
        }
        // Every present row laid out exactly once per layer, nothing else.
        size_t expected = 0;
        for (const TensorDecl& d : tensor_table(s))
          if (present(d, s)) expected += d.scope == Scope::layer ? size_t(s.arch.layers) : 1;
        CHECK(L.params.size() == expected);
        for (const auto& [name, n] : seen) CHECK_MESSAGE(n == 1, name);
      }
      // Sharded tensors add up over the ranks; replicated ones are held by each.
      CHECK(summed - (tp - 1) * replicated == total);
      // The plan's TP split: what layer_params calls sharded is exactly what the layout shards.
      if (tp == 2) {
        const ParamLayout L = build_param_layout(s, plan.optimizer, 1, 0);
        int64_t layer_sharded = 0, layer_replicated = 0;
        for (const ParamSpec& p : L.params)
          if (p.layer == 0) (shard_dim(p.decl->shard) < 0 ? layer_replicated : layer_sharded) += p.numel;
        CHECK(layer_sharded == lp.sharded);
        CHECK(layer_replicated == lp.replicated);
      }
    }
  }
}

TEST_CASE("tensor table: every HF tensor is made of ours and every one of ours maps to HF") {
  for (const auto& [label, plan] : shapes()) {
    CAPTURE(label);
    const ModelShape s = model_shape(plan);
    const ParamLayout L = build_param_layout(s, plan.optimizer);
    const std::vector<hf::TensorSpec> specs = hf::tensor_specs(s);
    std::set<std::string> hf_names, parts;
    for (const hf::TensorSpec& t : specs) {
      CHECK_MESSAGE(hf_names.insert(t.hf_name).second, t.hf_name);
      int64_t rows = 0, numel = 0;
      for (const std::string& part : t.parts) {
        CHECK_MESSAGE(parts.insert(part).second, part);
        const ParamSpec& p = L.get(part);
        rows += p.global_shape[0];
        numel += p.numel;
      }
      int64_t hf_numel = 1;
      for (int64_t d : t.hf_shape) hf_numel *= d;
      // The HF tensor is its parts concatenated (GPT-2 c_attn: q|k|v), transposed for Conv1D,
      // vocabulary rows trimmed to the real vocabulary.
      if (t.vocab_rows)
        CHECK(hf_numel * s.arch.padded_vocab == numel * s.arch.vocab);
      else
        CHECK(hf_numel == numel);
      if (!t.vocab_rows) CHECK(t.hf_shape[t.transpose ? 1 : 0] == rows);
    }
    CHECK(parts.size() == L.params.size());
  }
  // GPT-2 packs q|k|v into one transposed c_attn; Llama keeps them apart.
  const std::vector<hf::TensorSpec> gpt = hf::tensor_specs(model_shape(test::gpt_tiny_plan()));
  bool found = false;
  for (const hf::TensorSpec& t : gpt)
    if (t.hf_name == "transformer.h.1.attn.c_attn.weight") {
      found = true;
      CHECK(t.transpose);
      CHECK(t.hf_shape == std::vector<int64_t>{64, 192});
      CHECK(t.parts == std::vector<std::string>{"layers.1.attention.q.weight", "layers.1.attention.k.weight",
                                                "layers.1.attention.v.weight"});
    }
  CHECK(found);
}

TEST_CASE("tensor table: the word embedding's name comes from the table") {
  CHECK(word_embedding_name() == "embedding.word.weight");
  const ModelShape s = model_shape(test::gpt_tiny_plan());
  CHECK(build_param_layout(s, plan::OptimizerConfig{}).find(word_embedding_name()) != nullptr);
}

TEST_SUITE_END();
