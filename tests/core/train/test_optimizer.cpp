// Learning-rate schedules, clipping and the AdamW step through the Trainer.
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>

#include "core/train/lr_schedule.hpp"
#include "core/train/trainer.hpp"
#include "tests/core/core_test_util.hpp"

TEST_SUITE_BEGIN("core/train");

using namespace recipe;
using namespace recipe::core;

TEST_CASE("lr schedule: warmup, cosine midpoint, min_lr floor, linear, constant") {
  using D = LrSchedule::Decay;
  LrSchedule cos(1e-3, 1e-4, 10, 110, D::cosine);
  CHECK(cos.at(0) == doctest::Approx(1e-4));  // (0+1)/10 of lr
  CHECK(cos.at(4) == doctest::Approx(5e-4));
  CHECK(cos.at(9) == doctest::Approx(1e-3));
  CHECK(cos.at(10) == doctest::Approx(1e-3));    // decay starts at the peak
  CHECK(cos.at(60) == doctest::Approx(5.5e-4));  // halfway: (lr + min_lr) / 2
  CHECK(cos.at(35) == doctest::Approx(1e-4 + 0.5 * (1 + std::cos(std::numbers::pi / 4)) * 9e-4));
  CHECK(cos.at(110) == doctest::Approx(1e-4));
  CHECK(cos.at(5000) == doctest::Approx(1e-4));  // floor
  for (int s = 10; s < 110; ++s) CHECK(cos.at(s + 1) <= cos.at(s));

  LrSchedule lin(1e-3, 0.0, 0, 100, D::linear);
  CHECK(lin.at(0) == doctest::Approx(1e-3));
  CHECK(lin.at(25) == doctest::Approx(7.5e-4));
  CHECK(lin.at(100) == doctest::Approx(0.0));

  LrSchedule flat(3e-4, 0.0, 5, 100, D::constant);
  CHECK(flat.at(2) == doctest::Approx(3e-4 * 3 / 5));
  CHECK(flat.at(7) == doctest::Approx(3e-4));
  CHECK(flat.at(1000) == doctest::Approx(3e-4));

  plan::Plan plan = test::gpt_tiny_plan();
  plan.schedule.decay_steps = 150;  // derived by the resolver; core takes it as it is
  CHECK(LrSchedule::from_plan(plan).decay_steps() == 150);
  plan.schedule.decay_steps = 0;  // a recipe's 0 is derived (= trainer.max_steps here), not by core
  test::fill_derived(plan);
  CHECK(LrSchedule::from_plan(plan).decay_steps() == plan.trainer.max_steps);
  CHECK_THROWS_WITH_AS(LrSchedule(1e-4, 1e-3, 0, 10, D::cosine), doctest::Contains("optimizer.min_lr"),
                       std::invalid_argument);
}

namespace {

struct Update {
  double norm_of_delta;
  StepResult step;
};

// One optimizer step of a fresh tiny GPT; returns ||Δw|| and the step's stats.
Update one_step(const plan::Plan& plan) {
  auto be = test::cpu_backend();
  Trainer tr(plan, *be, nullptr, test::random_tokens(plan), nullptr);
  const std::vector<float> before = test::to_host(*be, tr.params().master());
  Update u;
  u.step = tr.step();
  const std::vector<float> after = test::to_host(*be, tr.params().master());
  double s = 0;
  for (size_t i = 0; i < before.size(); ++i) s += (double(after[i]) - before[i]) * (double(after[i]) - before[i]);
  u.norm_of_delta = std::sqrt(s);
  return u;
}

plan::Plan clip_plan() {
  plan::Plan plan = test::gpt_tiny_plan();
  plan.model.seq_length = 16;
  plan.model.max_position_embeddings = 0;
  plan.trainer.micro_batch_size = plan.trainer.global_batch_size = 2;
  plan.schedule.warmup_steps = 0;
  plan.schedule.decay_style = plan::DecayStyle::constant;
  // eps far above |g|: AdamW's first update becomes lr·g·scale/eps, linear in the clip factor.
  plan.optimizer.eps = 10.0;
  test::fill_derived(plan);
  return plan;
}

}  // namespace

TEST_CASE("clipping: the clip factor is min(1, clip/(norm+1e-6)) and scales the update") {
  plan::Plan plan = clip_plan();
  plan.optimizer.clip_grad = 0;  // off
  const Update free = one_step(plan);
  CHECK(free.step.clip_factor == 1.0);
  CHECK(free.step.finite);
  CHECK(free.step.step == 1);
  const double norm = free.step.grad_norm;
  REQUIRE(norm > 0);

  plan.optimizer.clip_grad = norm / 4;
  const Update clipped = one_step(plan);
  CHECK(clipped.step.grad_norm == doctest::Approx(norm).epsilon(1e-6));
  CHECK(clipped.step.clip_factor == doctest::Approx(0.25).epsilon(1e-4));
  CHECK(clipped.norm_of_delta / free.norm_of_delta == doctest::Approx(0.25).epsilon(0.01));

  plan.optimizer.clip_grad = norm * 10;  // above the norm: no effect
  const Update loose = one_step(plan);
  CHECK(loose.step.clip_factor == 1.0);
  CHECK(loose.norm_of_delta == doctest::Approx(free.norm_of_delta).epsilon(1e-6));
}

TEST_CASE("weight decay applies to weights only, not to norms, biases or embeddings") {
  plan::Plan plan = clip_plan();
  plan.optimizer.lr = 0.1;
  plan.optimizer.weight_decay = 0.5;
  auto be = test::cpu_backend();
  Trainer tr(plan, *be, nullptr, test::random_tokens(plan), nullptr);
  tr.step();  // a normal step first so m, v are nonzero
  // With zero gradients the only change is decay: w ← w − lr·(update(m,v) + wd·w). Compare two
  // trainers, one without decay.
  plan::Plan nodecay = plan;
  nodecay.optimizer.weight_decay = 0;
  Trainer ref(nodecay, *be, nullptr, test::random_tokens(plan), nullptr);
  ref.step();
  const auto& L = tr.params().layout();
  auto w = test::to_host(*be, tr.params().master()), r = test::to_host(*be, ref.params().master());
  for (const char* name : {"layers.0.attention.q.weight", "layers.1.mlp.fc2.weight"}) {
    const ParamSpec& p = L.get(name);
    int changed = 0;
    for (int64_t i = 0; i < p.numel; ++i) changed += w[size_t(p.offset + i)] != r[size_t(p.offset + i)];
    CHECK(changed > p.numel / 2);
  }
  for (const char* name : {"layers.0.attention_norm.weight", "layers.0.mlp.fc1.bias", "embedding.word.weight"}) {
    CAPTURE(name);
    const ParamSpec& p = L.get(name);
    for (int64_t i = 0; i < p.numel; ++i) REQUIRE(w[size_t(p.offset + i)] == r[size_t(p.offset + i)]);
  }
}

TEST_SUITE_END();
