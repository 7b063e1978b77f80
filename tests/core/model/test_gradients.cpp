// Whole-model gradient checks: analytic gradients against central finite differences of the loss,
// recompute=full against recompute=none, and gradient accumulation over micro-batches.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "core/train/trainer.hpp"
#include "tests/core/core_test_util.hpp"

TEST_SUITE_BEGIN("core/model");

using namespace recipe;
using recipe::core::ParamSpec;
using recipe::core::Trainer;

namespace {

// Small enough for hundreds of forward passes: 2 layers, C=32, 4 heads, T=16, B=2, vocab 60
// padded to 64 (so padding columns are exercised).
plan::Plan fd_plan(bool llama) {
  plan::Plan p = llama ? test::llama_tiny_plan() : test::gpt_tiny_plan();
  auto& m = p.model;
  m.hidden_size = 32;
  m.head_dim = 0;
  m.ffn_hidden_size = llama ? 48 : 0;
  m.vocab_size = 60;
  m.make_vocab_size_divisible_by = 16;
  m.seq_length = 16;
  m.max_position_embeddings = 0;
  m.init_std = 0.1;  // larger weights: non-trivial attention patterns and larger gradients
  p.trainer.micro_batch_size = 2;
  p.trainer.global_batch_size = 2;
  test::fill_derived(p);
  p.model.ffn_hidden_size = llama ? 48 : 128;
  return p;
}

// Qwen3's block on the same small shape: qk-norm, and a head_dim of its own (12, not 32/4 = 8).
plan::Plan fd_qwen3_plan() {
  plan::Plan p = fd_plan(true);
  p.model.arch = plan::Arch::qwen3;
  p.model.qk_norm = true;
  p.model.head_dim = 12;
  return p;
}

// Biases start at 0 and norm weights at 1; move them off those values so their gradients are
// checked at a generic point.
void jitter_norms_and_biases(Trainer& tr) {
  auto& store = tr.params();
  auto& be = tr.backend();
  for (const ParamSpec& p : store.layout().params) {
    if (p.init != core::InitKind::zeros && p.init != core::InitKind::ones) continue;
    std::vector<float> v = test::to_host(be, store.master(p));
    const uint64_t key = core::rng::stream_key(99, p.name);
    for (size_t i = 0; i < v.size(); ++i) v[i] += float(0.2 * core::rng::normal(key, i));
    be.from_host(store.master(p), v.data());
  }
  store.sync_compute();
}

struct CheckStats {
  int checked = 0, failed = 0;
};

// For every parameter: the entries with the largest analytic gradient (plus one fixed entry) are
// compared with (L(w+ε) − L(w−ε)) / 2ε.
CheckStats finite_difference_check(Trainer& tr, int per_param) {
  auto& store = tr.params();
  auto& be = tr.backend();
  tr.compute_gradients(0);
  const std::vector<float> grads = test::to_host(be, store.grads());
  std::vector<float> master = test::to_host(be, store.master());
  CheckStats st;
  const double eps = 1e-2;
  for (const ParamSpec& p : store.layout().params) {
    std::vector<int64_t> idx(size_t(p.numel));
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + std::min<int64_t>(per_param, p.numel), idx.end(),
                      [&](int64_t a, int64_t b) {
                        return std::fabs(grads[size_t(p.offset + a)]) > std::fabs(grads[size_t(p.offset + b)]);
                      });
    idx.resize(size_t(std::min<int64_t>(per_param, p.numel)));
    int meaningful = 0;
    for (int64_t i : idx) {
      const size_t at = size_t(p.offset + i);
      const float w0 = master[at];
      auto loss_at = [&](float w) {
        master[at] = w;
        be.from_host(store.master_span(p.offset + i, 1), &master[at]);
        store.sync_compute();
        return tr.compute_loss(0);
      };
      const double lp = loss_at(w0 + float(eps)), lm = loss_at(w0 - float(eps));
      loss_at(w0);
      const double fd = (lp - lm) / (2 * eps);
      const double an = grads[at];
      const double scale = std::max(std::fabs(fd), std::fabs(an));
      if (scale < 1e-4) continue;  // below the finite-difference noise of an f32 loss
      ++meaningful;
      ++st.checked;
      const bool ok = std::fabs(fd - an) <= 2e-2 * scale + 2e-5;
      if (!ok) {
        ++st.failed;
        MESSAGE(p.name << "[" << i << "]: analytic " << an << " vs finite difference " << fd);
      }
    }
    // Without RoPE a key bias adds q·b_k to every score of a query row: softmax ignores it, so its
    // true gradient is 0 (and what the check above saw was noise). RoPE rotates it per position.
    if (tr.shape().arch.learned_positions && p.name.ends_with("attention.k.bias")) {
      for (int64_t i = 0; i < p.numel; ++i) CHECK(std::fabs(grads[size_t(p.offset + i)]) < 1e-6);
      continue;
    }
    if (meaningful == 0) MESSAGE(p.name << ": no entry with a gradient above 1e-4");
    CHECK_MESSAGE(meaningful > 0, p.name);
  }
  return st;
}

std::vector<float> gradients_of(const plan::Plan& plan) {
  auto be = test::cpu_backend();
  Trainer tr(plan, *be, nullptr, test::random_tokens(plan), nullptr);
  tr.compute_gradients(0);
  return test::to_host(*be, tr.params().grads());
}

