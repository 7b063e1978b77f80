// Helpers for the core tests: hand-built plans (with the derived fields the resolver would fill),
// a deterministic in-test token source, and host copies of device tensors.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/data/sample_source.hpp"
#include "core/model/param_store.hpp"
#include "core/model/rng.hpp"
#include "plan/memory_estimate.hpp"
#include "plan/model_size.hpp"
#include "plan/plan.hpp"
#include "kernels/ops.hpp"

namespace recipe::test {

// What dsl's resolver derives, for a plan built field by field.
inline void fill_derived(plan::Plan& p) {
  auto& m = p.model;
  if (m.num_kv_heads == 0) m.num_kv_heads = m.num_attention_heads;
  if (m.head_dim == 0) m.head_dim = m.hidden_size / m.num_attention_heads;
  if (m.ffn_hidden_size == 0)
    m.ffn_hidden_size =
        m.activation == plan::Activation::gelu ? 4 * m.hidden_size : (2 * 4 * m.hidden_size / 3 + 255) / 256 * 256;
  if (m.max_position_embeddings == 0) m.max_position_embeddings = m.seq_length;
  const int mult = m.make_vocab_size_divisible_by * p.parallelism.tp;
  m.padded_vocab_size = (m.vocab_size + mult - 1) / mult * mult;
  auto& par = p.parallelism;
  if (par.dp == 0) par.dp = 1;
  par.world_size = par.tp * par.pp * par.cp * par.dp;
  auto& t = p.trainer;
  if (t.global_batch_size == 0) t.global_batch_size = t.micro_batch_size * par.dp;
  t.num_micro_batches = t.global_batch_size / (t.micro_batch_size * par.dp);
  t.tokens_per_step = int64_t(t.global_batch_size) * m.seq_length;
  // As dsl/resolve_derive.cpp: validation reads eval_iters global batches unless eval_samples says.
  if (t.eval_samples == 0) t.eval_samples = t.eval_iters * t.global_batch_size;
  t.eval_micro_batches = static_cast<int>(t.eval_samples / (int64_t(t.micro_batch_size) * par.dp));
  if (p.schedule.decay_steps == 0) p.schedule.decay_steps = t.max_steps;
  auto& d = p.data;  // data.path is a blend of one; weights sum to 1
  if (d.blend.empty() && !d.path.empty()) d.blend = {{1.0, d.path}};
  double weights = 0;
  for (const auto& entry : d.blend) weights += entry.first;
  for (auto& entry : d.blend) entry.first /= weights;
  m.num_params = plan::count_params(m, m.padded_vocab_size);
  m.flops_per_token = plan::training_flops_per_token(m);
  par.rank_order = plan::kRankOrder;
  par.stage_num_layers = plan::stage_layer_counts(p);
  p.kernels.workspace_bytes = plan::cuda_workspace_bytes(p);
  t.classifier_chunk_rows = plan::classifier_chunk_rows(p);
}

// gpt_tiny: 2 layers, hidden 64, 4 heads, vocab 256, seq 64, micro 8 = global 8, lr 1e-3 with
// 10 warmup steps and cosine decay to 1e-4, no weight decay, fp32, mock fixed batch, seed 1234.
inline plan::Plan gpt_tiny_plan() {
  plan::Plan p;
  p.source = "test:gpt_tiny";
  auto& m = p.model;
  m.arch = plan::Arch::gpt;
  m.num_layers = 2;
  m.hidden_size = 64;
  m.num_attention_heads = 4;
  m.vocab_size = 256;
  m.seq_length = 64;
  m.norm = plan::Norm::layernorm;
  m.activation = plan::Activation::gelu;
  m.position_embedding = plan::PositionEmbedding::learned;
  m.tie_embeddings = true;
  m.bias = true;
  p.trainer.max_steps = 200;
  p.trainer.micro_batch_size = 8;
  p.trainer.global_batch_size = 8;
  p.trainer.device = plan::Device::cpu;
  p.trainer.precision = plan::Precision::fp32;
  p.trainer.seed = 1234;
  p.trainer.log_interval = 10;
  p.trainer.cpu_threads = 1;  // tiny GEMMs: threads only add overhead (and CI has 2 shared cores)
  p.optimizer.lr = 1e-3;
  p.optimizer.min_lr = 1e-4;
  p.optimizer.weight_decay = 0.0;
  p.schedule.warmup_steps = 10;
  p.schedule.decay_style = plan::DecayStyle::cosine;
  p.data.kind = plan::DataKind::mock;
  p.data.fixed_batch = true;
  p.data.seed = 1234;
  fill_derived(p);
  return p;
}

// llama_tiny: RMSNorm, RoPE, SwiGLU, GQA (4 query heads, 2 kv heads), untied, no biases.
inline plan::Plan llama_tiny_plan() {
  plan::Plan p = gpt_tiny_plan();
  p.source = "test:llama_tiny";
  auto& m = p.model;
  m = plan::ModelConfig{};
  m.arch = plan::Arch::llama;
  m.num_layers = 2;
  m.hidden_size = 64;
  m.num_attention_heads = 4;
  m.num_kv_heads = 2;
  m.ffn_hidden_size = 192;
  m.vocab_size = 256;
  m.seq_length = 64;
  m.norm = plan::Norm::rmsnorm;
  m.activation = plan::Activation::swiglu;
  m.position_embedding = plan::PositionEmbedding::rope;
  m.tie_embeddings = false;
  m.bias = false;
  fill_derived(p);
  return p;
}

// Uniform random tokens, a pure function of (seed, sample, position); period > 0 repeats samples.
class RandomTokens : public data::SampleSource {
 public:
  RandomTokens(int seq, int vocab, uint64_t seed, int64_t period = 0)
      : seq_(seq), vocab_(vocab), seed_(seed), period_(period) {}
  int seq_plus_one() const override { return seq_ + 1; }
  int64_t size() const override { return INT64_MAX; }
  void sample(int64_t idx, int32_t* out) const override {
    if (period_ > 0) idx %= period_;
    const uint64_t key = core::rng::splitmix64(seed_ * 1315423911ull + uint64_t(idx));
    for (int t = 0; t <= seq_; ++t) out[t] = int32_t(core::rng::bits(key, uint64_t(t)) % uint64_t(vocab_));
  }

 private:
  int seq_, vocab_;
  uint64_t seed_;
  int64_t period_;
};

inline std::unique_ptr<data::SampleSource> random_tokens(const plan::Plan& p, uint64_t seed = 7, int64_t period = 0) {
  return std::make_unique<RandomTokens>(p.model.seq_length, p.model.vocab_size, seed, period);
}

// The CPU backend with one thread (see gpt_tiny_plan).
inline std::unique_ptr<kernels::Backend> cpu_backend() {
  kernels::BackendOptions o;
  o.cpu_threads = 1;
  return kernels::make_cpu_backend(o);
}

inline std::vector<float> to_host(kernels::Backend& be, kernels::Tensor t) {
  std::vector<float> v(size_t(t.numel()));
  be.to_host(v.data(), t);
  return v;
}

}  // namespace recipe::test
