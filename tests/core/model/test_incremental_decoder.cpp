// The decode path (IncrementalDecoder) against the training forward on the CPU reference: feeding
// a sequence through the KV cache in chunks (a prefill, then one token at a time) gives, at every
// position, the log-softmax the full-sequence Model::forward gives (read through its per-token
// losses with every vocabulary id as the target), for GPT (learned positions, tied), Llama (RoPE,
// GQA 4/2, untied) and Qwen3 (Llama's with qk-norm and its own head_dim), without and with LoRA adapters whose B is non-zero (so the adapters really
// apply, unmerged, through the same linear seam). Also: reset() starts over, and tokens past the
// capacity or outside the vocabulary are refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "core/model/incremental_decoder.hpp"
#include "core/model/model_shape.hpp"
#include "core/model/rng.hpp"
#include "core/train/trainer.hpp"
#include "tests/core/core_test_util.hpp"

TEST_SUITE_BEGIN("core/model");

using namespace recipe;

namespace {

// A small model of either family, with LoRA on every linear when `lora`; `qwen3`: the Llama shape
// as Qwen3 (qk-norm, head_dim 12 ≠ hidden 32 / 4 heads).
plan::Plan small_plan(bool llama, bool lora, bool qwen3 = false) {
  plan::Plan p = llama ? test::llama_tiny_plan() : test::gpt_tiny_plan();
  auto& m = p.model;
  m.hidden_size = 32;
  m.head_dim = 0;
  m.ffn_hidden_size = llama ? 48 : 0;
  m.vocab_size = 60;
  m.make_vocab_size_divisible_by = 16;
  m.seq_length = 12;
  m.max_position_embeddings = 0;
  m.init_std = 0.1;
  p.trainer.micro_batch_size = 1;
  p.trainer.global_batch_size = 1;
  if (qwen3) {
    m.arch = plan::Arch::qwen3;
    m.qk_norm = true;
    m.head_dim = 12;
  }
  test::fill_derived(p);
  if (lora) {
    p.mode = plan::Mode::finetune;
    p.peft.kind = plan::PeftKind::lora;
    p.peft.rank = 4;
    p.peft.alpha = 8.0;
    p.peft.target_modules = {"all-linear"};
  }
  return p;
}

// Every trainable tensor moved off its init (LoRA B starts at zero: the adapters would do nothing).
void jitter_trainable(core::Trainer& tr) {
  auto& store = tr.params();
  auto& be = tr.backend();
  for (const core::ParamSpec& p : store.layout().params) {
    if (!p.trainable) continue;
    std::vector<float> v = test::to_host(be, store.master(p));
    const uint64_t key = core::rng::stream_key(91, p.name);
    for (size_t i = 0; i < v.size(); ++i) v[i] += float(0.1 * core::rng::normal(key, i));
    be.from_host(store.master(p), v.data());
  }
  store.sync_compute();
}

std::vector<double> log_softmax(const std::vector<float>& logits) {
  double mx = *std::max_element(logits.begin(), logits.end()), sum = 0;
  for (float x : logits) sum += std::exp(double(x) - mx);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = double(logits[i]) - mx - std::log(sum);
  return out;
}

void check_decoder_matches_forward(bool llama, bool lora, bool qwen3 = false) {
  const plan::Plan p = small_plan(llama, lora, qwen3);
  auto be = test::cpu_backend();
  core::Trainer tr(p, *be, nullptr, test::random_tokens(p), nullptr);
  if (lora || qwen3) jitter_trainable(tr);  // qwen3: q_norm/k_norm off their init of ones
  const core::ModelShape s = core::model_shape(p);
  const int T = s.seq, V = s.arch.vocab;
  core::Model model(s, 1, core::Recompute::none, *be, tr.params());

  std::vector<int32_t> tokens(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) tokens[size_t(t)] = int32_t((7 * t + 3) % V);
  // reference[t][y] = log softmax(logits at t)[y] = −(loss of target y at t), one forward per y.
  std::vector<std::vector<double>> reference(static_cast<size_t>(T), std::vector<double>(static_cast<size_t>(V)));
  std::vector<float> losses(static_cast<size_t>(T));
  void* loss_buf = be->alloc(losses.size() * sizeof(float));
  const kernels::Tensor loss_t(loss_buf, kernels::DType::f32, kernels::Device::cpu, {T});
  for (int y = 0; y < V; ++y) {
    const std::vector<int32_t> targets(size_t(T), y);
    model.load_split_tokens(0, tokens.data(), targets.data());
    model.forward(0, false, loss_t, kernels::Tensor());
    be->to_host(losses.data(), loss_t);
    for (int t = 0; t < T; ++t) reference[size_t(t)][size_t(y)] = -double(losses[size_t(t)]);
  }
  be->free(loss_buf);

  core::IncrementalDecoder dec(model);
  CHECK(dec.capacity() == T);
  for (int pass = 0; pass < 2; ++pass) {  // the second pass after reset(): the cache starts over
    dec.reset();
    const int prefill = pass == 0 ? 5 : 1;
    double worst = 0;
    int t = 0;
    while (t < T) {
      const int n = t == 0 ? prefill : 1;
      const std::vector<double> got = log_softmax(dec.forward(std::span<const int32_t>(tokens.data() + t, size_t(n))));
      t += n;
      CHECK(dec.position() == t);
      for (int y = 0; y < V; ++y)
        worst = std::max(worst, std::fabs(got[size_t(y)] - reference[size_t(t - 1)][size_t(y)]));
    }
    INFO("largest |log p| difference " << worst << " (pass " << pass << ")");
    CHECK(worst < 1e-4);
  }

  const int32_t one = 1, bad = int32_t(V);
  CHECK_THROWS_WITH_AS(dec.forward(std::span<const int32_t>(&one, 1)), doctest::Contains("do not fit the cache"),
                       std::invalid_argument);
  dec.reset();
  CHECK_THROWS_WITH_AS(dec.forward(std::span<const int32_t>(&bad, 1)), doctest::Contains("outside the vocabulary"),
                       std::invalid_argument);
}

}  // namespace

TEST_CASE("decoding with the KV cache gives the full forward's logits at every position: GPT") {
  check_decoder_matches_forward(false, false);
}
TEST_CASE("decoding with the KV cache gives the full forward's logits at every position: Llama, GQA") {
  check_decoder_matches_forward(true, false);
}
TEST_CASE("decoding with the KV cache gives the full forward's logits at every position: Qwen3, qk-norm") {
  check_decoder_matches_forward(true, false, true);
}
TEST_CASE("decoding with the KV cache gives the full forward's logits at every position: Qwen3 + LoRA") {
  check_decoder_matches_forward(true, true, true);
}
TEST_CASE("decoding with the KV cache gives the full forward's logits at every position: GPT + LoRA") {
  check_decoder_matches_forward(false, true);
}
TEST_CASE("decoding with the KV cache gives the full forward's logits at every position: Llama + LoRA") {
  check_decoder_matches_forward(true, true);
}

TEST_SUITE_END();