double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(a[i]) * a[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace

TEST_CASE("gradients: GPT (layernorm, biases, learned positions, tied) match finite differences") {
  plan::Plan plan = fd_plan(false);
  auto be = test::cpu_backend();
  Trainer tr(plan, *be, nullptr, test::random_tokens(plan), nullptr);
  REQUIRE(tr.params().layout().find("embedding.position.weight"));
  REQUIRE(tr.params().layout().find("layers.1.mlp.fc2.bias"));
  REQUIRE_FALSE(tr.params().layout().find("lm_head.weight"));
  jitter_norms_and_biases(tr);
  CheckStats st = finite_difference_check(tr, 3);
  CHECK(st.checked > 40);
  CHECK(st.failed == 0);
}

TEST_CASE("gradients: Llama (rmsnorm, rope, swiglu, GQA 4/2, untied) match finite differences") {
  plan::Plan plan = fd_plan(true);
  auto be = test::cpu_backend();
  Trainer tr(plan, *be, nullptr, test::random_tokens(plan), nullptr);
  REQUIRE(tr.params().layout().find("lm_head.weight"));
  REQUIRE(tr.params().layout().get("layers.0.attention.k.weight").global_shape[0] == 2 * 8);
  jitter_norms_and_biases(tr);
  CheckStats st = finite_difference_check(tr, 3);
  CHECK(st.checked > 30);
  CHECK(st.failed == 0);
}

TEST_CASE("gradients: Llama-shaped model with biases and layernorm also matches") {
  plan::Plan plan = fd_plan(true);
  plan.model.bias = true;
  plan.model.norm = plan::Norm::layernorm;
  auto be = test::cpu_backend();
  Trainer tr(plan, *be, nullptr, test::random_tokens(plan), nullptr);
  REQUIRE(tr.params().layout().find("layers.0.mlp.gate.bias"));
  jitter_norms_and_biases(tr);
  CheckStats st = finite_difference_check(tr, 2);
  CHECK(st.failed == 0);
}

TEST_CASE("gradients: Qwen3 (qk-norm before RoPE, head_dim 12 with hidden 32 / 4 heads) match finite differences") {
  plan::Plan plan = fd_qwen3_plan();
  auto be = test::cpu_backend();
  Trainer tr(plan, *be, nullptr, test::random_tokens(plan), nullptr);
  REQUIRE(tr.params().layout().get("layers.1.attention.q_norm.weight").global_shape == std::vector<int64_t>{12});
  REQUIRE(tr.params().layout().get("layers.0.attention.k.weight").global_shape == std::vector<int64_t>{2 * 12, 32});
  REQUIRE(tr.params().layout().get("layers.0.attention.proj.weight").global_shape == std::vector<int64_t>{32, 4 * 12});
  jitter_norms_and_biases(tr);  // q_norm and k_norm start at 1 too
  CheckStats st = finite_difference_check(tr, 3);
  CHECK(st.checked > 30);
  CHECK(st.failed == 0);
}

TEST_CASE("gradients: Qwen3 with qk-norm, every recompute level gives recompute=none's gradients bitwise") {
  plan::Plan plan = fd_qwen3_plan();
  plan.model.num_layers = 3;
  const std::vector<float> none = gradients_of(plan);
  for (plan::Recompute level : {plan::Recompute::gelu, plan::Recompute::norm, plan::Recompute::full}) {
    CAPTURE(int(level));
    plan.trainer.recompute = level;
    const std::vector<float> g = gradients_of(plan);
    REQUIRE(g.size() == none.size());
    CHECK(std::memcmp(none.data(), g.data(), none.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("gradients: recompute=full gives the same gradients as recompute=none") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    plan::Plan plan = fd_plan(llama);
    plan.model.num_layers = 3;
    const std::vector<float> none = gradients_of(plan);
    plan.trainer.recompute = plan::Recompute::full;
    const std::vector<float> full = gradients_of(plan);
    REQUIRE(none.size() == full.size());
    CHECK(std::memcmp(none.data(), full.data(), none.size() * sizeof(float)) == 0);
    CHECK(rel_diff(none, full) == 0.0);
  }
}

TEST_CASE("gradients: global batch 8 as 1x8 and 4x2 micro-batches accumulate the same gradient") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    plan::Plan plan = fd_plan(llama);
    plan.trainer.micro_batch_size = 8;
    plan.trainer.global_batch_size = 8;
    test::fill_derived(plan);
    const std::vector<float> one = gradients_of(plan);
    plan.trainer.micro_batch_size = 2;
    test::fill_derived(plan);
    REQUIRE(plan.trainer.num_micro_batches == 4);
    const std::vector<float> four = gradients_of(plan);
    CHECK(rel_diff(one, four) < 1e-5);
    CHECK(std::sqrt(std::inner_product(one.begin(), one.end(), one.begin(), 0.0)) > 1e-3);
  }
}

TEST_CASE("init: the first loss on random tokens is close to ln(vocab)") {
  for (bool llama : {false, true})
    for (int vocab : {256, 512}) {
      CAPTURE(llama);
      CAPTURE(vocab);
      plan::Plan plan = llama ? test::llama_tiny_plan() : test::gpt_tiny_plan();
      plan.model.vocab_size = vocab;
      test::fill_derived(plan);
      auto be = test::cpu_backend();
      Trainer tr(plan, *be, nullptr, test::random_tokens(plan, 11), nullptr);
      const double loss = tr.compute_loss(0);
      CHECK(std::fabs(loss - std::log(double(vocab))) < 0.1);
    }
}

TEST_SUITE_END();
