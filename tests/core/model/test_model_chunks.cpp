// Model chunks of a virtual pipeline (parallelism.virtual_pp): the parameter layout of a rank that
// holds several non-adjacent runs of layers (global names, ready phases counted from the rank's top
// layer, embeddings with the model's first chunk and the head with its last), one Model per chunk
// binding only its layers, and an activation arena that is the memory estimate's byte for byte
// (the chunks share one transient region; each keeps the slots the interleaved order needs).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/model/init.hpp"
#include "core/model/model.hpp"
#include "core/model/param_layout.hpp"
#include "plan/memory_estimate.hpp"
#include "plan/pipeline_order.hpp"
#include "tests/core/core_test_util.hpp"

TEST_SUITE_BEGIN("core/model");

using namespace recipe;
using namespace recipe::core;

namespace {

// pp = 2, virtual_pp = 2 over 4 layers: stage k holds virtual stages k and k + 2, one layer each.
std::vector<LayerChunk> chunks_of(int stage) {
  return {{.first_layer = stage, .num_layers = 1, .first_stage = stage == 0, .last_stage = false},
          {.first_layer = stage + 2, .num_layers = 1, .first_stage = false, .last_stage = stage == 1}};
}

plan::Plan interleaved_plan(bool llama, const std::string& recompute) {
  plan::Plan p = llama ? test::llama_tiny_plan() : test::gpt_tiny_plan();
  p.model.num_layers = 4;
  p.parallelism.pp = 2;
  p.parallelism.virtual_pp = 2;
  p.trainer.global_batch_size = 4 * p.trainer.micro_batch_size;  // 4 micro-batches
  p.trainer.recompute = parse_recompute(recompute);
  test::fill_derived(p);
  return p;
}

}  // namespace

TEST_CASE("model chunks: a rank's layout holds its chunks' layers under their global names") {
  const plan::Plan p = interleaved_plan(false, "none");
  const ModelShape s = model_shape(p);
  LayoutOptions o;
  o.chunks = chunks_of(0);
  const ParamLayout first = build_param_layout(s, p.optimizer, o);
  CHECK(first.num_layers == 2);
  CHECK(first.first_stage);
  CHECK_FALSE(first.last_stage);
  CHECK(first.find("layers.0.attention.qkv.weight") == nullptr);  // packs: q|k|v are separate names
  CHECK(first.find("layers.0.attention.q.weight") != nullptr);
  CHECK(first.find("layers.2.attention.q.weight") != nullptr);
  CHECK(first.find("layers.1.attention.q.weight") == nullptr);
  CHECK(first.find("layers.3.attention.q.weight") == nullptr);
  CHECK(first.find("embedding.word.weight") != nullptr);
  CHECK(first.find("final_norm.weight") == nullptr);
  // Ready phases: the backward finishes layer 2 (chunk 1) first, then layer 0, then the embeddings.
  CHECK(first.get("layers.2.attention.q.weight").ready_phase == 1);
  CHECK(first.get("layers.0.attention.q.weight").ready_phase == 2);
  CHECK(first.get("embedding.word.weight").ready_phase == 3);

  o.chunks = chunks_of(1);
  const ParamLayout last = build_param_layout(s, p.optimizer, o);
  CHECK_FALSE(last.first_stage);
  CHECK(last.last_stage);
  CHECK(last.find("layers.1.attention.q.weight") != nullptr);
  CHECK(last.find("layers.3.attention.q.weight") != nullptr);
  CHECK(last.find("final_norm.weight") != nullptr);
  CHECK(last.get("final_norm.weight").ready_phase == 0);
  CHECK(last.get("layers.3.attention.q.weight").ready_phase == 1);
  CHECK(last.get("layers.1.attention.q.weight").ready_phase == 2);

  o.chunks = {{.first_layer = 2, .num_layers = 1}, {.first_layer = 0, .num_layers = 1}};
  CHECK_THROWS_AS(build_param_layout(s, p.optimizer, o), std::invalid_argument);  // not in model order
}

TEST_CASE("model chunks: the arena of a rank's chunk models is the memory estimate's, per stage and level") {
  for (bool llama : {false, true})
    for (const char* level : {"none", "gelu", "norm", "full"}) {
      CAPTURE(llama);
      CAPTURE(level);
      const plan::Plan p = interleaved_plan(llama, level);
      const ModelShape s = model_shape(p);
      auto be = test::cpu_backend();
      for (int stage = 0; stage < 2; ++stage) {
        CAPTURE(stage);
        LayoutOptions o;
        o.chunks = chunks_of(stage);
        ParamStore store(*be, build_param_layout(s, p.optimizer, o));
        init_params(store, 1);
        const std::vector<int> slots = plan::pipeline_slots(2, stage, 2, p.trainer.num_micro_batches);
        Model chunk0(s, p.trainer.micro_batch_size, p.trainer.recompute, *be, store, nullptr, slots[0], 0);
        Model chunk1(s, p.trainer.micro_batch_size, p.trainer.recompute, *be, store, nullptr, slots[1], 1, &chunk0);
        CHECK(chunk0.slots() == slots[0]);
        CHECK(chunk0.first_stage() == (stage == 0));
        CHECK_FALSE(chunk0.last_stage());
        CHECK_FALSE(chunk1.first_stage());
        CHECK(chunk1.last_stage() == (stage == 1));
        CHECK(chunk0.local().arch.layers == 1);
        CHECK(chunk1.local().arch.layers == 1);
        // The second chunk borrows the first one's transient region: it carves only its own slots.
        CHECK(chunk1.activation_bytes() < chunk0.activation_bytes());
        CHECK(plan::estimate_stage_memory(p, stage).activations ==
              int64_t(chunk0.activation_bytes() + chunk1.activation_bytes()));
      }
    }
}

TEST_SUITE_END();
