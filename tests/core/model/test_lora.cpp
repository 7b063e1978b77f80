// LoRA adapters (peft.kind=lora) on the CPU reference: the layout holds a frozen base with no
// gradient, master or Adam state; step 0 is the base model; A and B get the gradients finite
// differences give; training changes only the adapters; merging W + s·B·A into a plain model gives
// the adapter model's losses; the memory estimate counts what the ParamStore allocates.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "family/registry.hpp"
#include "family/tensor_table.hpp"
#include "core/train/trainer.hpp"
#include "plan/lora.hpp"
#include "plan/memory_estimate.hpp"
#include "plan/model_size.hpp"
#include "tests/core/core_test_util.hpp"

TEST_SUITE_BEGIN("core/model");

using namespace recipe;
using recipe::core::ParamSpec;
using recipe::core::Trainer;

namespace {

// A small model (as the finite-difference checks use) with LoRA on `targets`.
plan::Plan lora_plan(bool llama, std::vector<std::string> targets = {"all-linear"}, int rank = 4) {
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
  p.trainer.global_batch_size = 2;
  test::fill_derived(p);
  p.model.ffn_hidden_size = llama ? 48 : 128;
  p.mode = plan::Mode::finetune;
  p.peft.kind = plan::PeftKind::lora;
  p.peft.rank = rank;
  p.peft.alpha = 2.0 * rank;
  p.peft.target_modules = std::move(targets);
  p.optimizer.lr = 1e-2;
  return p;
}

plan::Plan without_lora(plan::Plan p) {
  p.peft.kind = plan::PeftKind::none;
  p.mode = plan::Mode::pretrain;
  return p;
}

std::map<std::string, std::vector<float>> weights_by_name(Trainer& tr) {
  std::map<std::string, std::vector<float>> out;
  auto& store = tr.params();
  for (const ParamSpec& p : store.layout().params) out[p.name] = test::to_host(tr.backend(), store.weight(p));
  return out;
}

// Moves every zero-initialized trainable tensor (B) off zero, so A's gradient is not zero.
void jitter_adapters(Trainer& tr) {
  auto& store = tr.params();
  auto& be = tr.backend();
  for (const ParamSpec& p : store.layout().params) {
    if (!p.trainable) continue;
    std::vector<float> v = test::to_host(be, store.master(p));
    const uint64_t key = core::rng::stream_key(77, p.name);
    for (size_t i = 0; i < v.size(); ++i) v[i] += float(0.1 * core::rng::normal(key, i));
    be.from_host(store.master(p), v.data());
  }
  store.sync_compute();
}

}  // namespace

TEST_CASE("lora: the layout holds adapters as the trainable prefix and the base as a frozen region") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    const plan::Plan plan = lora_plan(llama);
    auto be = test::cpu_backend();
    Trainer tr(plan, *be, nullptr, test::random_tokens(plan), nullptr);
    const core::ParamLayout& L = tr.params().layout();
    CHECK(L.frozen_numel > 0);
    CHECK(L.trainable_numel == L.frozen_begin);
    int64_t adapters = 0;
    for (const ParamSpec& p : L.params) {
      CAPTURE(p.name);
      CHECK(p.trainable == core::is_adapter(*p.decl));
      if (p.trainable) {
        CHECK(p.offset + p.numel <= L.trainable_numel);
        adapters += p.numel;
        CHECK(tr.params().grad(p).defined());
      } else {
        CHECK(p.offset >= L.frozen_begin);
        CHECK_FALSE(tr.params().grad(p).defined());
      }
    }
    CHECK(adapters == plan::lora_trainable_params(plan));
    // A [r, in] and B [out, r] of each adapted linear, all four linears.
    const char* a = llama ? "layers.1.mlp.gate_up.lora_a.weight" : "layers.1.mlp.fc1.lora_a.weight";
    REQUIRE(L.find(a));
    CHECK(L.get(a).global_shape == std::vector<int64_t>{4, 32});
    CHECK(L.get("layers.0.attention.q.lora_b.weight").global_shape == std::vector<int64_t>{32, 4});
    // Gradients, master and Adam state cover only the adapters.
    CHECK(tr.params().grads().numel() == L.trainable_numel);
    CHECK(tr.optimizer().state("optimizer.exp_avg.").data.numel() == L.trainable_numel);
    CHECK(tr.params().compute().numel() == L.total_numel);
  }
}

