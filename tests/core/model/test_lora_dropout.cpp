// LoRA adapter dropout (peft.dropout > 0) on the CPU reference: A and B get the gradients finite
// differences give under the step's (fixed, regenerated) mask; dropout acts in training only (an
// evaluation forward is the dropout-free model) and is deterministic; a run resumed from a
// checkpoint continues bitwise like an uninterrupted one (the mask is keyed by the samples, not
// by carried RNG state); the Model's scratch and the memory estimate count the dropped-input buffer.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "core/train/checkpointing.hpp"
#include "core/train/trainer.hpp"
#include "plan/memory_estimate.hpp"
#include "plan/model_size.hpp"
#include "tests/core/core_test_util.hpp"
#include "tests/core/data/temp_dir.hpp"

TEST_SUITE_BEGIN("core/model");

using namespace recipe;
using recipe::core::ParamSpec;
using recipe::core::Trainer;

namespace {

plan::Plan dropout_plan(bool llama, double dropout) {
  plan::Plan p = llama ? test::llama_tiny_plan() : test::gpt_tiny_plan();
  auto& m = p.model;
  m.hidden_size = 32;
  m.head_dim = 0;
  m.ffn_hidden_size = llama ? 48 : 0;
  m.vocab_size = 60;
  m.make_vocab_size_divisible_by = 16;
  m.seq_length = 16;
  m.max_position_embeddings = 0;
  m.init_std = 0.1;
  p.trainer.micro_batch_size = 2;
  p.trainer.global_batch_size = 4;  // two micro-batches: two row ranges of the mask
  test::fill_derived(p);
  p.model.ffn_hidden_size = llama ? 48 : 128;
  p.mode = plan::Mode::finetune;
  p.peft.kind = plan::PeftKind::lora;
  p.peft.rank = 4;
  p.peft.alpha = 8;
  p.peft.dropout = dropout;
  p.peft.target_modules = {"all-linear"};
  p.optimizer.lr = 1e-2;
  return p;
}

// Moves every trainable tensor off its init (B = 0 would make A's gradient and the adapter's
// contribution zero).
void jitter_adapters(Trainer& tr) {
  auto& store = tr.params();
  auto& be = tr.backend();
  for (const ParamSpec& p : store.layout().params) {
    if (!p.trainable) continue;
    std::vector<float> v = test::to_host(be, store.master(p));
    const uint64_t key = core::rng::stream_key(78, p.name);
    for (size_t i = 0; i < v.size(); ++i) v[i] += float(0.1 * core::rng::normal(key, i));
    be.from_host(store.master(p), v.data());
  }
  store.sync_compute();
}

}  // namespace

TEST_CASE("lora dropout: gradients of A and B match finite differences under the step's mask") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    const plan::Plan plan = dropout_plan(llama, 0.3);
    auto be = test::cpu_backend();
    Trainer tr(plan, *be, nullptr, test::random_tokens(plan), nullptr);
    jitter_adapters(tr);
    auto& store = tr.params();
    tr.compute_gradients(1);
    const std::vector<float> grads = test::to_host(*be, store.grads());
    std::vector<float> master = test::to_host(*be, store.master());
    const double eps = 3e-3;
    int checked = 0, failed = 0;
    for (const ParamSpec& p : store.layout().params) {
      if (!p.trainable) continue;
      std::vector<int64_t> idx(size_t(p.numel));
      for (int64_t i = 0; i < p.numel; ++i) idx[size_t(i)] = i;
      std::partial_sort(idx.begin(), idx.begin() + 3, idx.end(), [&](int64_t a, int64_t b) {
        return std::fabs(grads[size_t(p.offset + a)]) > std::fabs(grads[size_t(p.offset + b)]);
      });
      for (int k = 0; k < 3; ++k) {
        const size_t at = size_t(p.offset + idx[size_t(k)]);
        const float w0 = master[at];
        // The training loss of step 1 (the same samples, so the same dropout masks).
        auto loss_at = [&](float w) {
          master[at] = w;
          be->from_host(store.master_span(int64_t(at), 1), &master[at]);
          store.sync_compute();
          return tr.compute_gradients(1);
        };
        const double fd = (loss_at(w0 + float(eps)) - loss_at(w0 - float(eps))) / (2 * eps);
        loss_at(w0);
        const double an = grads[at];
        const double scale = std::max(std::fabs(fd), std::fabs(an));
        if (scale < 1e-4) continue;
        ++checked;
        if (std::fabs(fd - an) > 2e-2 * scale + 2e-5) {
          ++failed;
          MESSAGE(p.name << "[" << idx[size_t(k)] << "]: analytic " << an << " vs finite difference " << fd);
        }
      }
    }
    CHECK(checked >= 20);
    CHECK(failed == 0);
  }
}

