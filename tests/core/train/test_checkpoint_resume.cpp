// Trainer ↔ checkpoint in one process: resumed equals uninterrupted (bitwise, fp32 CPU), a
// weights-only load starts fresh, and checkpoints of another model or batch are refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
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
namespace fs = std::filesystem;

namespace {

std::vector<double> run_steps(core::Trainer& t, int n) {
  std::vector<double> losses;
  for (int i = 0; i < n; ++i) {
    const core::StepResult r = t.step();
    REQUIRE(r.finite);
    losses.push_back(r.loss);
  }
  return losses;
}

// Trains `t` for `n` steps and saves it into the checkpoints dir `dir`; returns the checkpoint.
std::string train_and_save(core::Trainer& t, int n, const std::string& dir) {
  run_steps(t, n);
  core::SaveOptions so;
  so.dir = dir;
  return core::save_checkpoint(t, so);
}

std::vector<float> masters(core::Trainer& t) { return test::to_host(t.backend(), t.params().master()); }
std::vector<float> moments(core::Trainer& t) {
  return test::to_host(t.backend(), t.optimizer().state("optimizer.exp_avg_sq.").data);
}

void check_resume(plan::Plan plan) {
  plan.trainer.max_steps = 12;
  plan.optimizer.weight_decay = 0.1;
  auto be = test::cpu_backend();
  core::Trainer whole(plan, *be);
  const std::vector<double> all = run_steps(whole, 12);

  TempDir dir;
  std::string saved;
  {
    core::Trainer first(plan, *be);
    const std::vector<double> head = run_steps(first, 5);
    for (size_t i = 0; i < head.size(); ++i) CHECK(head[i] == all[i]);
    core::SaveOptions so;
    so.dir = dir / "checkpoints";
    so.plan_toml = "# test plan\n";
    saved = core::save_checkpoint(first, so);
  }
  CHECK(saved == dir / "checkpoints/step-5");
  CHECK(ckpt::find_checkpoint(dir / "checkpoints") == saved);

  core::Trainer resumed(plan, *be);
  const core::LoadResult lr = core::load_checkpoint(resumed, saved, core::LoadMode::resume);
  CHECK(lr.step == 5);
  CHECK(lr.optimizer_restored);
  CHECK(resumed.steps_done() == 5);
  const std::vector<double> tail = run_steps(resumed, 7);
  for (size_t i = 0; i < tail.size(); ++i) CHECK_MESSAGE(tail[i] == all[5 + i], "step " << 6 + i);
  CHECK(masters(resumed) == masters(whole));
  CHECK(moments(resumed) == moments(whole));
}

}  // namespace

TEST_CASE("gpt_tiny: a run resumed from a checkpoint continues bitwise like an uninterrupted one") {
  check_resume(test::gpt_tiny_plan());
}

TEST_CASE("llama_tiny: a run resumed from a checkpoint continues bitwise like an uninterrupted one") {
  check_resume(test::llama_tiny_plan());
}

// FP8 delayed scaling: the amax histories are training state. A 4-step history wraps within the
// run, so a resume that lost or misplaced them would scale differently and not match.
TEST_CASE("fp8 delayed scaling: a resumed run restores the amax histories and continues bitwise") {
  plan::Plan p = test::gpt_tiny_plan();
  p.trainer.precision = plan::Precision::fp8;
  p.fp8.scaling = plan::Fp8Scaling::delayed;
  p.fp8.amax_history_len = 4;
  check_resume(p);
  // What was saved: one history per layer, [4 linears, 3 roles, H]; another length is refused.
  auto be = test::cpu_backend();
  TempDir dir;
  core::Trainer t(p, *be);
  const std::string saved = train_and_save(t, 2, dir / "checkpoints");
  const ckpt::CheckpointReader reader(saved);
  for (int l = 0; l < p.model.num_layers; ++l) {
    const ckpt::TensorInfo* info = reader.find("fp8.layers." + std::to_string(l) + ".amax_history");
    REQUIRE(info);
    CHECK(info->global_shape == std::vector<int64_t>{4, 3, 4});
  }
  plan::Plan longer = p;
  longer.fp8.amax_history_len = 8;
  core::Trainer other(longer, *be);
  CHECK_THROWS_WITH_AS(core::load_checkpoint(other, saved, core::LoadMode::resume),
                       doctest::Contains("fp8.amax_history_len"), std::runtime_error);
}

namespace {
plan::Plan with_lora(plan::Plan p) {
  p.mode = plan::Mode::finetune;
  p.peft.kind = plan::PeftKind::lora;
  p.peft.rank = 8;
  p.peft.alpha = 16;
  p.peft.target_modules = {"all-linear"};
  p.optimizer.lr = 1e-2;
  return p;
}
}  // namespace

