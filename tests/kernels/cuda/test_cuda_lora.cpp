// LoRA on the GPU against the CPU reference: the same plan (adapters on every linear, frozen base)
// trained on both backends follows the same loss curve within bf16 rounding, the frozen bf16 base
// is not touched by training, and the ParamStore holds no f32 master, gradient or Adam state for
// the base. Skipped where no GPU is visible (CI).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/train/trainer.hpp"
#include "tests/core/core_test_util.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cuda");

using namespace recipe;
using recipe::kernels::testing::has_gpu;

namespace {

plan::Plan lora(bool llama) {
  plan::Plan p = llama ? test::llama_tiny_plan() : test::gpt_tiny_plan();
  p.mode = plan::Mode::finetune;
  p.peft.kind = plan::PeftKind::lora;
  p.peft.rank = 8;
  p.peft.alpha = 16;
  p.peft.target_modules = {"all-linear"};
  p.optimizer.lr = 1e-2;
  return p;
}

std::vector<double> train(core::Trainer& tr, int steps) {
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    const core::StepResult r = tr.step();
    REQUIRE(r.finite);
    losses.push_back(r.loss);
  }
  return losses;
}

}  // namespace

TEST_CASE("cuda lora: the LoRA step follows the CPU reference; the bf16 base stays untouched" *
          doctest::skip(!has_gpu())) {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    const plan::Plan plan = lora(llama);
    const int steps = 10;
    auto cpu = test::cpu_backend();
    core::Trainer ref(plan, *cpu, nullptr, test::random_tokens(plan, 3, 8), nullptr);
    const std::vector<double> want = train(ref, steps);

    kernels::BackendOptions o = recipe::kernels::testing::cuda_options();
    o.deterministic = true;
    auto gpu = kernels::make_cuda_backend(o);
    core::Trainer tr(plan, *gpu, nullptr, test::random_tokens(plan, 3, 8), nullptr);
    const core::ParamLayout& L = tr.params().layout();
    REQUIRE(L.frozen_numel > 0);
    // f32 master and gradients of the adapters only; the compute copy (bf16) of everything.
    CHECK(tr.params().master().numel() == L.trainable_numel);
    CHECK(tr.params().grads().numel() == L.trainable_numel);
    CHECK(tr.params().compute().dtype == kernels::DType::bf16);
    const kernels::Tensor base = tr.params().compute_span(L.frozen_begin, L.frozen_numel);
    std::vector<uint16_t> before(size_t(base.numel())), after(before.size());
    gpu->to_host(before.data(), base);
    const std::vector<double> got = train(tr, steps);
    gpu->to_host(after.data(), base);
    CHECK(std::memcmp(before.data(), after.data(), before.size() * sizeof(uint16_t)) == 0);
    double max_rel = 0;
    for (int i = 0; i < steps; ++i)
      max_rel = std::max(max_rel, std::fabs(got[size_t(i)] - want[size_t(i)]) / want[size_t(i)]);
    MESSAGE((llama ? "llama_tiny" : "gpt_tiny")
            << " LoRA: CPU " << want.front() << " -> " << want.back() << ", CUDA " << got.front() << " -> "
            << got.back() << ", max relative gap " << max_rel);
    CHECK(max_rel < 2e-2);
    CHECK(got.back() < got.front());
  }
}

TEST_CASE("cuda lora: with adapter dropout the step follows the CPU reference (the same masks)" *
          doctest::skip(!has_gpu())) {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    plan::Plan plan = lora(llama);
    plan.peft.dropout = 0.1;
    const int steps = 10;
    auto cpu = test::cpu_backend();
    core::Trainer ref(plan, *cpu, nullptr, test::random_tokens(plan, 3, 8), nullptr);
    const std::vector<double> want = train(ref, steps);
    kernels::BackendOptions o = recipe::kernels::testing::cuda_options();
    o.deterministic = true;
    auto gpu = kernels::make_cuda_backend(o);
    core::Trainer tr(plan, *gpu, nullptr, test::random_tokens(plan, 3, 8), nullptr);
    const std::vector<double> got = train(tr, steps);
    double max_rel = 0;
    for (int i = 0; i < steps; ++i)
      max_rel = std::max(max_rel, std::fabs(got[size_t(i)] - want[size_t(i)]) / want[size_t(i)]);
    MESSAGE((llama ? "llama_tiny" : "gpt_tiny") << " LoRA dropout 0.1: max relative gap " << max_rel);
    CHECK(max_rel < 2e-2);
    CHECK(got.back() < got.front());
  }
}

TEST_SUITE_END();
