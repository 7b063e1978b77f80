// End-to-end training on CPU: loss falls, runs are bitwise reproducible, the NaN guard fires, and
// gpt_tiny's first 20 losses match stored values.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "core/train/trainer.hpp"
#include "tests/core/core_test_util.hpp"

using namespace recipe;
using namespace recipe::core;

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("recipe_core_test_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(d);
  return d;
}

const double kGptTinyLosses[] = {
#include "tests/core/gpt_tiny_losses.inc"
};

}  // namespace

TEST_SUITE_BEGIN("core/train");

TEST_CASE("training: gpt_tiny and llama_tiny memorize a fixed batch (loss falls from ln V)") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    plan::Plan plan = llama ? test::llama_tiny_plan() : test::gpt_tiny_plan();
    auto be = test::cpu_backend();
    Trainer tr(plan, *be, nullptr, test::random_tokens(plan, 3, plan.trainer.global_batch_size), nullptr);
    double first = 0, last = 0;
    for (int i = 0; i < plan.trainer.max_steps; ++i) {
      StepResult r = tr.step();
      REQUIRE(r.finite);
      if (i == 0) first = r.loss;
      last = r.loss;
    }
    MESSAGE((llama ? "llama_tiny" : "gpt_tiny") << ": loss " << first << " -> " << last);
    CHECK(std::fabs(first - std::log(256.0)) < 0.1);
    CHECK(last < 0.5);
    CHECK(tr.steps_done() == plan.trainer.max_steps);
    CHECK(tr.consumed_samples() == int64_t(plan.trainer.max_steps) * 8);
  }
}

TEST_CASE("training: train() writes metrics.jsonl that two runs reproduce bit for bit") {
  plan::Plan plan = test::gpt_tiny_plan();
  plan.trainer.max_steps = 12;
  plan.trainer.micro_batch_size = 4;  // 2 micro-batches per step
  plan.data.fixed_batch = false;
  plan.trainer.eval_interval = 5;
  plan.trainer.eval_iters = 2;
  test::fill_derived(plan);
  std::string runs[2];
  for (int k = 0; k < 2; ++k) {
    const auto dir = temp_dir("det" + std::to_string(k));
    std::ostringstream log;
    TrainOptions opts;
    opts.run_dir = dir.string();
    opts.log = &log;
    TrainResult res = train(plan, opts);
    CHECK_FALSE(res.diverged);
    CHECK(res.steps_done == 12);
    CHECK(res.tokens_per_sec > 0);
    CHECK(res.peak_memory_bytes > 0);
    CHECK(res.last_val_loss > 0);
    CHECK(log.str().find("step 10/12 | loss ") != std::string::npos);
    CHECK(log.str().find("MFU n/a") != std::string::npos);
    CHECK(log.str().find("done: 12 steps") != std::string::npos);
    runs[k] = read_file(dir / "metrics.jsonl");
    const std::string timing = read_file(dir / "timing.jsonl");
    CHECK(std::count(timing.begin(), timing.end(), '\n') == 12);
    CHECK(timing.find("\"mfu\":null") != std::string::npos);
    std::filesystem::remove_all(dir);
  }
  CHECK(std::count(runs[0].begin(), runs[0].end(), '\n') == 12);
  CHECK(runs[0].find("{\"step\":1,\"loss\":") == 0);
  CHECK(runs[0].find("\"val_loss\"") != std::string::npos);  // steps 5, 10, 12
  CHECK(runs[0].find("\"consumed_samples\":96") != std::string::npos);
  CHECK(runs[0] == runs[1]);
}