TEST_CASE("LoRA: a resumed fine-tune continues bitwise (adapters, their moments, the frozen base)") {
  check_resume(with_lora(test::gpt_tiny_plan()));
  check_resume(with_lora(test::llama_tiny_plan()));
}

namespace {

std::vector<float> frozen_weights(core::Trainer& t) {
  const core::ParamLayout& L = t.params().layout();
  return t.params().compute_to_host(L.frozen_begin, L.frozen_numel);
}

// A LoRA fine-tune saved adapter-only (referring to its base) and resumed continues bitwise like an
// uninterrupted one. `base_dir` empty: from random weights, the base written by
// save_base_checkpoint; else from that (non-LoRA) base checkpoint, loaded weights-only.
void check_adapter_only_resume(const plan::Plan& plan, const TempDir& dir, const std::string& base_dir) {
  auto be = test::cpu_backend();
  auto start = [&](core::Trainer& t) -> std::optional<ckpt::BaseRef> {
    if (base_dir.empty()) return std::nullopt;
    return core::load_checkpoint(t, base_dir, core::LoadMode::weights_only).base;
  };
  core::Trainer whole(plan, *be);
  start(whole);
  const std::vector<double> all = run_steps(whole, 12);

  std::string saved;
  ckpt::BaseRef base;
  {
    core::Trainer first(plan, *be);
    std::optional<ckpt::BaseRef> b = start(first);
    if (!b) b = core::save_base_checkpoint(first, dir / "checkpoints", "# test plan\n");
    base = *b;
    CHECK(base.path == (base_dir.empty() ? dir / "checkpoints/base/step-0" : base_dir));
    CHECK(base.hash == ckpt::checkpoint_hash(base.path));
    run_steps(first, 5);
    core::SaveOptions so;
    so.dir = dir / "checkpoints";
    so.base = base;
    saved = core::save_checkpoint(first, so);
  }
  CHECK(ckpt::find_checkpoint(dir / "checkpoints") == saved);  // base/ is not a step
  {  // adapter-only: the trainable tensors and their moments, nothing of the base
    const ckpt::CheckpointReader r(saved);
    REQUIRE(r.base_ref());
    CHECK(*r.base_ref() == base);
    core::Trainer probe(plan, *be);
    const core::ParamLayout& L = probe.params().layout();
    int own = 0;
    for (const ckpt::TensorInfo& t : r.tensors()) {
      const std::string name = t.name.rfind("optimizer.", 0) == 0 ? t.name.substr(t.name.find('.', 10) + 1) : t.name;
      CAPTURE(t.name);
      REQUIRE(L.find(name));
      CHECK(L.find(name)->trainable);
      ++own;
    }
    int trainable = 0;
    for (const core::ParamSpec& p : L.params) trainable += p.trainable;
    CHECK(own == 3 * trainable);
    uint64_t adapter_bytes = 0, base_bytes = 0;
    for (const auto& e : fs::directory_iterator(saved)) adapter_bytes += e.file_size();
    for (const auto& e : fs::directory_iterator(base.path)) base_bytes += e.file_size();
    CHECK(adapter_bytes < base_bytes / 2);
  }

  core::Trainer resumed(plan, *be);
  const core::LoadResult lr = core::load_checkpoint(resumed, saved, core::LoadMode::resume);
  CHECK(lr.step == 5);
  CHECK(lr.optimizer_restored);
  REQUIRE(lr.base);
  CHECK(*lr.base == base);  // its next saves refer to the same base
  const std::vector<double> tail = run_steps(resumed, 7);
  for (size_t i = 0; i < tail.size(); ++i) CHECK_MESSAGE(tail[i] == all[5 + i], "step " << 6 + i);
  CHECK(masters(resumed) == masters(whole));
  CHECK(moments(resumed) == moments(whole));
  CHECK(frozen_weights(resumed) == frozen_weights(whole));
}

}  // namespace

TEST_CASE("LoRA: an adapter-only checkpoint of a fine-tune from random weights resumes bitwise through base/") {
  for (plan::Plan plan : {with_lora(test::gpt_tiny_plan()), with_lora(test::llama_tiny_plan())}) {
    plan.trainer.max_steps = 12;
    plan.optimizer.weight_decay = 0.1;
    TempDir dir;
    check_adapter_only_resume(plan, dir, "");
  }
}