TEST_CASE("lora dropout: on in training, off in evaluation, deterministic") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    auto be = test::cpu_backend();
    Trainer drop(dropout_plan(llama, 0.2), *be, nullptr, test::random_tokens(dropout_plan(llama, 0.2)), nullptr);
    Trainer plain(dropout_plan(llama, 0.0), *be, nullptr, test::random_tokens(dropout_plan(llama, 0.0)), nullptr);
    jitter_adapters(drop);
    jitter_adapters(plain);
    // Evaluation: the dropout-free model, bit for bit.
    CHECK(drop.compute_loss(2) == plain.compute_loss(2));
    // Training: the dropped adapters change the loss; the same step drops the same elements.
    const double a = drop.compute_gradients(2), b = drop.compute_gradients(2);
    CHECK(a == b);
    CHECK(a != plain.compute_gradients(2));
    // Another step, other samples: other masks (and another loss).
    CHECK(drop.compute_gradients(3) != plain.compute_gradients(3));
  }
}

TEST_CASE("lora dropout: a resumed fine-tune continues bitwise like an uninterrupted one") {
  plan::Plan plan = dropout_plan(true, 0.1);
  plan.trainer.max_steps = 8;
  auto be = test::cpu_backend();
  auto run = [&](Trainer& t, int n) {
    std::vector<double> losses;
    for (int i = 0; i < n; ++i) {
      const core::StepResult r = t.step();
      REQUIRE(r.finite);
      losses.push_back(r.loss);
    }
    return losses;
  };
  Trainer whole(plan, *be, nullptr, test::random_tokens(plan), nullptr);
  const std::vector<double> all = run(whole, 8);
  data::testing::TempDir dir;
  std::string saved;
  {
    Trainer first(plan, *be, nullptr, test::random_tokens(plan), nullptr);
    run(first, 3);
    core::SaveOptions so;
    so.dir = dir / "checkpoints";
    so.plan_toml = "# test plan\n";
    saved = core::save_checkpoint(first, so);
  }
  Trainer resumed(plan, *be, nullptr, test::random_tokens(plan), nullptr);
  core::load_checkpoint(resumed, saved, core::LoadMode::resume);
  REQUIRE(resumed.steps_done() == 3);
  const std::vector<double> tail = run(resumed, 5);
  for (size_t i = 0; i < tail.size(); ++i) CHECK_MESSAGE(tail[i] == all[3 + i], "step " << 4 + i);
  CHECK(test::to_host(*be, resumed.params().master()) == test::to_host(*be, whole.params().master()));
}

TEST_CASE("lora dropout: the memory estimate counts the shared dropped-input scratch") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    plan::Plan plan = dropout_plan(llama, 0.0);
    plan.parallelism.tp = 2;
    const plan::MemoryEstimate off = plan::estimate_memory(plan);
    plan.peft.dropout = 0.05;
    const plan::MemoryEstimate on = plan::estimate_memory(plan);
    // [micro·seq, widest adapted input of a TP rank]: hidden (q|k|v, fc1 / gate|up take the full
    // width; proj and fc2 / down take q_dim/2 and ffn/2), f32 on the CPU.
    const int64_t rows = int64_t(plan.trainer.micro_batch_size) * plan.model.seq_length;
    const int64_t widest = std::max<int64_t>(plan.model.hidden_size, plan.model.ffn_hidden_size / 2);
    CHECK(plan::lora_widest_input(plan, 2) == widest);
    CHECK(on.activations - off.activations == rows * widest * 4);
  }
}

TEST_SUITE_END();