TEST_CASE("training: the NaN/inf guard stops an absurd learning rate with a clear message") {
  plan::Plan plan = test::gpt_tiny_plan();
  plan.trainer.max_steps = 30;
  plan.optimizer.lr = 1e6;
  plan.optimizer.min_lr = 0;
  plan.optimizer.clip_grad = 0;
  plan.schedule.warmup_steps = 0;
  plan.schedule.decay_style = plan::DecayStyle::constant;
  test::fill_derived(plan);
  std::ostringstream log;
  TrainOptions opts;
  opts.log = &log;
  TrainResult res = train(plan, opts);
  CHECK(res.diverged);
  CHECK(res.steps_done < 30);
  CHECK(res.message.find("diverged at step " + std::to_string(res.steps_done + 1)) != std::string::npos);
  CHECK(res.message.find("optimizer.lr") != std::string::npos);
  CHECK(log.str().find("diverged") != std::string::npos);
}

TEST_CASE("training: gpt_tiny's first 20 losses match the stored regression values") {
  plan::Plan plan = test::gpt_tiny_plan();
  plan.trainer.max_steps = 20;
  test::fill_derived(plan);
  auto be = test::cpu_backend();
  Trainer tr(plan, *be, nullptr);  // mock fixed batch from the data module, seed 1234
  REQUIRE(sizeof(kGptTinyLosses) / sizeof(double) == 20);
  // RECIPE_PRINT_GOLDEN=1 prints the values in the .inc format (after a deliberate change).
  const bool print = std::getenv("RECIPE_PRINT_GOLDEN") != nullptr;
  for (int i = 0; i < 20; ++i) {
    StepResult r = tr.step();
    CAPTURE(i);
    if (print) std::printf("golden %.9g,\n", r.loss);
    CHECK(r.loss == doctest::Approx(kGptTinyLosses[i]).epsilon(1e-4));
  }
}

TEST_CASE("trainer: bad batch settings and device names are rejected with the field path") {
  plan::Plan plan = test::gpt_tiny_plan();
  plan.trainer.global_batch_size = 12;
  plan.trainer.micro_batch_size = 8;
  auto be = test::cpu_backend();
  CHECK_THROWS_WITH_AS(Trainer(plan, *be, nullptr, test::random_tokens(plan), nullptr),
                       doctest::Contains("trainer.global_batch_size=12"), std::invalid_argument);
  plan = test::gpt_tiny_plan();
  plan.trainer.recompute = static_cast<plan::Recompute>(9);  // only a plan built in code can hold it
  CHECK_THROWS_WITH_AS(Trainer(plan, *be, nullptr, test::random_tokens(plan), nullptr),
                       doctest::Contains("trainer.recompute"), std::invalid_argument);
  plan = test::gpt_tiny_plan();
  plan.trainer.device = static_cast<plan::Device>(9);
  CHECK_THROWS_WITH_AS(train(plan, TrainOptions{}), doctest::Contains("trainer.device"), std::invalid_argument);
  // Tokens outside the vocabulary are reported, not read out of bounds.
  plan = test::gpt_tiny_plan();
  plan.model.vocab_size = 100;
  test::fill_derived(plan);
  Trainer tr(plan, *be, nullptr, std::make_unique<test::RandomTokens>(64, 256, 1), nullptr);
  CHECK_THROWS_WITH_AS(tr.step(), doctest::Contains("model.vocab_size=100"), std::runtime_error);
}

TEST_CASE("trainer: a NaN in the weights is caught before the update") {
  plan::Plan plan = test::gpt_tiny_plan();
  plan.model.seq_length = 16;
  plan.model.max_position_embeddings = 0;
  test::fill_derived(plan);
  auto be = test::cpu_backend();
  Trainer tr(plan, *be, nullptr, test::random_tokens(plan), nullptr);
  const float nan = std::nanf("");
  be->from_host(tr.params().master_span(tr.params().layout().get("layers.1.mlp.fc1.weight").offset + 3, 1), &nan);
  tr.params().sync_compute();
  const std::vector<float> before = test::to_host(*be, tr.params().master());
  StepResult r = tr.step();
  CHECK_FALSE(r.finite);
  CHECK(std::isnan(r.loss));
  CHECK(tr.steps_done() == 0);
  const std::vector<float> after = test::to_host(*be, tr.params().master());
  CHECK(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)) == 0);
}

TEST_SUITE_END();
