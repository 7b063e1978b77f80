// LoRA in FP8 with the frozen base held only in FP8 (peft.base_fp8_only, core/model/linear.hpp):
// on the CPU emulation it trains bit for bit like the bf16 base cast every pass (the GEMMs read the
// same bytes), the FP8 linears' weights have no compute copy (the store, the backend's live bytes
// and the memory estimate all say so), checkpoints still hold the exact base (written from its
// source: the seeded init or the checkpoint it was read from), and resuming continues bitwise.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "core/train/checkpointing.hpp"
#include "core/train/trainer.hpp"
#include "plan/fp8.hpp"
#include "plan/memory_estimate.hpp"
#include "tests/core/core_test_util.hpp"
#include "tests/core/data/temp_dir.hpp"

TEST_SUITE_BEGIN("core/train");

using namespace recipe;
using recipe::data::testing::TempDir;
namespace fs = std::filesystem;

namespace {

plan::Plan lora_fp8(bool llama, bool fp8_only, plan::Fp8Scaling scaling = plan::Fp8Scaling::tensorwise) {
  plan::Plan p = llama ? test::llama_tiny_plan() : test::gpt_tiny_plan();
  p.mode = plan::Mode::finetune;
  p.peft.kind = plan::PeftKind::lora;
  p.peft.rank = 8;
  p.peft.alpha = 16;
  p.peft.target_modules = {"all-linear"};
  p.optimizer.lr = 1e-2;
  p.optimizer.weight_decay = 0.1;
  p.trainer.precision = plan::Precision::fp8;
  p.fp8.scaling = scaling;
  p.fp8.amax_history_len = 4;
  p.peft.base_fp8_only = fp8_only;
  p.trainer.max_steps = 12;
  return p;
}

std::vector<double> run_steps(core::Trainer& t, int n) {
  std::vector<double> losses;
  for (int i = 0; i < n; ++i) {
    const core::StepResult r = t.step();
    REQUIRE(r.finite);
    losses.push_back(r.loss);
  }
  return losses;
}

std::vector<float> adapters(core::Trainer& t) { return test::to_host(t.backend(), t.params().master()); }
std::vector<float> moments(core::Trainer& t) {
  return test::to_host(t.backend(), t.optimizer().state("optimizer.exp_avg_sq.").data);
}

// Every frozen tensor of a checkpoint, by name.
std::vector<std::pair<std::string, std::vector<float>>> frozen_in(const std::string& dir, const core::ParamLayout& L) {
  const ckpt::CheckpointReader r(dir);
  std::vector<std::pair<std::string, std::vector<float>>> out;
  for (const core::ParamSpec& p : L.params) {
    if (p.trainable) continue;
    std::vector<float> v(size_t(p.numel));
    r.read(p.name, ckpt::Box{std::vector<int64_t>(p.global_shape.size(), 0), p.global_shape}, ckpt::DType::f32,
           v.data());
    out.emplace_back(p.name, std::move(v));
  }
  return out;
}

}  // namespace

TEST_CASE("fp8 frozen base: FP8-only weights train bitwise like the bf16 base cast every pass") {
  for (bool llama : {false, true})
    for (plan::Fp8Scaling scaling : {plan::Fp8Scaling::tensorwise, plan::Fp8Scaling::delayed}) {
      CAPTURE(llama);
      CAPTURE(plan::to_string(scaling));
      auto be = test::cpu_backend();
      const plan::Plan a = lora_fp8(llama, false, scaling), b = lora_fp8(llama, true, scaling);
      core::Trainer cast(a, *be, nullptr, test::random_tokens(a, 3, a.trainer.global_batch_size), nullptr);
      core::Trainer held(b, *be, nullptr, test::random_tokens(b, 3, b.trainer.global_batch_size), nullptr);
      REQUIRE(cast.params().layout().fp8_numel == 0);
      REQUIRE(held.params().layout().fp8_numel > 0);
      const std::vector<double> la = run_steps(cast, 6), lb = run_steps(held, 6);
      for (size_t i = 0; i < la.size(); ++i) CHECK_MESSAGE(lb[i] == la[i], "step " << i + 1);
      CHECK(la.back() < la.front());
      CHECK(adapters(held) == adapters(cast));
      CHECK(moments(held) == moments(cast));
      // Evaluation (no pass of cached casts) reads the same bytes too.
      CHECK(held.compute_loss(5) == cast.compute_loss(5));
    }
}