TEST_CASE("lora: step 0 is the base model (B = 0), and the base weights equal the plain model's") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    const plan::Plan plan = lora_plan(llama);
    auto be = test::cpu_backend();
    Trainer lora(plan, *be, nullptr, test::random_tokens(plan), nullptr);
    Trainer base(without_lora(plan), *be, nullptr, test::random_tokens(plan), nullptr);
    const auto lw = weights_by_name(lora), bw = weights_by_name(base);
    for (const auto& entry : bw) {
      const std::string& name = entry.first;
      CAPTURE(name);
      REQUIRE(lw.count(name));
      CHECK(lw.at(name) == entry.second);
    }
    for (int s = 0; s < 2; ++s) CHECK(lora.compute_loss(s) == base.compute_loss(s));
  }
}

TEST_CASE("lora: gradients of A and B match finite differences; the base gets none") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    const plan::Plan plan = lora_plan(llama);
    auto be = test::cpu_backend();
    Trainer tr(plan, *be, nullptr, test::random_tokens(plan), nullptr);
    jitter_adapters(tr);
    auto& store = tr.params();
    tr.compute_gradients(0);
    const std::vector<float> grads = test::to_host(*be, store.grads());
    std::vector<float> master = test::to_host(*be, store.master());
    const double eps = 3e-3;
    int checked = 0, failed = 0;
    for (const ParamSpec& p : store.layout().params) {
      if (!p.trainable) continue;
      // The three entries with the largest analytic gradient.
      std::vector<int64_t> idx(size_t(p.numel));
      for (int64_t i = 0; i < p.numel; ++i) idx[size_t(i)] = i;
      std::partial_sort(idx.begin(), idx.begin() + 3, idx.end(), [&](int64_t a, int64_t b) {
        return std::fabs(grads[size_t(p.offset + a)]) > std::fabs(grads[size_t(p.offset + b)]);
      });
      for (int k = 0; k < 3; ++k) {
        const size_t at = size_t(p.offset + idx[size_t(k)]);
        const float w0 = master[at];
        auto loss_at = [&](float w) {
          master[at] = w;
          be->from_host(store.master_span(int64_t(at), 1), &master[at]);
          store.sync_compute();
          return tr.compute_loss(0);
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

TEST_CASE("lora: training changes the adapters only; every base tensor stays bit-identical") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    plan::Plan plan = lora_plan(llama, {"qkv", "fc2"});
    plan.trainer.max_steps = 5;
    plan.schedule.decay_steps = 5;
    auto be = test::cpu_backend();
    Trainer tr(plan, *be, nullptr, test::random_tokens(plan, 7, 2), nullptr);
    const auto before = weights_by_name(tr);
    double first = 0, last = 0;
    for (int s = 0; s < 5; ++s) {
      const auto r = tr.step();
      (s == 0 ? first : last) = r.loss;
    }
    CHECK(last < first);  // two samples repeated: the adapters fit them
    const auto after = weights_by_name(tr);
    int changed = 0;
    for (const ParamSpec& p : tr.params().layout().params) {
      CAPTURE(p.name);
      const auto &b = before.at(p.name), &a = after.at(p.name);
      if (p.trainable) {
        changed += a != b;
      } else {
        REQUIRE(a.size() == b.size());
        CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
      }
    }
    CHECK(changed > 0);
  }
}

TEST_CASE("lora: merged weights W + s·B·A give the adapter model's losses") {
  for (bool llama : {false, true}) {
    for (bool rslora : {false, true}) {
      CAPTURE(llama);
      CAPTURE(rslora);
      plan::Plan plan = lora_plan(llama);
      plan.peft.use_rslora = rslora;
      auto be = test::cpu_backend();
      Trainer lora(plan, *be, nullptr, test::random_tokens(plan), nullptr);
      jitter_adapters(lora);
      Trainer base(without_lora(plan), *be, nullptr, test::random_tokens(plan), nullptr);
      const float s = float(plan::lora_scale(plan.peft));
      CHECK(s == doctest::Approx(rslora ? 8.0 / 2.0 : 2.0));
      const core::ParamLayout& L = lora.params().layout();
      auto host_pack = [&](const std::vector<const ParamSpec*>& ps) {
        std::vector<float> v;
        for (const ParamSpec* p : ps) {
          const auto t = test::to_host(*be, lora.params().weight(*p));
          v.insert(v.end(), t.begin(), t.end());
        }
        return v;
      };
      for (int l = 0; l < plan.model.num_layers; ++l)
        for (core::Role role : {core::Role::qkv, core::Role::attention_out, core::Role::mlp_in, core::Role::mlp_out}) {
          const auto ws = L.bound(role, core::Part::weight, l);
          const auto as = L.bound(role, core::Part::lora_a, l);
          const auto bs = L.bound(role, core::Part::lora_b, l);
          REQUIRE(as.size() == 1);
          std::vector<float> w = host_pack(ws);
          const std::vector<float> a = host_pack(as), b = host_pack(bs);
          const int64_t r = as[0]->local_shape[0], in = as[0]->local_shape[1], out = int64_t(b.size()) / r;
          REQUIRE(int64_t(w.size()) == out * in);
          for (int64_t o = 0; o < out; ++o)
            for (int64_t i = 0; i < in; ++i) {
              double acc = 0;
              for (int64_t k = 0; k < r; ++k) acc += double(b[size_t(o * r + k)]) * a[size_t(k * in + i)];
              w[size_t(o * in + i)] += float(s * acc);
            }
          // Write the merged pack into the plain model, member by member.
          int64_t at = 0;
          for (const ParamSpec* p : ws) {
            const ParamSpec& q = base.params().layout().get(p->name);
            be->from_host(base.params().master(q), w.data() + at);
            at += p->numel;
          }
        }
      base.params().sync_compute();
      for (int step = 0; step < 3; ++step) {
        const double la = lora.compute_loss(step), lb = base.compute_loss(step);
        CHECK(std::fabs(la - lb) <= 1e-5 * std::fabs(lb));
      }
    }
  }
}

TEST_CASE("lora: the memory estimate counts what the ParamStore allocates") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    plan::Plan plan = llama ? test::llama_tiny_plan() : test::gpt_tiny_plan();
    plan.model.hidden_size = 256;
    plan.model.num_attention_heads = 4;
    plan.model.head_dim = 0;
    plan.model.ffn_hidden_size = 0;
    plan.model.num_layers = 4;
    test::fill_derived(plan);
    plan.mode = plan::Mode::finetune;
    plan.peft.kind = plan::PeftKind::lora;
    plan.peft.rank = 16;
    plan.peft.target_modules = {"all-linear"};
    auto be = test::cpu_backend();
    Trainer tr(plan, *be, nullptr, test::random_tokens(plan), nullptr);
    const plan::MemoryEstimate e = plan::estimate_memory(plan);
    const double estimated = double(e.weights + e.gradients + e.optimizer);
    const double allocated = double(tr.params().bytes() + tr.optimizer().state_bytes());
    CHECK(std::fabs(estimated - allocated) <= 0.03 * allocated);
    // Gradients and Adam state: the adapters only (alignment gaps aside).
    const core::ParamLayout& L = tr.params().layout();
    CHECK(e.gradients == 4 * plan::lora_trainable_params(plan));
    CHECK(L.trainable_numel >= plan::lora_trainable_params(plan));
    CHECK(L.trainable_numel <= plan::lora_trainable_params(plan) + 64 * int64_t(L.params.size()));
  }
}

