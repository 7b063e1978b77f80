// Generation end to end on the CPU reference: a tiny GPT and a tiny Llama trained to memorize one
// byte-tokenized text continue its first bytes with exactly the rest of it (greedy, through the KV
// cache); generation stops before a stop id; a seed reproduces a sampled continuation and a tiny
// top_p gives the greedy one; prompts that do not fit are refused.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/data/tokenizer.hpp"
#include "core/generate/generator.hpp"
#include "core/model/model_shape.hpp"
#include "core/train/trainer.hpp"
#include "tests/core/core_test_util.hpp"

TEST_SUITE_BEGIN("core/generate");

using namespace recipe;

namespace {

// The 65 bytes every sample holds (T + 1 for seq 64).
const std::string kText = "Sphinx of black quartz, judge my vow; pack my box with five dozen!";

class FixedText : public data::SampleSource {
 public:
  explicit FixedText(std::vector<int32_t> ids) : ids_(std::move(ids)) {}
  int seq_plus_one() const override { return int(ids_.size()); }
  int64_t size() const override { return INT64_MAX; }
  void sample(int64_t, int32_t* out) const override { std::copy(ids_.begin(), ids_.end(), out); }

 private:
  std::vector<int32_t> ids_;
};

std::vector<int32_t> text_ids() {
  std::vector<int32_t> ids = data::make_byte_tokenizer()->encode(kText.substr(0, 65));
  REQUIRE(ids.size() == 65);
  return ids;
}

plan::Plan memorize_plan(bool llama) {
  plan::Plan p = llama ? test::llama_tiny_plan() : test::gpt_tiny_plan();
  p.trainer.micro_batch_size = 1;
  p.trainer.global_batch_size = 1;
  p.trainer.max_steps = 300;
  p.optimizer.lr = 3e-3;
  p.optimizer.min_lr = 3e-4;
  p.schedule.decay_steps = 0;
  test::fill_derived(p);
  return p;
}

// A trainer that has memorized kText (its final loss checked), and a decoder over its weights.
struct Memorized {
  plan::Plan plan;
  std::unique_ptr<kernels::Backend> be = test::cpu_backend();
  std::unique_ptr<core::Trainer> trainer;
  std::unique_ptr<core::Model> model;
  std::unique_ptr<core::IncrementalDecoder> decoder;

  explicit Memorized(bool llama) : plan(memorize_plan(llama)) {
    trainer = std::make_unique<core::Trainer>(plan, *be, nullptr, std::make_unique<FixedText>(text_ids()), nullptr);
    double loss = 0;
    for (int s = 0; s < plan.trainer.max_steps; ++s) loss = trainer->step().loss;
    INFO("final loss " << loss);
    REQUIRE(loss < 0.05);
    model = std::make_unique<core::Model>(core::generation_shape(plan, 64), 1, core::Recompute::full, *be,
                                          trainer->params());
    decoder = std::make_unique<core::IncrementalDecoder>(*model);
  }
};

void check_memorized(bool llama) {
  Memorized m(llama);
  const std::vector<int32_t> ids = text_ids();
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 8);
  core::GenerateOptions o;
  o.max_new_tokens = 56;
  std::vector<int32_t> streamed;
  const core::GenerateResult r = core::generate(*m.decoder, prompt, o, [&](int32_t id) { streamed.push_back(id); });
  const auto tok = data::make_byte_tokenizer();
  CHECK(tok->decode(r.tokens) == kText.substr(8, 56));
  CHECK(streamed == r.tokens);
  CHECK_FALSE(r.stopped);
  CHECK(r.prompt_tokens == 8);
  CHECK(r.decode_steps == 55);

  // A stop id ends the generation before it is produced.
  o.stop_ids = {ids[20]};
  const core::GenerateResult stopped = core::generate(*m.decoder, prompt, o);
  CHECK(stopped.stopped);
  CHECK(tok->decode(stopped.tokens) == kText.substr(8, 12));

  // Sampling: a seed reproduces its continuation; a tiny top_p is the greedy one.
  o.stop_ids.clear();
  o.sampling = {.temperature = 3.0, .seed = 7};
  const auto a = core::generate(*m.decoder, prompt, o).tokens, b = core::generate(*m.decoder, prompt, o).tokens;
  CHECK(a == b);
  o.sampling.seed = 8;
  CHECK(core::generate(*m.decoder, prompt, o).tokens != a);
  o.sampling = {.temperature = 1.0, .top_p = 1e-6, .seed = 9};
  CHECK(core::generate(*m.decoder, prompt, o).tokens == r.tokens);

  // Prompt + new tokens beyond the capacity, an empty prompt: refused.
  o.max_new_tokens = 57;
  CHECK_THROWS_WITH_AS(core::generate(*m.decoder, prompt, o), doctest::Contains("exceed"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(core::generate(*m.decoder, std::vector<int32_t>{}, o), doctest::Contains("no tokens"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(core::generation_shape(m.plan, m.plan.model.max_position_embeddings + 1),
                       doctest::Contains("model.max_position_embeddings"), std::invalid_argument);
}

}  // namespace

TEST_CASE("a GPT trained to memorize a text continues its first bytes with the rest (greedy, KV cache)") {
  check_memorized(false);
}

TEST_CASE("a Llama (RoPE, GQA) trained to memorize a text continues its first bytes with the rest") {
  check_memorized(true);
}

TEST_SUITE_END();