TEST_CASE("fp8 frozen base: the FP8 linears' weights have no compute copy; estimate and allocation agree") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    const plan::Plan a = lora_fp8(llama, false), b = lora_fp8(llama, true);
    auto be_a = test::cpu_backend(), be_b = test::cpu_backend();
    core::Trainer cast(a, *be_a, nullptr, test::random_tokens(a, 3, a.trainer.global_batch_size), nullptr);
    core::Trainer held(b, *be_b, nullptr, test::random_tokens(b, 3, b.trainer.global_batch_size), nullptr);
    const core::ParamLayout &La = cast.params().layout(), &Lb = held.params().layout();
    const int64_t layers = b.model.num_layers, per_layer = plan::fp8_frozen_weight_numel(b);
    REQUIRE(per_layer > 0);
    CHECK(plan::fp8_frozen_weight_numel(a) == 0);
    // The FP8 region holds exactly the four block linears' weights of every layer, in FP8.
    CHECK(Lb.fp8_numel == layers * per_layer);
    CHECK(Lb.total_numel == La.total_numel);
    CHECK(Lb.compute_numel() == La.total_numel - Lb.fp8_numel);
    CHECK(held.params().compute().numel() == Lb.compute_numel());
    int fp8_tensors = 0;
    for (const core::ParamSpec& p : Lb.params) {
      CAPTURE(p.name);
      const bool linear_weight = !p.trainable && p.decl->part == core::Part::weight &&
                                 (p.decl->role == core::Role::qkv || p.decl->role == core::Role::attention_out ||
                                  p.decl->role == core::Role::mlp_in || p.decl->role == core::Role::mlp_out);
      CHECK(p.fp8 == linear_weight);
      if (!p.fp8) continue;
      ++fp8_tensors;
      CHECK(held.params().weight(p).dtype == kernels::DType::e4m3);
      CHECK_THROWS_WITH_AS(held.params().master(p), doctest::Contains("held only in FP8"), std::logic_error);
    }
    CHECK(fp8_tensors == layers * (llama ? 7 : 6));  // q, k, v, proj, then gate, up, down or fc1, fc2
    // The ParamStore: 1 byte per FP8-region element instead of the CPU's f32 compute copy (4).
    CHECK(int64_t(cast.params().bytes()) - int64_t(held.params().bytes()) == 3 * Lb.fp8_numel);
    // The backend's live bytes: that, plus the per-pass caches (2 bytes per element) that are gone,
    // less the one shared transpose scratch (the largest weight, 256-byte aligned).
    int64_t largest = 0;
    for (const plan::Fp8LinearShape& s : plan::block_linear_shapes(b)) largest = std::max(largest, s.in * s.out);
    const int64_t scratch = (largest + 255) / 256 * 256;
    CHECK(int64_t(be_a->peak_memory_bytes()) - int64_t(be_b->peak_memory_bytes()) ==
          3 * Lb.fp8_numel + 2 * Lb.fp8_numel - scratch);
    // The estimate (bf16 compute on the GPU): 2 + 2 bytes per such element become 1, plus the scratch.
    const plan::MemoryEstimate ea = plan::estimate_memory(a), eb = plan::estimate_memory(b);
    CHECK(ea.weights - eb.weights == 3 * layers * per_layer);
    CHECK(eb.activations - ea.activations == scratch);
    CHECK(ea.gradients == eb.gradients);
    CHECK(ea.optimizer == eb.optimizer);
  }
}

TEST_CASE("fp8 frozen base: checkpoints hold the exact base, and resuming continues bitwise") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    auto be = test::cpu_backend();
    const plan::Plan plan = lora_fp8(llama, true, plan::Fp8Scaling::delayed);
    core::Trainer whole(plan, *be);
    const std::vector<double> all = run_steps(whole, 12);

    TempDir dir;
    std::string saved;
    ckpt::BaseRef base;
    {
      core::Trainer first(plan, *be);
      base = core::save_base_checkpoint(first, dir / "checkpoints", "# test plan\n");
      run_steps(first, 5);
      core::SaveOptions so;
      so.dir = dir / "checkpoints";
      so.base = base;
      saved = core::save_checkpoint(first, so);
      // A full checkpoint (no base to refer to) writes the base from its source as well.
      core::SaveOptions full;
      full.dir = dir / "full";
      core::save_checkpoint(first, full);
    }
    // The base written from the source is the one the bf16-base run writes from its compute copy.
    {
      core::Trainer bf16_base(lora_fp8(llama, false, plan::Fp8Scaling::delayed), *be);
      const ckpt::BaseRef want = core::save_base_checkpoint(bf16_base, dir / "want", "# test plan\n");
      const core::ParamLayout& L = bf16_base.params().layout();
      CHECK(frozen_in(base.path, L) == frozen_in(want.path, L));
      CHECK(frozen_in(dir / "full/step-5", L) == frozen_in(want.path, L));
    }

    core::Trainer resumed(plan, *be);
    const core::LoadResult lr = core::load_checkpoint(resumed, saved, core::LoadMode::resume);
    CHECK(lr.step == 5);
    REQUIRE(lr.base);
    CHECK(*lr.base == base);
    const std::vector<double> tail = run_steps(resumed, 7);
    for (size_t i = 0; i < tail.size(); ++i) CHECK_MESSAGE(tail[i] == all[5 + i], "step " << 6 + i);
    CHECK(adapters(resumed) == adapters(whole));
    CHECK(moments(resumed) == moments(whole));
  }
}

TEST_CASE("fp8 frozen base: a fine-tune from a base checkpoint casts the loaded weights, not its own init") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    auto be = test::cpu_backend();
    TempDir dir;
    plan::Plan pre = llama ? test::llama_tiny_plan() : test::gpt_tiny_plan();
    pre.trainer.max_steps = 3;
    std::string base_ckpt;
    {
      core::Trainer t(pre, *be);
      run_steps(t, 3);
      core::SaveOptions so;
      so.dir = dir / "pretrained";
      base_ckpt = core::save_checkpoint(t, so);
    }
    std::vector<double> want, got;
    for (bool fp8_only : {false, true}) {
      plan::Plan p = lora_fp8(llama, fp8_only);
      p.trainer.seed = 99;  // another init: the base must come from the checkpoint
      core::Trainer t(p, *be);
      core::load_checkpoint(t, base_ckpt, core::LoadMode::weights_only);
      (fp8_only ? got : want) = run_steps(t, 4);
    }
    CHECK(got == want);
  }
}
