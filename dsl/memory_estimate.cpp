#include "dsl/memory_estimate.hpp"

#include <algorithm>
#include <cstdio>

#include "dsl/model_size.hpp"

namespace recipe::dsl {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// cuBLASLt/cuDNN workspaces, NCCL buffers and allocator slack that every rank carries.
constexpr int64_t kFixedWorkspace = 256LL * 1024 * 1024;
// The fused classifier computes logits → loss → dlogits in chunks of this many tokens, so the full
// [tokens × vocab] logits tensor never exists.
constexpr int64_t kLogitsChunkTokens = 2048;

int64_t div_ceil(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : a; }

// Activation bytes one transformer layer keeps for backward per micro-batch, flash-attention form of
// Korthikanti et al. (2022): the 5·a·s/h attention-score term is gone (fused attention keeps no
// score matrix). Their 34·s·b·h for a 4h GELU MLP is 15·s·b·h for attention + norms and
// (3h + 4f)·s·b for the MLP; swiglu keeps three f-wide tensors (gate, up, product) instead of two.
// With sequence parallelism everything is split over TP; without it ~10·s·b·h (norm inputs,
// residual) stays whole on every TP rank. bf16 sizes; fp32 doubles them.
double layer_activation_bytes(const Plan& p, int64_t tokens) {
  const ModelConfig& m = p.model;
  const double h = m.hidden_size, f = m.ffn_hidden_size;
  const double tp = std::max(1, p.parallelism.tp);
  const double mlp = 3.0 * h + (m.activation == "swiglu" ? 6.0 : 4.0) * f;
  const double total = 15.0 * h + mlp;
  double per_token;
  if (p.parallelism.sequence_parallel || tp == 1)
    per_token = total / tp;
  else
    per_token = 10.0 * h + (total - 10.0 * h) / tp;
  const double scale = p.trainer.precision == "fp32" ? 2.0 : 1.0;
  return per_token * static_cast<double>(tokens) * scale;
}

}  // namespace

std::vector<int> stage_layer_counts(const Plan& plan) {
  const int pp = std::max(1, plan.parallelism.pp);
  if (static_cast<int>(plan.parallelism.layers_per_stage.size()) == pp) return plan.parallelism.layers_per_stage;
  std::vector<int> counts(pp, plan.model.num_layers / pp);
  for (int s = 0; s < plan.model.num_layers % pp; ++s) ++counts[s];
  return counts;
}

MemoryEstimate estimate_stage_memory(const Plan& plan, int stage) {
  const ModelConfig& m = plan.model;
  const auto& par = plan.parallelism;
  const int tp = std::max(1, par.tp), pp = std::max(1, par.pp), cp = std::max(1, par.cp);
  const int dp = std::max(1, par.dp);
  const auto counts = stage_layer_counts(plan);
  const int layers = stage >= 0 && stage < static_cast<int>(counts.size()) ? counts[stage] : 0;
  const bool first = stage == 0, last = stage == pp - 1;

  // Parameters this rank holds.
  const LayerParams lp = layer_params(m);
  int64_t params = layers * (div_ceil(lp.sharded, tp) + lp.replicated);
  const int64_t vocab_shard = word_embedding_params(m, m.padded_vocab_size) / tp;
  if (first) params += vocab_shard + position_embedding_params(m);
  // The last stage holds the head; tied with pp > 1 it is a second copy of the embedding (Megatron).
  if (last) params += final_norm_params(m) + ((!m.tie_embeddings || pp > 1) ? vocab_shard : 0);

  const bool bf16 = plan.trainer.precision == "bf16";
  const bool lora = plan.peft.kind == "lora";
  // Trainable parameters on this rank: everything, or only this stage's share of the adapters.
  int64_t trainable = params;
  if (lora) {
    const int64_t adapters = m.num_layers > 0 ? lora_trainable_params(plan) / m.num_layers : 0;
    trainable = layers * div_ceil(adapters, tp);
  }

  MemoryEstimate e;
  // bf16: a bf16 compute copy (2 B) + fp32 master (4 B) per trainable param; frozen LoRA base
  // weights need only the compute copy.
  if (bf16)
    e.weights = (lora ? params * 2 + trainable * 6 : params * 6);
  else
    e.weights = (lora ? params + trainable : params) * 4;
  e.gradients = trainable * 4;
  e.optimizer = trainable * 8;
  if (par.zero1) e.optimizer = div_ceil(e.optimizer, dp);

  // Activations: 1F1B keeps (pp - stage) micro-batches in flight on a stage, at most all of them.
  const int64_t tokens = static_cast<int64_t>(plan.trainer.micro_batch_size) * m.seq_length / cp;
  const int64_t in_flight =
      std::max<int64_t>(1, std::min<int64_t>(pp - stage, std::max(1, plan.trainer.num_micro_batches)));
  const double bytes_per_elem = bf16 ? 2.0 : 4.0;
  double act;
  if (plan.trainer.recompute == "full") {
    // Only each layer's input is kept; one layer's full set exists while it is recomputed.
    const double shard = (par.sequence_parallel ? tp : 1);
    act = layers * bytes_per_elem * tokens * m.hidden_size / shard * in_flight +
          layer_activation_bytes(plan, tokens);
  } else {
    act = layers * layer_activation_bytes(plan, tokens) * in_flight;
  }
  e.activations = static_cast<int64_t>(act);

  e.workspace = kFixedWorkspace;
  if (last) {
    // One chunk of fp32 logits (and their gradient, computed in place) over this rank's vocab shard.
    const int64_t chunk = std::min<int64_t>(kLogitsChunkTokens, tokens);
    e.workspace += chunk * (m.padded_vocab_size / tp) * 4;
  }
  e.total = e.weights + e.gradients + e.optimizer + e.activations + e.workspace;
  return e;
}

MemoryEstimate estimate_memory(const Plan& plan) {
  MemoryEstimate worst;
  for (int s = 0; s < std::max(1, plan.parallelism.pp); ++s) {
    const MemoryEstimate e = estimate_stage_memory(plan, s);
    if (s == 0 || e.total > worst.total) worst = e;
  }
  return worst;
}

std::string format_bytes(double bytes) {
  char buf[64];
  const double gib = bytes / (kMiB * 1024.0);
  if (gib >= 1024.0)
    std::snprintf(buf, sizeof buf, "%.2f TiB", gib / 1024.0);
  else if (gib >= 1.0)
    std::snprintf(buf, sizeof buf, "%.1f GiB", gib);
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / kMiB);
  return buf;
}

std::string describe_memory(const MemoryEstimate& m) {
  return "weights " + format_bytes(m.weights) + " + gradients " + format_bytes(m.gradients) + " + optimizer " +
         format_bytes(m.optimizer) + " + activations " + format_bytes(m.activations) + " + workspace " +
         format_bytes(m.workspace) + " = " + format_bytes(m.total);
}

}  // namespace recipe::dsl