TEST_CASE("lora: target names — engine, Hugging Face, all-linear — and the fused groups") {
  using plan::lora_targets;
  const core::Family &gpt = core::gpt_family(), &llama = core::llama_family();
  CHECK(lora_targets(gpt, {"qkv"}).mask == core::lora_qkv);
  CHECK(lora_targets(llama, {"q_proj", "k_proj", "v_proj"}).mask == core::lora_qkv);
  CHECK(lora_targets(gpt, {"c_attn", "c_fc"}).mask == (core::lora_qkv | core::lora_mlp_in));
  CHECK(lora_targets(gpt, {"c_proj"}).mask == (core::lora_proj | core::lora_mlp_out));
  CHECK(lora_targets(llama, {"o_proj", "gate_proj", "up_proj", "down_proj"}).mask ==
        (core::lora_proj | core::lora_mlp_in | core::lora_mlp_out));
  CHECK(lora_targets(gpt, {"all-linear"}).mask ==
        (core::lora_qkv | core::lora_proj | core::lora_mlp_in | core::lora_mlp_out));
  const auto partial = lora_targets(llama, {"q_proj", "v_proj"});
  CHECK(partial.mask == 0);
  REQUIRE(partial.problems.size() == 1);
  CHECK(partial.problems[0].find("missing k_proj") != std::string::npos);
  CHECK(lora_targets(gpt, {"mlp"}).problems.size() == 1);
}

TEST_SUITE_END();
