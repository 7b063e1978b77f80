// trainer.precision = "fp8" in the resolver: what runs validates (CPU emulation, Hopper), what this
// version cannot run is rejected with key and fix (an amax history of no steps, E5M2 forward, a GPU below
// compute capability 8.9, dimensions not multiples of 16, unknown linears), and the memory estimate
// counts the FP8 scratch.
#include "plan/fp8.hpp"
#include "tests/dsl/helpers.hpp"

using namespace recipe;
using namespace recipe::dsl;
using namespace recipe::dsl::test;

TEST_SUITE_BEGIN("dsl");

namespace {

json fp8(const json& patch = json::object()) {
  return with(with(tiny_gpt(), json::parse(R"({"trainer": {"precision": "fp8", "device": "cpu"}})")), patch);
}

ExecutorFacts visible_gpu(int compute_capability, const std::string& name) {
  ExecutorFacts f = gpu_facts(1, 1, true, 80, name);
  f.gpu_compute_capability = compute_capability;
  return f;
}

}  // namespace

TEST_CASE("fp8: a CPU plan validates (emulated, with a warning) and names the linears it runs in FP8") {
  const auto r = resolve_json(fp8());
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(has_warning(r, "FP8 is emulated"));
  CHECK(plan::fp8_linears(r.plan).mask == 0xF);  // all four block linears by default
  const auto some = resolve_json(fp8(json::parse(R"({"fp8": {"linears": ["fc1", "fc2"]}})")));
  REQUIRE_MESSAGE(some.ok(), report(some));
  CHECK(plan::fp8_linears(some.plan).mask == 0xC);
  // Under bf16 nothing runs in FP8, whatever the fp8 section says.
  const auto bf16 = resolve_json(with(tiny_gpt(), json::parse(R"({"trainer": {"device": "cpu"}})")));
  CHECK(plan::fp8_linears(bf16.plan).mask == 0);
}

TEST_CASE("fp8: what this version cannot run is rejected with key and fix") {
  struct Case {
    const char* patch;
    const char* path;
    const char* message;
    const char* fix;
  };
  const Case cases[] = {
      {R"({"fp8": {"scaling": "delayed", "amax_history_len": 0}})", "fp8.amax_history_len", "1 to 65536",
       "between 1 and"},
      {R"({"fp8": {"forward_format": "e5m2"}})", "fp8.forward_format", "E4M3", "e4m3"},
      {R"({"fp8": {"linears": ["fc3"]}})", "fp8.linears", "fc3", "qkv"},
      {R"({"fp8": {"linears": []}})", "fp8.linears", "names no linear", "bf16"},
      // hidden 72: every linear reads or writes 72 features
      {R"({"model": {"hidden_size": 72}})", "fp8.linears", "not a multiple of 16", "multiples of 16"},
      {R"({"trainer": {"micro_batch_size": 1}, "model": {"seq_length": 24}})", "trainer.micro_batch_size",
       "not a multiple of 16", "multiple of 16"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.patch);
    const auto r = resolve_json(fp8(json::parse(c.patch)));
    const Violation* v = find_violation(r, c.path);
    REQUIRE_MESSAGE(v, report(r));
    CHECK_MESSAGE(v->message.find(c.message) != std::string::npos, v->message);
    CHECK_MESSAGE(v->fix.find(c.fix) != std::string::npos, v->fix);
  }
  // The shape rule applies per TP rank: tp=2 halves qkv's outputs (3·64/2 = 96, fine) and fc1's
  // (256/2 = 128), still multiples of 16; hidden 64 with 4 heads is fine at tp 1 and 2.
  const auto tp2 = resolve_json(fp8(json::parse(R"({"parallelism": {"tp": 2}, "executor": {"cpu_ranks": 2}})")));
  CHECK_MESSAGE(!find_violation(tp2, "fp8.linears"), report(tp2));
  // LoRA runs its frozen base in FP8 (the adapters in bf16).
  const auto lora = resolve_json(fp8(json::parse(
      R"({"mode": "finetune", "checkpoint": {"allow_random_init": true}, "peft": {"kind": "lora", "target_modules": ["all-linear"]}})")));
  CHECK_MESSAGE(lora.ok(), report(lora));
}

TEST_CASE("fp8: delayed scaling validates; its history keys warn under tensorwise scaling") {
  const auto d = resolve_json(fp8(json::parse(R"({"fp8": {"scaling": "delayed", "amax_history_len": 16}})")));
  REQUIRE_MESSAGE(d.ok(), report(d));
  CHECK(d.plan.fp8.scaling == plan::Fp8Scaling::delayed);
  CHECK(d.plan.fp8.amax_history_len == 16);
  const auto t = resolve_json(fp8(json::parse(R"({"fp8": {"amax_compute": "most_recent"}})")));
  REQUIRE_MESSAGE(t.ok(), report(t));
  CHECK(has_warning(t, "fp8.amax_compute is set but fp8.scaling is not"));
}

