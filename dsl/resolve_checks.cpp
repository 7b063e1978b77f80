// Validation: each value on its own (check_ranges), then the rules across keys (check_relations).
// Every rule reports and continues, so one resolve lists every problem of a recipe.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "plan/gpu_catalog.hpp"
#include "dsl/check_require.hpp"
#include "dsl/relations.hpp"
#include "dsl/resolve_internal.hpp"
#include "family/arch_shape.hpp"
#include "dsl/suggest.hpp"
#include "plan/lora.hpp"

namespace recipe::dsl::detail {

namespace {

// Slurm --time: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or UNLIMITED.
bool valid_slurm_time(const std::string& t) {
  if (t == "UNLIMITED" || t == "unlimited" || t == "infinite") return true;
  std::string rest = t;
  bool has_days = false;
  if (const auto dash = t.find('-'); dash != std::string::npos) {
    const std::string days = t.substr(0, dash);
    if (days.empty() || !std::all_of(days.begin(), days.end(), ::isdigit)) return false;
    rest = t.substr(dash + 1);
    has_days = true;
  }
  std::vector<std::string> parts;
  std::stringstream ss(rest);
  for (std::string part; std::getline(ss, part, ':');) parts.push_back(part);
  if (parts.empty() || parts.size() > 3 || rest.back() == ':') return false;
  for (const auto& part : parts)
    if (part.empty() || !std::all_of(part.begin(), part.end(), ::isdigit)) return false;
  return has_days || !parts.empty();
}

// "98,2,0" → three non-negative numbers with a positive sum (Megatron's --split; 1 to 3 entries).
bool valid_split(const std::string& split) {
  std::stringstream ss(split);
  int count = 0;
  double sum = 0;
  for (std::string part; std::getline(ss, part, ',');) {
    try {
      std::size_t used = 0;
      const double v = std::stod(part, &used);
      while (used < part.size() && std::isspace(static_cast<unsigned char>(part[used]))) ++used;
      if (used != part.size() || !(v >= 0) || !std::isfinite(v)) return false;
      sum += v;
    } catch (const std::exception&) {
      return false;
    }
    ++count;
  }
  return count >= 1 && count <= 3 && sum > 0 && split.back() != ',';
}

// The train share of a valid split ("0,0,100" → 0).
double train_share(const std::string& split) { return std::stod(split.substr(0, split.find(','))); }

}  // namespace

void check_ranges(ResolveContext& ctx) {
  plan::Plan& p = ctx.plan();
  const plan::ModelConfig& m = p.model;
  auto shape = [&](bool ok) { ctx.shape_ok = ctx.shape_ok && ok; };

  // Upper bounds far above any model trained today, below where the derived sizes (4·hidden,
  // hidden·vocab, the memory estimate's bytes) would overflow the engine's integers.
  constexpr int kMaxLayers = 65536, kMaxHidden = 131072, kMaxFfn = 1 << 20, kMaxVocab = 1 << 24, kMaxSeq = 1 << 24;
  const auto up_to = [](int lo, int hi) { return "must be from " + std::to_string(lo) + " to " + std::to_string(hi); };
  shape(require(ctx, "model.num_layers", m.num_layers, m.num_layers >= 1 && m.num_layers <= kMaxLayers,
                up_to(1, kMaxLayers)));
  shape(require(ctx, "model.hidden_size", m.hidden_size, m.hidden_size >= 1 && m.hidden_size <= kMaxHidden,
                up_to(1, kMaxHidden)));
  shape(require(ctx, "model.num_attention_heads", m.num_attention_heads,
                m.num_attention_heads >= 1 && m.num_attention_heads <= kMaxHidden, up_to(1, kMaxHidden)));
  shape(require(ctx, "model.num_kv_heads", m.num_kv_heads, m.num_kv_heads >= 0 && m.num_kv_heads <= kMaxHidden,
                "must be from 0 to " + std::to_string(kMaxHidden) + " (0 = num_attention_heads)"));
  shape(require(ctx, "model.head_dim", m.head_dim, m.head_dim >= 0 && m.head_dim <= kMaxHidden,
                "must be from 0 to " + std::to_string(kMaxHidden) + " (0 = hidden_size / num_attention_heads)"));
  shape(require(ctx, "model.ffn_hidden_size", m.ffn_hidden_size, m.ffn_hidden_size >= 0 && m.ffn_hidden_size <= kMaxFfn,
                "must be from 0 to " + std::to_string(kMaxFfn) + " (0 = derived from hidden_size)"));
  shape(require(ctx, "model.vocab_size", m.vocab_size, m.vocab_size >= 1 && m.vocab_size <= kMaxVocab,
                up_to(1, kMaxVocab)));
  shape(require(ctx, "model.make_vocab_size_divisible_by", m.make_vocab_size_divisible_by,
                m.make_vocab_size_divisible_by >= 1 && m.make_vocab_size_divisible_by <= 65536, up_to(1, 65536)));
  shape(
      require(ctx, "model.seq_length", m.seq_length, m.seq_length >= 1 && m.seq_length <= kMaxSeq, up_to(1, kMaxSeq)));
  shape(require(ctx, "model.max_position_embeddings", m.max_position_embeddings,
                m.max_position_embeddings >= 0 && m.max_position_embeddings <= kMaxSeq,
                "must be from 0 to " + std::to_string(kMaxSeq) + " (0 = seq_length)"));
  require(ctx, "model.norm_eps", m.norm_eps, m.norm_eps > 0 && std::isfinite(m.norm_eps), "must be positive");
  if (m.position_embedding == plan::PositionEmbedding::rope)
    require(ctx, "model.rope_theta", m.rope_theta, m.rope_theta > 0 && std::isfinite(m.rope_theta), "must be positive");
  require(ctx, "model.init_std", m.init_std, m.init_std > 0 && std::isfinite(m.init_std), "must be positive");

  const plan::OptimizerConfig& o = p.optimizer;
  require(ctx, "optimizer.lr", o.lr, o.lr > 0 && std::isfinite(o.lr), "must be positive", "e.g. lr=3e-4");
  require(ctx, "optimizer.min_lr", o.min_lr, o.min_lr >= 0, "must not be negative");
  if (o.lr > 0 && o.min_lr >= 0)
    require(ctx, "optimizer.min_lr", o.min_lr, o.min_lr <= o.lr,
            "exceeds optimizer.lr=" + fmt_double(o.lr) + "; the schedule decays from lr down to min_lr",
            "set min_lr ≤ lr, e.g. min_lr=" + fmt_double(o.lr / 10));
  require(ctx, "optimizer.beta1", o.beta1, o.beta1 >= 0 && o.beta1 < 1, "must be in [0, 1)", "the usual value is 0.9");
  require(ctx, "optimizer.beta2", o.beta2, o.beta2 >= 0 && o.beta2 < 1, "must be in [0, 1)", "e.g. 0.95 or 0.999");
  require(ctx, "optimizer.eps", o.eps, o.eps > 0, "must be positive", "e.g. eps=1e-8");
  require(ctx, "optimizer.weight_decay", o.weight_decay, o.weight_decay >= 0, "must not be negative");
  require(ctx, "optimizer.clip_grad", o.clip_grad, o.clip_grad >= 0, "must not be negative (0 disables clipping)");

  const plan::ScheduleConfig& s = p.schedule;
  require(ctx, "schedule.warmup_steps", s.warmup_steps, s.warmup_steps >= 0, "must not be negative");
  require(ctx, "schedule.decay_steps", s.decay_steps, s.decay_steps >= 0,
          "must not be negative (0 = trainer.max_steps)");

  const plan::TrainerConfig& t = p.trainer;
  require(ctx, "trainer.max_steps", t.max_steps, t.max_steps >= 1, "must be at least 1");
  shape(require(ctx, "trainer.micro_batch_size", t.micro_batch_size, t.micro_batch_size >= 1, "must be at least 1"));
  shape(require(ctx, "trainer.global_batch_size", t.global_batch_size, t.global_batch_size >= 0,
                "must be at least 0 (0 = micro_batch_size × dp)"));
  require(ctx, "trainer.log_interval", t.log_interval, t.log_interval >= 1, "must be at least 1");
  require(ctx, "trainer.eval_interval", t.eval_interval, t.eval_interval >= 0,
          "must not be negative (0 = no validation)");
  if (t.eval_interval > 0)
    require(ctx, "trainer.eval_iters", t.eval_iters, t.eval_iters >= 1, "must be at least 1 when eval_interval > 0");
  require(ctx, "trainer.eval_samples", t.eval_samples, t.eval_samples >= 0,
          "must not be negative (0 = eval_iters × global_batch_size)");
  require(ctx, "trainer.cpu_threads", t.cpu_threads, t.cpu_threads >= 0, "must not be negative (0 = OpenBLAS default)");
  require(ctx, "trainer.step_timeout_s", t.step_timeout_s, t.step_timeout_s >= 0 && std::isfinite(t.step_timeout_s),
          "must not be negative (0 = no step watchdog)", "the default is 600");

  const plan::ParallelismConfig& par = p.parallelism;
  shape(require(ctx, "parallelism.tp", par.tp, par.tp >= 1, "must be at least 1"));
  shape(require(ctx, "parallelism.pp", par.pp, par.pp >= 1, "must be at least 1"));
  // Every stage needs a layer (and the derived split and the memory estimate have pp entries).
  if (par.pp > 1 && p.model.num_layers >= 1)
    shape(require(ctx, "parallelism.pp", par.pp, par.pp <= p.model.num_layers,
                  "must be at most model.num_layers=" + std::to_string(p.model.num_layers) +
                      " (each pipeline stage holds at least one layer)",
                  "use parallelism.pp ≤ " + std::to_string(p.model.num_layers) + ", or more layers"));
  shape(require(ctx, "parallelism.virtual_pp", par.virtual_pp, par.virtual_pp >= 1,
                "must be at least 1 (1 = 1F1B, no virtual pipeline stages)"));
  // Every model chunk needs a layer (the chunk count also sizes the schedule the estimate runs).
  if (par.virtual_pp > 1 && p.model.num_layers >= 1)
    shape(require(ctx, "parallelism.virtual_pp", par.virtual_pp, par.virtual_pp <= p.model.num_layers,
                  "must be at most model.num_layers=" + std::to_string(p.model.num_layers) +
                      " (each model chunk holds at least one layer)"));
  shape(require(ctx, "parallelism.cp", par.cp, par.cp >= 1, "must be at least 1"));
  shape(require(ctx, "parallelism.dp", par.dp, par.dp >= 0, "must be at least 0 (0 = world / (tp·pp·cp))"));
  require(ctx, "parallelism.grad_bucket_mb", par.grad_bucket_mb, par.grad_bucket_mb >= 0,
          "must not be negative (0 = one bucket per layer)");
  require(ctx, "parallelism.tp_overlap_chunks", par.tp_overlap_chunks, par.tp_overlap_chunks >= 1,
          "must be at least 1 (1 = one GEMM, then its all-reduce: no pipelining)", "the default is 2");

  const plan::CheckpointConfig& c = p.checkpoint;
  require(ctx, "checkpoint.save_interval", c.save_interval, c.save_interval >= 0, "must not be negative");
  require(ctx, "checkpoint.keep_last", c.keep_last, c.keep_last >= 0, "must not be negative (0 = keep all)");

  const plan::PeftConfig& pe = p.peft;
  if (pe.kind == plan::PeftKind::lora) {
    require(ctx, "peft.rank", pe.rank, pe.rank >= 1, "must be at least 1", "typical ranks are 8 to 64");
    require(ctx, "peft.alpha", pe.alpha, pe.alpha > 0, "must be positive", "commonly alpha = 2·rank");
    require(ctx, "peft.dropout", pe.dropout, pe.dropout >= 0 && pe.dropout < 1, "must be in [0, 1)");
  }

  const plan::ExecutorConfig& e = p.executor;
  shape(require(ctx, "executor.nodes", e.nodes, e.nodes >= 1, "must be at least 1"));
  shape(require(ctx, "executor.gpus_per_node", e.gpus_per_node, e.gpus_per_node >= 0,
                "must be at least 0 (0 = all visible GPUs)"));
  shape(require(ctx, "executor.cpu_ranks", e.cpu_ranks, e.cpu_ranks >= 1, "must be at least 1"));
  if (!e.device_memory.empty() && !plan::parse_memory_gib(e.device_memory))
    ctx.violation("executor.device_memory", "executor.device_memory=\"" + e.device_memory + "\" is not a memory size",
                  "write a size such as \"80GiB\", \"81920MiB\" or \"80GB\"");
  if (e.kind == plan::ExecutorKind::slurm && !valid_slurm_time(e.time))
    ctx.violation("executor.time", "executor.time=\"" + e.time + "\" is not a Slurm time limit",
                  "use minutes, HH:MM:SS or D-HH:MM:SS, e.g. \"04:00:00\"");

  const plan::DataConfig& d = p.data;
  if (!valid_split(d.split))
    ctx.violation("data.split", "data.split=\"" + d.split + "\" is not 1 to 3 non-negative proportions",
                  "write train,valid,test proportions such as \"98,2,0\"");
  else if (d.kind != plan::DataKind::mock && !ctx.facts.evaluation && !(train_share(d.split) > 0))
    ctx.violation("data.split",
                  "data.split=\"" + d.split + "\" gives the train split no documents; training reads the train split",
                  "give training a share, e.g. data.split=\"98,2,0\"");
  for (std::size_t i = 0; i < d.blend.size(); ++i) {
    const auto& [w, prefix] = d.blend[i];
    if (!(w >= 0) || !std::isfinite(w))
      ctx.violation("data.blend", "data.blend weight " + fmt_double(w) + " of \"" + prefix + "\" must not be negative",
                    "use non-negative weights; they are normalized to sum to 1");
    if (prefix.empty())
      ctx.violation("data.blend", "data.blend entry " + std::to_string(i + 1) + " has an empty prefix");
  }
  if (!d.blend.empty()) {
    double sum = 0;
    for (const auto& entry : d.blend) sum += entry.first;
    if (!(sum > 0))
      ctx.violation("data.blend", "data.blend weights sum to " + fmt_double(sum), "give at least one positive weight");
  }
  require(ctx, "data.max_samples_per_pack", d.max_samples_per_pack,
          d.max_samples_per_pack >= 1 && d.max_samples_per_pack <= 4095, "must be 1 to 4095");

  const plan::KernelsConfig& k = p.kernels;
  require(ctx, "kernels.workspace_mb", k.workspace_mb, k.workspace_mb == 0 || k.workspace_mb >= 16,
          "must be 0 (derived) or at least 16 (MiB)");
  require(ctx, "kernels.cublaslt_tune_candidates", k.cublaslt_tune_candidates,
          k.cublaslt_tune_candidates >= 1 && k.cublaslt_tune_candidates <= 256, "must be from 1 to 256");
}

void check_relations(ResolveContext& ctx) {
  check_eval_batches(ctx);
  check_device(ctx);

  if (!ctx.shape_ok) return;  // the rules below divide by sizes that are known to be positive

  const bool kv_ok = check_attention_shape(ctx);
  check_tensor_parallel(ctx, kv_ok);
  check_context_parallel(ctx);
  check_pipeline(ctx);
  check_world_size(ctx);
  check_batches(ctx);
  check_schedule(ctx);
  check_peft(ctx);
  check_data(ctx);
  check_advice(ctx);
}

}  // namespace recipe::dsl::detail
