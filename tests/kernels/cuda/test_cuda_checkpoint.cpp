// Checkpoints on CUDA: a run saved after 5 steps and resumed (with the CUDA graph step) continues
// bitwise like an uninterrupted one in deterministic mode, and a checkpoint saved on the GPU loads
// on the CPU backend with the same fp32 master weights. Skipped where no GPU is visible (CI).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/train/checkpointing.hpp"
#include "core/train/trainer.hpp"
#include "tests/core/core_test_util.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"
#include "tests/core/data/temp_dir.hpp"

TEST_SUITE_BEGIN("kernels/cuda");

using namespace recipe;
using recipe::data::testing::TempDir;
using recipe::kernels::testing::has_gpu;

namespace {

std::vector<double> steps(core::Trainer& t, int n) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    const core::StepResult r = t.step();
    REQUIRE(r.finite);
    out.push_back(r.loss);
  }
  return out;
}

void check_cuda_resume(plan::Plan plan) {
  plan.trainer.max_steps = 12;
  plan.trainer.deterministic = true;
  plan.optimizer.weight_decay = 0.1;
  kernels::BackendOptions o = recipe::kernels::testing::cuda_options();
  o.deterministic = true;
  auto be = kernels::make_cuda_backend(o);
  TempDir dir;
  std::vector<double> all;
  std::vector<float> whole_master;
  {
    core::Trainer whole(plan, *be);
    all = steps(whole, 12);
    whole_master = test::to_host(*be, whole.params().master());
  }
  std::string saved;
  std::vector<float> saved_master;
  {
    core::Trainer first(plan, *be);
    steps(first, 5);
    core::SaveOptions so;
    so.dir = dir.path.string();
    saved = core::save_checkpoint(first, so);
    saved_master = test::to_host(*be, first.params().master());
  }
  {
    core::Trainer resumed(plan, *be);
    core::load_checkpoint(resumed, saved, core::LoadMode::resume);
    const std::vector<double> tail = steps(resumed, 7);
    for (size_t i = 0; i < tail.size(); ++i) CHECK_MESSAGE(tail[i] == all[5 + i], "step " << 6 + i);
    CHECK(resumed.graph_active());
    CHECK(test::to_host(*be, resumed.params().master()) == whole_master);
  }
  // The same checkpoint on the CPU reference backend: the fp32 masters are exactly those saved.
  auto cpu = test::cpu_backend();
  plan::Plan cpu_plan = plan;
  cpu_plan.trainer.device = plan::Device::cpu;
  core::Trainer on_cpu(cpu_plan, *cpu);
  core::load_checkpoint(on_cpu, saved, core::LoadMode::resume);
  CHECK(test::to_host(*cpu, on_cpu.params().master()) == saved_master);
  CHECK(on_cpu.steps_done() == 5);
}

}  // namespace

TEST_CASE("CUDA: gpt_tiny resumed from a checkpoint continues bitwise; the checkpoint loads on CPU [gpu]") {
  if (!has_gpu()) {
    MESSAGE("skipped: no CUDA GPU");
    return;
  }
  plan::Plan p = test::gpt_tiny_plan();
  p.trainer.device = plan::Device::cuda;
  check_cuda_resume(p);
}

TEST_CASE("CUDA: llama_tiny resumed from a checkpoint continues bitwise [gpu]") {
  if (!has_gpu()) {
    MESSAGE("skipped: no CUDA GPU");
    return;
  }
  plan::Plan p = test::llama_tiny_plan();
  p.trainer.device = plan::Device::cuda;
  check_cuda_resume(p);
}

TEST_SUITE_END();
