// The training step captured in a CUDA graph (trainer.cuda_graph): gpt_tiny and llama_tiny trained
// with and without the graph in deterministic mode give bitwise the same losses, grad norms and
// final weights, through learning-rate warm-up and gradient accumulation (two micro-batches per
// step), and the graph really replays the step. Plus the backend's recording itself: copy nodes
// read the page-locked staging at every launch, and a body that waits for the host or throws is
// refused with the reason while the backend keeps working. Skipped where no GPU is visible (CI).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/train/trainer.hpp"
#include "tests/core/core_test_util.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cuda");

using namespace recipe;
using recipe::kernels::testing::has_gpu;

namespace {

struct Run {
  std::vector<double> loss, grad_norm, lr;
  std::vector<float> master;  // final f32 master weights
  bool graph_active = false;
  int graph_steps = 0;
  std::string graph_status;
};

Run train_steps(const plan::Plan& plan, int steps) {
  kernels::BackendOptions o = recipe::kernels::testing::cuda_options();
  o.deterministic = true;
  auto be = kernels::make_cuda_backend(o);
  Run run;
  {
    core::Trainer tr(plan, *be, nullptr, test::random_tokens(plan, 3, plan.trainer.global_batch_size), nullptr);
    REQUIRE(tr.device_step());
    for (int i = 0; i < steps; ++i) {
      core::StepResult r = tr.step();
      REQUIRE(r.finite);
      run.loss.push_back(r.loss);
      run.grad_norm.push_back(r.grad_norm);
      run.lr.push_back(r.lr);
    }
    run.master = test::to_host(*be, tr.params().master());
    run.graph_active = tr.graph_active();
    run.graph_steps = tr.graph_steps();
    run.graph_status = tr.graph_status();
  }
  return run;
}

plan::Plan graph_plan(bool llama, bool cuda_graph) {
  plan::Plan p = llama ? test::llama_tiny_plan() : test::gpt_tiny_plan();
  p.trainer.max_steps = 20;
  p.schedule.decay_steps = 20;
  p.trainer.deterministic = true;
  p.trainer.micro_batch_size = 4;  // global 8: two micro-batches per step
  p.trainer.cuda_graph = cuda_graph;
  test::fill_derived(p);
  return p;
}

}  // namespace

TEST_CASE("cuda graph: the captured step gives bitwise the losses and weights of the uncaptured one" *
          doctest::skip(!has_gpu())) {
  constexpr int kSteps = 20;
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    const plan::Plan with = graph_plan(llama, true), without = graph_plan(llama, false);
    REQUIRE(with.trainer.num_micro_batches == 2);
    const Run g = train_steps(with, kSteps);
    const Run u = train_steps(without, kSteps);
    INFO("graph status: " << g.graph_status);
    CHECK(g.graph_active);
    CHECK(g.graph_steps == kSteps - 1);  // the first step is the uncaptured warm-up
    CHECK_FALSE(u.graph_active);
    CHECK(u.graph_steps == 0);
    CHECK(u.graph_status == "trainer.cuda_graph=false");
    // The learning rate moves every step during warm-up and decays after it: the replayed graph
    // must read it (and Adam's bias corrections) from memory, not from the capture.
    CHECK(u.lr[1] > u.lr[0]);
    CHECK(u.lr[kSteps - 1] < u.lr[12]);
    for (int i = 0; i < kSteps; ++i) {
      CAPTURE(i);
      CHECK(g.loss[size_t(i)] == u.loss[size_t(i)]);
      CHECK(g.grad_norm[size_t(i)] == u.grad_norm[size_t(i)]);
      CHECK(g.lr[size_t(i)] == u.lr[size_t(i)]);
    }
    REQUIRE(g.master.size() == u.master.size());
    CHECK(std::memcmp(g.master.data(), u.master.data(), g.master.size() * sizeof(float)) == 0);
    CHECK(g.loss.back() < 0.9 * g.loss.front());  // it trains
  }
}

TEST_CASE("cuda graph: recorded work re-reads its page-locked upload source at every launch" *
          doctest::skip(!has_gpu())) {
  using kernels::DType;
  using kernels::Tensor;
  auto be = kernels::make_cuda_backend(recipe::kernels::testing::cuda_options());
  const int64_t n = 4096;
  Tensor x(be->alloc(n * sizeof(float)), DType::f32, kernels::Device::cuda, {n});
  Tensor y(be->alloc(n * sizeof(float)), DType::f32, kernels::Device::cuda, {n});
  auto* staging = static_cast<float*>(be->alloc_host(n * sizeof(float)));
  std::string why;
  auto work = be->record(
      [&] {
        be->from_host_async(x, staging);
        be->scale(x, 2.0f);
        be->add(y, y, x);  // y += 2·staging
      },
      why);
  REQUIRE_MESSAGE(work != nullptr, why);
  std::vector<float> out(static_cast<size_t>(n));
  be->to_host(out.data(), y);
  CHECK(out[0] == 0.0f);  // recording ran nothing
  for (int launch = 1; launch <= 3; ++launch) {
    for (int64_t i = 0; i < n; ++i) staging[i] = float(launch) + float(i % 7);
    work->launch();
    be->synchronize();
  }
  be->to_host(out.data(), y);
  for (int64_t i : {int64_t(0), int64_t(5), n - 1})
    CHECK(out[size_t(i)] == 2.0f * (1.0f + 2.0f + 3.0f + 3.0f * float(i % 7)));
  work.reset();
  be->free_host(staging);
  be->free(x.ptr);
  be->free(y.ptr);
}