TEST_CASE("LoRA: an adapter-only checkpoint of a fine-tune from a base checkpoint resumes bitwise") {
  for (plan::Plan base_plan : {test::gpt_tiny_plan(), test::llama_tiny_plan()}) {
    auto be = test::cpu_backend();
    TempDir dir;
    base_plan.trainer.max_steps = 3;
    core::Trainer base(base_plan, *be);
    const std::string base_ckpt = train_and_save(base, 3, dir / "pretrained");
    plan::Plan plan = with_lora(base_plan);
    plan.trainer.seed = 99;  // other random init: the base must come from the checkpoint, also on resume
    plan.trainer.max_steps = 12;
    check_adapter_only_resume(plan, dir, fs::absolute(base_ckpt).lexically_normal().string());
  }
}

TEST_CASE("LoRA: resuming an adapter-only checkpoint whose base is missing or changed is refused naming both") {
  auto be = test::cpu_backend();
  TempDir dir;
  plan::Plan base_plan = test::gpt_tiny_plan();
  base_plan.trainer.max_steps = 4;
  core::Trainer base(base_plan, *be);
  const std::string base_ckpt = fs::absolute(train_and_save(base, 3, dir / "pretrained")).string();
  plan::Plan plan = with_lora(base_plan);
  core::Trainer tuned(plan, *be);
  core::SaveOptions so;
  so.dir = dir / "checkpoints";
  so.base = core::load_checkpoint(tuned, base_ckpt, core::LoadMode::weights_only).base;
  run_steps(tuned, 2);
  const std::string saved = core::save_checkpoint(tuned, so);

  // The base run saved its step 3 again (one more step in between): other weights at the same path.
  base.restore_steps_done(2);
  train_and_save(base, 1, dir / "pretrained");
  core::Trainer again(plan, *be);
  CHECK_THROWS_WITH_AS(
      core::load_checkpoint(again, saved, core::LoadMode::resume),
      doctest::Contains(
          (saved + " holds only adapters; its base " + base_ckpt + " has changed since they were saved").c_str()),
      std::runtime_error);

  fs::remove_all(base_ckpt);
  CHECK_THROWS_WITH_AS(
      core::load_checkpoint(again, saved, core::LoadMode::resume),
      doctest::Contains(
          (saved + " holds only adapters; its base weights are in " + base_ckpt + ", which does not exist").c_str()),
      std::runtime_error);
}

TEST_CASE("LoRA: a fine-tune started from an adapter-only checkpoint takes its adapters and refers to its base") {
  auto be = test::cpu_backend();
  TempDir dir;
  plan::Plan plan = with_lora(test::llama_tiny_plan());
  plan.trainer.max_steps = 6;
  core::Trainer tuned(plan, *be);
  core::SaveOptions so;
  so.dir = dir / "checkpoints";
  so.base = core::save_base_checkpoint(tuned, so.dir, "");
  run_steps(tuned, 2);
  const std::string saved = core::save_checkpoint(tuned, so);

  plan::Plan next = plan;
  next.trainer.seed = 5;  // other random init: everything must come from the checkpoints
  core::Trainer again(next, *be);
  const core::LoadResult lr = core::load_checkpoint(again, saved, core::LoadMode::weights_only);
  REQUIRE(lr.base);
  CHECK(*lr.base == *so.base);  // the base itself, not the adapter checkpoint: references never chain
  CHECK(again.steps_done() == 0);
  CHECK(masters(again) == masters(tuned));
  CHECK(frozen_weights(again) == frozen_weights(tuned));
  CHECK(again.compute_loss(4) == tuned.compute_loss(4));
}

TEST_CASE("LoRA: a model without adapters refuses a LoRA checkpoint (it would load the base alone)") {
  auto be = test::cpu_backend();
  TempDir dir;
  plan::Plan plan = with_lora(test::gpt_tiny_plan());
  plan.trainer.max_steps = 3;
  core::Trainer tuned(plan, *be);
  const std::string saved = train_and_save(tuned, 1, dir / "checkpoints");
  plan::Plan plain = test::gpt_tiny_plan();
  core::Trainer other(plain, *be);
  CHECK_THROWS_WITH_AS(core::load_checkpoint(other, saved, core::LoadMode::weights_only),
                       doctest::Contains("lora_a.weight (a LoRA adapter) has no place in this model"),
                       std::runtime_error);
}

