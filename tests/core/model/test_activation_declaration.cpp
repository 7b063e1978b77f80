// The activation declaration (family/activations.hpp) is the one description of the arena: for every
// factory preset and every trainer.recompute level, the memory estimate's arena bytes are what the
// Models of each pipeline stage carve, to the byte (shapes only: the 70B presets are carved with a
// measuring carver along the Model's own path; the CPU presets also build the real Model).
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/model/activations.hpp"
#include "core/model/model.hpp"
#include "core/model/param_layout.hpp"
#include "core/model/param_store.hpp"
#include "dsl/dsl.hpp"
#include "plan/memory_estimate.hpp"
#include "plan/pipeline_order.hpp"
#include "tests/core/core_test_util.hpp"

TEST_SUITE_BEGIN("core/model");

using namespace recipe;
using namespace recipe::core;

namespace {

// The preset resolved at its documented layout with `trainer.recompute=<level>` (planning: the
// device memory check is not what this test is about, so the device is made large).
plan::Plan resolved(const std::string& name, const std::string& level) {
  dsl::ConfigTree t = dsl::load_recipe(name);
  if (t.root.value("mode", "") == "finetune") t.root["checkpoint"]["allow_random_init"] = true;
  dsl::apply_override(t, "trainer.recompute=" + level);
  const auto ex = t.root.value("executor", nlohmann::ordered_json::object());
  dsl::ExecutorFacts facts;
  facts.planning = true;
  facts.nodes = ex.value("nodes", 1);
  facts.gpus_per_node = ex.value("gpus_per_node", t.root["trainer"].value("device", "") == "cpu" ? 0 : 1);
  facts.has_gpu = facts.gpus_per_node > 0;
  facts.visible_gpus = facts.gpus_per_node;
  if (facts.has_gpu) {
    facts.gpu_name = "NVIDIA H100 80GB HBM3";
    facts.gpu_memory_gib = 1e6;
  }
  return dsl::resolve(t, facts).plan;
}

// The Trainer's model chunks of pipeline stage `stage` (core/train/trainer.cpp).
std::vector<LayerChunk> stage_chunks(const plan::Plan& p, int stage) {
  const int pp = std::max(1, p.parallelism.pp), vpp = std::max(1, p.parallelism.virtual_pp);
  const std::vector<int>& counts = p.parallelism.stage_num_layers;
  std::vector<LayerChunk> chunks;
  for (int c = 0; c < vpp; ++c) {
    const int vs = stage + c * pp;
    LayerChunk chunk{.num_layers = counts.at(size_t(vs)), .first_stage = vs == 0, .last_stage = vs == pp * vpp - 1};
    for (int i = 0; i < vs; ++i) chunk.first_layer += counts[size_t(i)];
    chunks.push_back(chunk);
  }
  return chunks;
}

kernels::DType act_dtype(const plan::Plan& p) {
  return p.trainer.device == plan::Device::cpu || p.trainer.precision == plan::Precision::fp32 ? kernels::DType::f32
                                                                                               : kernels::DType::bf16;
}

}  // namespace

TEST_CASE("activation declaration: every preset's estimated arena is the carve, per recompute level and stage") {
  const std::vector<std::string> presets = dsl::list_presets();
  REQUIRE(presets.size() >= 11);
  for (const std::string& name : presets)
    for (const char* level : {"none", "gelu", "norm", "full"}) {
      CAPTURE(name);
      CAPTURE(level);
      const plan::Plan p = resolved(name, level);
      REQUIRE(p.trainer.classifier_chunk_rows > 0);
      const int tp = std::max(1, p.parallelism.tp), pp = std::max(1, p.parallelism.pp);
      const int vpp = std::max(1, p.parallelism.virtual_pp), cp = std::max(1, p.parallelism.cp);
      const ModelShape global = model_shape(p);
      ModelShape s = global;
      s.seq /= cp;  // Model::cp_local_shape
      const Recompute r = p.trainer.recompute;
      const kernels::DType act = act_dtype(p);
      for (int stage = 0; stage < pp; ++stage) {
        CAPTURE(stage);
        LayoutOptions lo;
        lo.tp_size = tp;
        lo.chunks = stage_chunks(p, stage);
        const ParamLayout layout = build_param_layout(global, p.optimizer, lo);
        const std::vector<int> slots = plan::pipeline_slots(pp, stage, vpp, p.trainer.num_micro_batches);
        // The Model constructor's path: each chunk's declaration, its size, its carve.
        Carver measure(nullptr, kernels::Device::cpu);
        std::vector<std::vector<Activations>> acts(static_cast<size_t>(vpp));
        for (int c = 0; c < vpp; ++c) {
          const ModelShape ls = local_shape(s, layout, c);
          const auto decl = declare_activations(
              activation_knobs(ls, p.trainer.micro_batch_size, r, act, tp > 1 && lo.chunks[size_t(c)].last_stage));
          const size_t before = measure.used();
          acts[size_t(c)].resize(size_t(slots[size_t(c)]));
          for (size_t i = 0; i < acts[size_t(c)].size(); ++i)
            carve_activations(measure, acts[size_t(c)][i], decl, ls.arch.layers, r, act,
                              i ? &acts[size_t(c)][0] : (c ? &acts[0][0] : nullptr));
          CHECK(int64_t(measure.used() - before) == arena_bytes(decl, ls.arch.layers, slots[size_t(c)], c == 0));
        }
        CHECK(plan::activation_arena_bytes(p, stage) == int64_t(measure.used()));
      }
      // A CPU preset of one rank: the real Model's allocation.
      if (p.trainer.device == plan::Device::cpu && tp * pp * cp == 1) {
        auto be = test::cpu_backend();
        ParamStore store(*be, build_param_layout(global, p.optimizer, 1, 0));
        const Model model(global, p.trainer.micro_batch_size, r, *be, store, nullptr,
                          plan::pipeline_slots(1, 0, p.trainer.num_micro_batches), 0);
        CHECK(int64_t(model.activation_bytes()) == plan::activation_arena_bytes(p, 0));
        // Without adapters (whose scratch is its own allocation) the arena is all of the estimate's
        // activations.
        if (p.peft.kind != plan::PeftKind::lora)
          CHECK(int64_t(model.activation_bytes()) == plan::estimate_memory(p).activations);
      }
    }
}

TEST_SUITE_END();