TEST_CASE("cuda graph: a body that waits for the host or throws is refused with the reason" *
          doctest::skip(!has_gpu())) {
  using kernels::DType;
  using kernels::Tensor;
  auto be = kernels::make_cuda_backend(recipe::kernels::testing::cuda_options());
  Tensor x(be->alloc(16 * sizeof(float)), DType::f32, kernels::Device::cuda, {16});
  std::string why;
  auto waits = be->record(
      [&] {
        be->scale(x, 3.0f);
        float h[16];
        be->to_host(h, x);
      },
      why);
  CHECK(waits == nullptr);
  CHECK(why.find("to_host") != std::string::npos);
  why.clear();
  auto throws = be->record([&] { throw std::runtime_error("no such op"); }, why);
  CHECK(throws == nullptr);
  CHECK(why.find("no such op") != std::string::npos);
  // Nothing of the refused bodies ran, and the backend works as before.
  const std::vector<float> ones(16, 1.0f);
  be->from_host(x, ones.data());
  be->scale(x, 3.0f);
  std::vector<float> h(16);
  be->to_host(h.data(), x);
  CHECK(h[7] == 3.0f);
  // The CPU reference cannot record: it says so.
  auto cpu = test::cpu_backend();
  why.clear();
  CHECK(cpu->record([] {}, why) == nullptr);
  CHECK(why.find("cannot record") != std::string::npos);
  be->free(x.ptr);
}

TEST_CASE("adamw schedule_device: lr and bias corrections from backend memory match the host arguments") {
  // Runs on the CPU reference everywhere, and on the GPU (bitwise, same expressions) when present.
  using kernels::DType;
  using kernels::Tensor;
  const int64_t n = 257;
  auto run = [&](kernels::Backend& be, bool from_memory) {
    auto tensor = [&](int64_t count) {
      return Tensor(be.alloc(size_t(count) * sizeof(float)), DType::f32, be.device(), {count});
    };
    Tensor w = tensor(n), g = tensor(n), m = tensor(n), v = tensor(n), sched = tensor(3);
    std::vector<float> hw(static_cast<size_t>(n)), hg(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      hw[size_t(i)] = float(std::cos(0.3 * double(i)));
      hg[size_t(i)] = float(std::sin(0.7 * double(i)) * 0.1);
    }
    be.from_host(w, hw.data());
    be.from_host(g, hg.data());
    kernels::AdamWArgs a{};
    a.beta1 = 0.9f, a.beta2 = 0.95f, a.eps = 1e-8f, a.weight_decay = 0.1f, a.grad_scale = 1.0f;
    for (int step = 1; step <= 3; ++step) {
      a.lr = 1e-2f * float(step);  // a schedule that moves
      a.step = step;
      kernels::AdamWArgs call = a;
      if (from_memory) {
        const kernels::AdamWSchedule s = kernels::adamw_schedule(a);
        const float h[3] = {s.lr, s.inv_bias_correction1, s.inv_bias_correction2};
        be.from_host(sched, h);
        call.lr = 0.0f;  // must be ignored
        call.step = 1;
        call.schedule_device = sched.as<float>();
      }
      be.adamw(w, g, m, v, Tensor(), call);
    }
    std::vector<float> out = test::to_host(be, w);
    for (Tensor t : {w, g, m, v, sched}) be.free(t.ptr);
    return out;
  };
  auto cpu = test::cpu_backend();
  const std::vector<float> host = run(*cpu, false), mem = run(*cpu, true);
  for (size_t i = 0; i < host.size(); i += 16) {
    CAPTURE(i);
    CHECK(mem[i] == doctest::Approx(host[i]).epsilon(1e-6));
    CHECK(mem[i] != 0.0f);
  }
  if (has_gpu()) {
    auto gpu = kernels::make_cuda_backend(recipe::kernels::testing::cuda_options());
    CHECK(run(*gpu, true) == run(*gpu, false));  // the CUDA launcher uses the same expressions
  }
}

TEST_SUITE_END();