TEST_CASE("LoRA: a fine-tune starts from its base's checkpoint; the adapters keep their init (B = 0)") {
  auto be = test::cpu_backend();
  TempDir dir;
  plan::Plan base_plan = test::gpt_tiny_plan();
  base_plan.trainer.max_steps = 3;
  core::Trainer base(base_plan, *be);
  const std::string saved = train_and_save(base, 3, dir / "base");
  const double base_loss = base.compute_loss(3);
  plan::Plan lora_plan = with_lora(base_plan);
  lora_plan.trainer.seed = 99;  // other random init: the base weights must come from the checkpoint
  core::Trainer lora(lora_plan, *be);
  const core::LoadResult lr = core::load_checkpoint(lora, saved, core::LoadMode::weights_only);
  CHECK_FALSE(lr.optimizer_restored);
  CHECK(lora.steps_done() == 0);
  CHECK(lora.compute_loss(3) == base_loss);
  // Resuming (not starting) needs the adapters: the base checkpoint has none.
  core::Trainer again(lora_plan, *be);
  CHECK_THROWS_WITH_AS(core::load_checkpoint(again, saved, core::LoadMode::resume),
                       doctest::Contains("lora_a.weight is missing"), std::runtime_error);
}

TEST_CASE("a weights-only load takes the weights and starts at step 0 with fresh moments") {
  plan::Plan plan = test::gpt_tiny_plan();
  plan.trainer.max_steps = 10;
  auto be = test::cpu_backend();
  TempDir dir;
  core::Trainer first(plan, *be);
  const std::string saved = train_and_save(first, 3, dir.path.string());

  core::Trainer tuned(plan, *be);
  const std::vector<float> before = masters(tuned);
  const core::LoadResult lr = core::load_checkpoint(tuned, saved, core::LoadMode::weights_only);
  CHECK(lr.step == 3);
  CHECK_FALSE(lr.optimizer_restored);
  CHECK(tuned.steps_done() == 0);
  CHECK(masters(tuned) == masters(first));
  CHECK(masters(tuned) != before);
  for (float v : moments(tuned)) REQUIRE(v == 0.0f);
}

namespace {

// A plan of `base`'s model with its vocabulary (250) padded to a multiple of `multiple` — what
// another TP size does (padded vocab = multiple of make_vocab_size_divisible_by·tp).
plan::Plan padded(plan::Plan p, int multiple) {
  p.model.vocab_size = 250;
  p.model.make_vocab_size_divisible_by = multiple;
  test::fill_derived(p);
  return p;
}

// p's rows [0, rows) of the flat buffer `v` (a master or moment copy) and whether the rest are 0.
std::vector<float> rows_of(const core::ParamSpec& p, const std::vector<float>& v, int64_t rows) {
  const int64_t row = p.numel / p.global_shape[0];
  return {v.begin() + p.offset, v.begin() + p.offset + rows * row};
}
bool zero_past(const core::ParamSpec& p, const std::vector<float>& v, int64_t rows) {
  const int64_t row = p.numel / p.global_shape[0];
  return std::all_of(v.begin() + p.offset + rows * row, v.begin() + p.offset + p.numel,
                     [](float x) { return x == 0.0f; });
}

}  // namespace