TEST_CASE("fp8: the GPU must have compute capability >= 8.9 (visible GPU or executor.gpu_model)") {
  const json cuda = fp8(json::parse(R"({"trainer": {"device": "cuda"}})"));
  const auto h100 = resolve_json(cuda, visible_gpu(90, "NVIDIA H100 80GB HBM3"));
  CHECK_MESSAGE(!find_violation(h100, "trainer.precision"), report(h100));
  const auto l4 = resolve_json(cuda, visible_gpu(89, "NVIDIA L4"));
  CHECK_MESSAGE(!find_violation(l4, "trainer.precision"), report(l4));
  const auto a100 = resolve_json(cuda, visible_gpu(80, "NVIDIA A100-SXM4-80GB"));
  const Violation* v = find_violation(a100, "trainer.precision");
  REQUIRE_MESSAGE(v, report(a100));
  CHECK(v->message.find("compute capability 8.0") != std::string::npos);
  CHECK(v->fix.find("bf16") != std::string::npos);
  // A target named in the recipe beats the GPU visible here.
  const auto planned = resolve_json(with(cuda, json::parse(R"({"executor": {"gpu_model": "A100-80GB"}})")),
                                    visible_gpu(90, "NVIDIA H100 80GB HBM3"));
  CHECK(find_violation(planned, "trainer.precision"));
  const auto planned_h100 = resolve_json(with(cuda, json::parse(R"({"executor": {"gpu_model": "H100-80GB"}})")),
                                         visible_gpu(80, "NVIDIA A100-SXM4-80GB"));
  CHECK_MESSAGE(!find_violation(planned_h100, "trainer.precision"), report(planned_h100));
  // An FP8-capable GPU validates: the CUDA FP8 step runs (tests/kernels/cuda/test_cuda_fp8_training.cpp).
  CHECK_MESSAGE(h100.ok(), report(h100));
}

TEST_CASE("fp8: the memory estimate counts the FP8 operand scratch and the weight casts") {
  const auto bf16 = resolve_json(with(tiny_gpt(), json::parse(R"({"trainer": {"device": "cpu"}})")));
  const auto f = resolve_json(fp8());
  REQUIRE(bf16.ok());
  REQUIRE(f.ok());
  const int64_t scratch = plan::fp8_scratch_bytes(f.plan);
  // N = 2·32 tokens; widest in 256 (fc2), widest out 256 (fc1): x 64·256, g and g_t 64·256 each, stats 256.
  CHECK(scratch == 64 * 256 + 2 * 64 * 256 + 256);
  CHECK(f.plan.memory.activations == bf16.plan.memory.activations + scratch);
  // Per layer each linear's weight as stored and transposed (one byte per element) and 256 bytes of
  // cells: qkv 64·192, proj 64·64, fc1 64·256, fc2 256·64.
  const int64_t per_layer = 2 * (64 * 192 + 64 * 64 + 64 * 256 + 256 * 64) + 4 * 256;
  CHECK(plan::fp8_weight_cache_bytes(f.plan) == per_layer);
  CHECK(f.plan.memory.weights == bf16.plan.memory.weights + f.plan.model.num_layers * per_layer);
  // Delayed scaling adds per layer 12 histories of H floats and two 16-byte cells each.
  const auto d = resolve_json(fp8(json::parse(R"({"fp8": {"scaling": "delayed", "amax_history_len": 100}})")));
  REQUIRE_MESSAGE(d.ok(), report(d));
  CHECK(plan::fp8_history_bytes(d.plan) == 12 * (100 * 4 + 2 * 16));
  CHECK(plan::fp8_history_bytes(f.plan) == 0);
  CHECK(d.plan.memory.weights == f.plan.memory.weights + int64_t(f.plan.model.num_layers) * 12 * (100 * 4 + 2 * 16));
}

TEST_CASE("fp8: LoRA holds the FP8 linears' base weights in FP8 alone (peft.base_fp8_only) and the estimate says so") {
  const json lora = json::parse(R"({"mode": "finetune", "checkpoint": {"allow_random_init": true},
      "peft": {"kind": "lora", "rank": 8, "target_modules": ["all-linear"]}})");
  const auto held = resolve_json(fp8(lora));
  const auto cast = resolve_json(fp8(with(lora, json::parse(R"({"peft": {"base_fp8_only": false}})"))));
  REQUIRE_MESSAGE(held.ok(), report(held));
  REQUIRE_MESSAGE(cast.ok(), report(cast));
  CHECK(held.plan.peft.base_fp8_only);  // the default
  CHECK(plan::fp8_frozen_linears(held.plan) == 0xF);
  CHECK(plan::fp8_frozen_linears(cast.plan) == 0);
  // Per layer qkv 64·192, proj 64·64, fc1 64·256, fc2 256·64 elements at 1 byte instead of the bf16
  // copy (2) and the casts (2); the caches keep their cells (4·256 bytes per layer); one scratch of
  // the largest weight (64·256) joins the operand scratch.
  const int64_t per_layer = 64 * 192 + 64 * 64 + 64 * 256 + 256 * 64;
  CHECK(plan::fp8_frozen_weight_numel(held.plan) == per_layer);
  CHECK(plan::fp8_weight_cache_bytes(held.plan) == 4 * 256);
  CHECK(plan::fp8_scratch_bytes(held.plan) == plan::fp8_scratch_bytes(cast.plan) + int64_t(64) * 256);
  const int64_t layers = held.plan.model.num_layers;
  CHECK(cast.plan.memory.weights - held.plan.memory.weights == layers * 3 * per_layer);
  CHECK(held.plan.memory.activations - cast.plan.memory.activations == 64 * 256);
  // Without LoRA (full training: the weights change every step) or without FP8 it has nothing to
  // hold: setting it says so.
  const auto full = resolve_json(fp8(json::parse(R"({"peft": {"base_fp8_only": true}})")));
  REQUIRE_MESSAGE(full.ok(), report(full));
  CHECK(has_warning(full, "peft.base_fp8_only=true has no effect"));
  CHECK(plan::fp8_frozen_linears(full.plan) == 0);
  const auto bf16 = resolve_json(
      with(with(tiny_gpt(), lora), json::parse(R"({"trainer": {"device": "cpu"}, "peft": {"base_fp8_only": true}})")));
  REQUIRE_MESSAGE(bf16.ok(), report(bf16));
  CHECK(has_warning(bf16, "peft.base_fp8_only=true has no effect"));
  CHECK(plan::fp8_frozen_linears(bf16.plan) == 0);
  CHECK_FALSE(has_warning(held, "peft.base_fp8_only"));
}
