// Derived values: where the run happens (device, world, dp) and what the model is (head_dim, FFN,
// padded vocab, parameter count, FLOPs), plus the batch arithmetic. Every "0 = derive me" default of
// plan.hpp is replaced by its concrete value, so resolved.toml stands alone.
#include <algorithm>
#include <cmath>

#include "plan/memory_estimate.hpp"
#include "plan/model_size.hpp"
#include "dsl/resolve_internal.hpp"

namespace recipe::dsl::detail {

namespace {

// trainer.eval_interval when a recipe does not set it and the data has a validation split.
constexpr int kDefaultEvalInterval = 1000;

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// Experiment name from the recipe source: "preset:gpt3_345m" / "examples/wiki.lua" → "gpt3_345m" / "wiki".
std::string name_from_source(const std::string& source) {
  std::string name = source;
  if (name.rfind("preset:", 0) == 0) name.erase(0, 7);
  if (const auto slash = name.find_last_of("/\\"); slash != std::string::npos) name.erase(0, slash + 1);
  if (const auto dot = name.find_last_of('.'); dot != std::string::npos && dot > 0) name.resize(dot);
  return name.empty() ? "default" : name;
}

}  // namespace

void derive_execution(ResolveContext& ctx) {
  plan::Plan& p = ctx.plan();
  plan::ExecutorConfig& ex = p.executor;
  const ExecutorFacts& f = ctx.facts;
  if (f.nodes > 0) {
    ex.nodes = f.nodes;
    ctx.fact_origins["executor.nodes"] = Origin{"executor facts (--nodes)", 0};
  }
  if (f.gpus_per_node >= 0) {
    ex.gpus_per_node = f.gpus_per_node;
    ctx.fact_origins["executor.gpus_per_node"] = Origin{"executor facts (--gpus-per-node)", 0};
  }
  if (p.trainer.device == plan::Device::auto_) {
    ctx.auto_device = true;
    // gpus_per_node=0 from the facts means "CPU ranks"; a recipe asking for GPUs per node, or
    // naming the GPU model (`recipe validate gpt3_345m --gpu-model GB10`), means a GPU target even
    // when validated on a machine without one.
    const bool cuda = f.gpus_per_node != 0 && (f.has_gpu || ex.gpus_per_node > 0 || !ex.gpu_model.empty());
    p.trainer.device = cuda ? plan::Device::cuda : plan::Device::cpu;
  }

  const int nodes = std::max(1, ex.nodes);
  if (p.trainer.device == plan::Device::cuda) {
    if (ex.gpus_per_node == 0 && ex.kind == plan::ExecutorKind::local && f.has_gpu) {
      ex.gpus_per_node = std::max(1, f.visible_gpus);
      ctx.fact_origins["executor.gpus_per_node"] = Origin{"detected GPUs", 0};
    }
    int gpn = ex.gpus_per_node;
    if (gpn == 0 && ex.kind != plan::ExecutorKind::local)
      ctx.violation("executor.gpus_per_node",
                    "executor.gpus_per_node must be set for executor.kind=" + std::string(plan::to_string(ex.kind)) +
                        " (only the local executor can count the GPUs itself)",
                    "set executor.gpus_per_node, e.g. --gpus-per-node 8");
    ctx.world = nodes * std::max(1, gpn);
  } else {
    ctx.world = nodes * std::max(1, ex.cpu_ranks);
  }
  p.parallelism.world_size = ctx.world;

  plan::ParallelismConfig& par = p.parallelism;
  const int64_t model_parallel = static_cast<int64_t>(std::max(1, par.tp)) * std::max(1, par.pp) * std::max(1, par.cp);
  if (par.dp == 0) {
    ctx.dp_auto = true;
    ctx.world_ok = ctx.world % model_parallel == 0;
    par.dp = static_cast<int>(std::max<int64_t>(1, ctx.world / model_parallel));
  } else {
    ctx.world_ok = model_parallel * std::max(1, par.dp) == ctx.world;
  }
}

void derive_model(ResolveContext& ctx) {
  plan::Plan& p = ctx.plan();
  plan::ModelConfig& m = p.model;
  if (m.num_kv_heads == 0) m.num_kv_heads = m.num_attention_heads;
  if (m.head_dim == 0 && m.num_attention_heads > 0) m.head_dim = m.hidden_size / m.num_attention_heads;
  if (m.ffn_hidden_size == 0 && m.hidden_size > 0) {
    // Keyed on the activation, not the arch: the 8/3 rule keeps a 3-matrix SwiGLU MLP at the
    // parameter count of a 4h 2-matrix one (Llama), and is meaningless for GELU.
    if (m.activation == plan::Activation::swiglu)
      m.ffn_hidden_size = static_cast<int>(round_up(static_cast<int64_t>(2.0 * 4 * m.hidden_size / 3), 256));
    else
      m.ffn_hidden_size = 4 * m.hidden_size;
  }
  if (m.max_position_embeddings == 0) m.max_position_embeddings = m.seq_length;
  const int64_t multiple =
      static_cast<int64_t>(std::max(1, m.make_vocab_size_divisible_by)) * std::max(1, p.parallelism.tp);
  if (m.vocab_size > 0) m.padded_vocab_size = static_cast<int>(round_up(m.vocab_size, multiple));

  if (ctx.shape_ok) {
    // Published sizes are of the model as allocated: GPT-2 medium "345M" is 354.87M with the
    // embedding padded to 50304 rows (354.82M with 50257), Llama-3-8B 8.03B and -70B 70.55B
    // (their 128256 vocab is already a multiple of 128). So num_params counts the padded vocab;
    // resolved.toml's [derived] also shows the unpadded count.
    m.num_params = count_params(m, m.padded_vocab_size);
    const int64_t embed = word_embedding_params(m, m.padded_vocab_size);
    m.num_non_embedding_params = m.num_params - embed - position_embedding_params(m) - (m.tie_embeddings ? 0 : embed);
    m.flops_per_token = training_flops_per_token(p);
  }

  plan::TrainerConfig& t = p.trainer;
  const int64_t per_step = static_cast<int64_t>(t.micro_batch_size) * p.parallelism.dp;
  if (t.global_batch_size == 0 && per_step > 0 && per_step <= INT32_MAX)
    t.global_batch_size = static_cast<int>(per_step);
  if (per_step > 0) t.num_micro_batches = static_cast<int>(t.global_batch_size / per_step);
  t.tokens_per_step = static_cast<int64_t>(t.global_batch_size) * m.seq_length;
  // Validation is on by default (Megatron's interval; train() also validates after the last step,
  // so a run of any length reports it); check_files turns it off where the data has no
  // validation split, instead of reporting the split as too small.
  if (!ctx.was_set("trainer.eval_interval") && t.eval_interval == 0) {
    ctx.eval_auto = true;
    t.eval_interval = kDefaultEvalInterval;
  }
  // Validation reads a fixed number of samples, whatever the layout (resolve_checks: a multiple of
  // micro × dp); the default is Megatron's eval_iters global batches.
  if (t.eval_samples == 0 && int64_t(t.eval_iters) * t.global_batch_size <= INT32_MAX)
    t.eval_samples = t.eval_iters * t.global_batch_size;
  if (per_step > 0) t.eval_micro_batches = static_cast<int>(t.eval_samples / per_step);

  // Never shorter than warmup: a short run of a long-warmup preset ends inside warmup, and the
  // written-out resolved.toml (which states decay_steps explicitly) must still resolve.
  if (p.schedule.decay_steps == 0) p.schedule.decay_steps = std::max(t.max_steps, p.schedule.warmup_steps);

  plan::DataConfig& d = p.data;
  if (d.blend.empty() && !d.path.empty()) d.blend = {{1.0, d.path}};
  double sum = 0;
  bool non_negative = true;
  for (const auto& [w, prefix] : d.blend) {
    sum += w;
    non_negative = non_negative && w >= 0 && std::isfinite(w);
  }
  // Already-normalized weights are left alone so a resolved plan re-resolves bit-identically.
  if (non_negative && sum > 0 && std::fabs(sum - 1.0) > 1e-12)
    for (auto& entry : d.blend) entry.first /= sum;

  if (p.experiment.name.empty()) p.experiment.name = name_from_source(p.source);

  // What executors and core read instead of re-deriving: the rank layout, the pipeline split, the
  // CUDA workspace and the classifier chunk (the memory estimate counts the same bytes).
  plan::ParallelismConfig& par = p.parallelism;
  par.rank_order = plan::kRankOrder;
  if (ctx.shape_ok) {
    par.stage_num_layers = plan::stage_layer_counts(p);
    par.pipeline_bubble = plan::pipeline_bubble(p);
    p.kernels.workspace_bytes =
        p.kernels.workspace_mb > 0 ? int64_t(p.kernels.workspace_mb) << 20 : plan::cuda_workspace_bytes(p);
    t.classifier_chunk_rows = plan::classifier_chunk_rows(p);
  }
}

}  // namespace recipe::dsl::detail