// The padded vocabulary depends on TP (gpt3_345m: 50304 at tp1, 50432 at tp2), so a checkpoint
// saved at one TP size holds more or fewer embedding / lm_head rows than the model at another.
// The rows past vocab_size are padding: loading pads them with zeros or trims them, weights and
// Adam moments alike, and the run continues as the uninterrupted one does.
TEST_CASE("a checkpoint of another vocabulary padding (another TP size) resumes: padding rows padded or trimmed") {
  plan::Plan saved_plan = padded(test::llama_tiny_plan(), 128);  // 256 rows
  saved_plan.trainer.max_steps = 8;
  saved_plan.optimizer.weight_decay = 0.1;
  REQUIRE(saved_plan.model.padded_vocab_size == 256);
  auto be = test::cpu_backend();
  core::Trainer whole(saved_plan, *be);
  const std::vector<double> all = run_steps(whole, 8);
  TempDir dir;
  std::string saved;
  std::vector<float> saved_master, saved_moment;
  {
    core::Trainer first(saved_plan, *be);
    saved = train_and_save(first, 4, dir / "checkpoints");
    saved_master = masters(first);
    saved_moment = moments(first);
  }
  const core::ParamLayout saved_layout = whole.params().layout();

  for (const int multiple : {100, 1}) {  // 300 rows (more than saved), 250 (fewer)
    CAPTURE(multiple);
    plan::Plan p = padded(saved_plan, multiple);
    core::Trainer resumed(p, *be);
    const core::LoadResult lr = core::load_checkpoint(resumed, saved, core::LoadMode::resume);
    CHECK(lr.optimizer_restored);
    const std::vector<float> m = masters(resumed), v = moments(resumed);
    // The rows both have are read (the vocabulary's, and padding rows the checkpoint has: their
    // weights decayed from their init, their moments zero); the rows it lacks are zero.
    const int64_t both = std::min<int64_t>(256, p.model.padded_vocab_size);
    for (const std::string name : {"embedding.word.weight", "lm_head.weight"}) {
      CAPTURE(name);
      const core::ParamSpec& now = resumed.params().layout().get(name);
      const core::ParamSpec& was = saved_layout.get(name);
      CHECK(now.global_shape[0] == p.model.padded_vocab_size);
      CHECK(rows_of(now, m, both) == rows_of(was, saved_master, both));
      CHECK(rows_of(now, v, both) == rows_of(was, saved_moment, both));
      CHECK(zero_past(now, m, both));
      CHECK(zero_past(was, saved_moment, 250));  // padding rows never get a gradient
    }
    // Every other tensor is read as saved.
    const core::ParamSpec& q = resumed.params().layout().get("layers.1.attention.q.weight");
    CHECK(rows_of(q, m, q.global_shape[0]) == rows_of(saved_layout.get(q.name), saved_master, q.global_shape[0]));
    // The padded columns of the logits are masked, so the run goes on as the uninterrupted one:
    // bitwise on x86-64 OpenBLAS (one thread; measured 0 difference at both paddings). The bound
    // leaves room for a BLAS that blocks the classifier's sums over the vocabulary differently
    // for another padded width (fp32 reassociation, ~1e-7 relative per sum, over 4 steps).
    const std::vector<double> tail = run_steps(resumed, 4);
    for (size_t i = 0; i < tail.size(); ++i) CHECK_MESSAGE(tail[i] == doctest::Approx(all[4 + i]).epsilon(1e-6), i);
  }

  // Another vocabulary (not another padding) is refused, naming both sizes.
  plan::Plan other = saved_plan;
  other.model.vocab_size = 300;
  test::fill_derived(other);
  core::Trainer wrong(other, *be);
  CHECK_THROWS_WITH_AS(core::load_checkpoint(wrong, saved, core::LoadMode::weights_only),
                       doctest::Contains("embedding.word.weight has 256 rows there (vocab_size 250), 384 here "
                                         "(model.vocab_size 300): another vocabulary, not another padding"),
                       std::runtime_error);
}

TEST_CASE("a checkpoint of another model shape is refused, naming the tensors that differ") {
  plan::Plan small = test::gpt_tiny_plan();
  small.trainer.max_steps = 4;
  auto be = test::cpu_backend();
  TempDir dir;
  core::Trainer t(small, *be);
  const std::string saved = train_and_save(t, 1, dir.path.string());

  plan::Plan wide = small;
  wide.model.hidden_size = 128;
  wide.model.ffn_hidden_size = 0;
  test::fill_derived(wide);
  core::Trainer other(wide, *be);
  try {
    core::load_checkpoint(other, saved, core::LoadMode::resume);
    FAIL("a checkpoint of another shape loaded");
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find("does not fit this model") != std::string::npos);
    CHECK(m.find("layers.0.mlp.fc1.weight is [256,64] there, [512,128] here") != std::string::npos);
    CHECK(m.find("(30 tensors)") != std::string::npos);
    CHECK(m.find("and 24 more") != std::string::npos);
    CHECK(m.find("plan.toml") != std::string::npos);
  }

  // A checkpoint with tensors this model lacks (its biases) is refused too: loading it would drop
  // them without a word, in a resume and in a fine-tune start alike.
  plan::Plan no_bias = small;
  no_bias.model.bias = false;
  test::fill_derived(no_bias);
  for (const core::LoadMode mode : {core::LoadMode::resume, core::LoadMode::weights_only}) {
    core::Trainer nb(no_bias, *be);
    try {
      core::load_checkpoint(nb, saved, mode);
      FAIL("a checkpoint with biases loaded into a model without them");
    } catch (const std::runtime_error& e) {
      const std::string m = e.what();
      INFO(m);
      CHECK(m.find("does not fit this model") != std::string::npos);
      CHECK(m.find("final_norm.bias has no place in this model") != std::string::npos);
    }
  }

  plan::Plan bigger_batch = small;
  bigger_batch.trainer.global_batch_size = 16;
  test::fill_derived(bigger_batch);
  core::Trainer b(bigger_batch, *be);
  try {
    core::load_checkpoint(b, saved, core::LoadMode::resume);
    FAIL("a checkpoint of another global batch resumed");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("global_batch_size=8, this plan has 16") != std::string::npos);
  }
}

TEST_SUITE_END();
