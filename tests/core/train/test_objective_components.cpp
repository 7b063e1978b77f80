// The objective and the optimizer as components (core/train/loss.hpp, optimizer.hpp): the
// cross-entropy loss writes the per-row weights the classifier scales by (the old scalar, in every
// row), and AdamW names and sizes its own state, which a checkpoint round trip restores unchanged.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "core/train/checkpointing.hpp"
#include "core/train/trainer.hpp"
#include "tests/core/core_test_util.hpp"
#include "tests/core/data/temp_dir.hpp"

TEST_SUITE_BEGIN("core/train");

using namespace recipe;
using recipe::data::testing::TempDir;

TEST_CASE("cross-entropy loss: every dloss row holds 1/tokens, the scalar the classifier took before") {
  plan::Plan plan = test::gpt_tiny_plan();
  plan.trainer.micro_batch_size = 1;
  plan.trainer.global_batch_size = 2;  // two micro-batches
  test::fill_derived(plan);
  auto be = test::cpu_backend();
  auto source = test::random_tokens(plan);
  const data::SampleSource* src = source.get();
  const int64_t rows = int64_t(plan.trainer.micro_batch_size) * plan.model.seq_length;
  auto loss = core::make_loss(plan, {.backend = be.get(),
                                     .train = src,
                                     .global_batch = plan.trainer.global_batch_size,
                                     .seq = plan.model.seq_length,
                                     .micro_batches = plan.trainer.num_micro_batches,
                                     .rows = rows});
  CHECK(loss->name() == "cross_entropy");
  CHECK(loss->graph_off().empty());  // unmasked data: the weights never change, a recording may fix them
  const double tokens = double(plan.trainer.global_batch_size) * double(plan.model.seq_length);
  CHECK(loss->denominator(3) == tokens);
  CHECK(loss->value(3, 2.0 * tokens) == 2.0);
  loss->prepare(0);
  for (int m = 0; m < plan.trainer.num_micro_batches; ++m) {
    const std::vector<float> w = test::to_host(*be, loss->dloss(m));
    REQUIRE(int64_t(w.size()) == rows);
    for (float x : w) CHECK(x == float(1.0 / tokens));
  }
}

TEST_CASE("optimizer component: AdamW names and sizes its state; a checkpoint round trip restores it bitwise") {
  plan::Plan plan = test::gpt_tiny_plan();
  plan.trainer.max_steps = 4;
  auto be = test::cpu_backend();
  core::Trainer first(plan, *be);
  const core::Optimizer& opt = first.optimizer();
  CHECK(opt.name() == "adamw");
  // The state comes from the component: two f32 tensors over the whole trainable prefix (no
  // ZeRO-1), named by the prefixes old checkpoints hold.
  REQUIRE(opt.state().size() == 2);
  CHECK(opt.state()[0].checkpoint_prefix == "optimizer.exp_avg.");
  CHECK(opt.state()[1].checkpoint_prefix == "optimizer.exp_avg_sq.");
  const int64_t trainable = first.params().layout().trainable_numel;
  CHECK(opt.state_numel() == trainable);
  for (const core::OptimizerState& st : opt.state()) {
    CHECK(st.data.dtype == kernels::DType::f32);
    CHECK(st.data.numel() == trainable);
  }
  CHECK(opt.state_bytes() == size_t(2 * trainable) * sizeof(float));
  CHECK_THROWS_AS(opt.state("optimizer.nope."), std::out_of_range);

  for (int i = 0; i < 3; ++i) REQUIRE(first.step().finite);
  std::vector<std::vector<float>> saved_state;
  for (const core::OptimizerState& st : opt.state()) saved_state.push_back(test::to_host(*be, st.data));
  CHECK(std::any_of(saved_state[1].begin(), saved_state[1].end(), [](float x) { return x != 0.0f; }));

  TempDir dir;
  core::SaveOptions so;
  so.dir = dir / "checkpoints";
  const std::string ckpt_dir = core::save_checkpoint(first, so);
  // Every trainable parameter has one tensor per state, under the component's names.
  const ckpt::CheckpointReader reader(ckpt_dir);
  for (const core::ParamSpec& p : first.params().layout().params)
    for (const core::OptimizerState& st : opt.state()) {
      CAPTURE(p.name);
      CHECK(reader.find(st.checkpoint_prefix + p.name) != nullptr);
    }

  core::Trainer resumed(plan, *be);
  const core::LoadResult lr = core::load_checkpoint(resumed, ckpt_dir, core::LoadMode::resume);
  CHECK(lr.optimizer_restored);
  for (size_t i = 0; i < saved_state.size(); ++i)
    CHECK(test::to_host(*be, resumed.optimizer().state()[i].data) == saved_state[i]);
}

TEST_SUITE_END();
