// Validation: each value on its own (check_ranges), then the rules across keys (check_relations).
// Every rule reports and continues, so one resolve lists every problem of a recipe.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "plan/gpu_catalog.hpp"
#include "dsl/resolve_internal.hpp"
#include "family/arch_shape.hpp"
#include "plan/model_family.hpp"
#include "dsl/suggest.hpp"
#include "plan/lora.hpp"

namespace recipe::dsl::detail {

namespace {

std::string str(int v) { return std::to_string(v); }
std::string str(int64_t v) { return std::to_string(v); }
std::string str(double v) { return fmt_double(v); }

// Reports `path=value <requirement>` unless the key already had a type error.
template <class T>
bool require(ResolveContext& ctx, const std::string& path, T value, bool ok, const std::string& requirement,
             const std::string& fix = "") {
  if (ok || ctx.bad_paths.count(path)) return true;
  ctx.violation(path, path + "=" + str(value) + " " + requirement, fix);
  return false;
}

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

// TP sizes (≤ 8, one NVLink domain) that satisfy every TP rule and fit the world.
std::vector<std::string> valid_tp_choices(const ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const plan::ModelConfig& m = p.model;
  std::vector<std::string> out;
  for (int t = 1; t <= 8; ++t) {
    if (t == p.parallelism.tp) continue;
    if (m.num_attention_heads % t != 0) continue;
    if (m.num_kv_heads > 0 && m.num_kv_heads % t != 0) continue;
    if (m.ffn_hidden_size % t != 0) continue;
    if (p.parallelism.sequence_parallel && t == 1) continue;
    if (ctx.world % (t * std::max(1, p.parallelism.pp) * std::max(1, p.parallelism.cp)) != 0) continue;
    out.push_back("tp=" + std::to_string(t));
  }
  return out;
}

std::string tp_fix(const ResolveContext& ctx) {
  const auto choices = valid_tp_choices(ctx);
  if (choices.empty()) return "no tp ≤ 8 fits this model and world size; change the model shape or the world size";
  return "try " + join_or(choices);
}

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
  else if (d.kind != plan::DataKind::mock && !(train_share(d.split) > 0))
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
  plan::Plan& p = ctx.plan();
  const plan::ModelConfig& m = p.model;
  const plan::ParallelismConfig& par = p.parallelism;
  const plan::TrainerConfig& t = p.trainer;
  const plan::ExecutorConfig& ex = p.executor;
  const ExecutorFacts& facts = ctx.facts;

  // Validation reads the first eval_samples sequences, whole micro-batches per DP rank.
  // (micro_batch_size < 1 is check_ranges' violation already; it must not divide here.)
  if (t.eval_interval > 0 && t.eval_samples > 0 && par.dp > 0 && t.micro_batch_size > 0) {
    const int64_t per_step = int64_t(t.micro_batch_size) * par.dp;
    if (t.eval_samples % per_step != 0) {
      const int64_t down = std::max<int64_t>(per_step, t.eval_samples / per_step * per_step);
      ctx.violation("trainer.eval_samples",
                    "trainer.eval_samples=" + str(t.eval_samples) +
                        " is not a multiple of trainer.micro_batch_size × parallelism.dp = " + str(t.micro_batch_size) +
                        " × " + str(par.dp) + " = " + std::to_string(per_step) +
                        " (each DP rank reads whole micro-batches of the validation split)",
                    "set trainer.eval_samples=" + std::to_string(down) + " or " + std::to_string(down + per_step) +
                        " (a multiple of " + std::to_string(per_step) + " at every layout you compare)");
    }
  }

  // Device and executor.
  if (t.device == plan::Device::cuda) {
    if (!facts.has_gpu && !facts.planning && ex.kind == plan::ExecutorKind::local && ex.nodes == 1) {
      const std::string why =
          ctx.auto_device ? "trainer.device=auto chose cuda (executor.gpus_per_node=" + str(ex.gpus_per_node) + ")"
                          : "trainer.device=cuda";
      ctx.violation("trainer.device", why + " but no GPU is visible here; use --device cpu",
                    "pass --device cpu (trainer.device=\"cpu\"), or run on a machine with a GPU");
    } else if (facts.has_gpu && ex.kind == plan::ExecutorKind::local && ex.nodes == 1 && facts.visible_gpus > 0 &&
               ex.gpus_per_node > facts.visible_gpus) {
      ctx.violation("executor.gpus_per_node",
                    "executor.gpus_per_node=" + str(ex.gpus_per_node) + " but only " + str(facts.visible_gpus) +
                        " GPU(s) are visible here",
                    "use --gpus-per-node " + str(facts.visible_gpus) + " or fewer");
    }
  } else if (t.precision == plan::Precision::bf16) {
    ctx.warn("trainer.precision=bf16 on CPU: weights are stored in bf16, the CPU kernels compute in fp32");
  }
  // The local executor cannot reach other hosts: running the ranks of N nodes here would not be
  // the plan that validated.
  if (ex.kind == plan::ExecutorKind::local && ex.nodes > 1)
    ctx.violation("executor.nodes",
                  "executor.nodes=" + str(ex.nodes) + " but executor.kind=local starts ranks on this host only",
                  "use --executor mpi (with executor.hostfile) or --executor slurm, or executor.nodes=1");

  if (!ctx.shape_ok) return;  // the rules below divide by sizes that are known to be positive

  // Attention shape.
  require(ctx, "model.hidden_size", m.hidden_size, m.hidden_size % m.num_attention_heads == 0,
          "is not divisible by model.num_attention_heads=" + str(m.num_attention_heads),
          "make hidden_size a multiple of the head count");
  const int kv = m.num_kv_heads;
  const bool kv_ok =
      require(ctx, "model.num_kv_heads", kv, kv <= m.num_attention_heads && m.num_attention_heads % kv == 0,
              "does not divide model.num_attention_heads=" + str(m.num_attention_heads),
              "each KV head serves a whole group of query heads; use a divisor of the head count");
  if (m.position_embedding == plan::PositionEmbedding::rope && m.head_dim % 2 != 0)
    ctx.violation("model.position_embedding",
                  "model.position_embedding=rope needs an even head_dim, got model.head_dim=" + str(m.head_dim) +
                      " (hidden_size=" + str(m.hidden_size) + " / num_attention_heads=" + str(m.num_attention_heads) +
                      ")",
                  "change hidden_size or num_attention_heads so that their quotient is even");
  if (m.position_embedding == plan::PositionEmbedding::learned)
    require(ctx, "model.max_position_embeddings", m.max_position_embeddings, m.max_position_embeddings >= m.seq_length,
            "is smaller than model.seq_length=" + str(m.seq_length) + "; learned positions need one row per token",
            "set max_position_embeddings ≥ " + str(m.seq_length) + " (or 0 = seq_length)");

  // Tensor parallelism.
  const int tp = par.tp;
  if (tp > 1) {
    // One violation naming every size tp fails to divide, so one fix covers them all.
    std::vector<std::string> undivided;
    if (m.num_attention_heads % tp != 0) undivided.push_back("model.num_attention_heads=" + str(m.num_attention_heads));
    // Every TP rank holds whole KV heads of its own. (Replicating a KV head on several ranks would
    // need its gradient summed over exactly those ranks; this version does not do that.)
    if (kv_ok && kv != m.num_attention_heads && kv % tp != 0)  // kv == heads: the heads rule covers it
      undivided.push_back("model.num_kv_heads=" + str(kv) + " (each TP rank needs whole KV heads of its own)");
    if (m.ffn_hidden_size % tp != 0) undivided.push_back("model.ffn_hidden_size=" + str(m.ffn_hidden_size));
    if (m.padded_vocab_size % tp != 0)
      undivided.push_back("the padded vocabulary " + str(m.padded_vocab_size) +
                          " (set model.make_vocab_size_divisible_by)");
    if (!undivided.empty()) {
      std::string list;
      for (std::size_t i = 0; i < undivided.size(); ++i)
        list += (i == 0 ? "" : (i + 1 == undivided.size() ? " and " : ", ")) + undivided[i];
      ctx.violation("parallelism.tp", "parallelism.tp=" + str(tp) + " does not divide " + list, tp_fix(ctx));
    }
  }
  if (par.sequence_parallel && tp == 1)
    ctx.violation("parallelism.sequence_parallel",
                  "parallelism.sequence_parallel=true needs parallelism.tp > 1, got tp=1",
                  "set sequence_parallel=false, or tp ≥ 2");
  // Sequence parallelism splits a micro-batch's micro_batch_size × seq_length token rows into tp
  // equal parts (core/model/linear.hpp).
  const int64_t sp_rows = static_cast<int64_t>(p.trainer.micro_batch_size) * m.seq_length;
  if (par.sequence_parallel && tp > 1 && p.trainer.micro_batch_size > 0 && m.seq_length > 0 && sp_rows % tp != 0)
    ctx.violation(
        "parallelism.sequence_parallel",
        "parallelism.sequence_parallel=true splits trainer.micro_batch_size × model.seq_length = " +
            str(p.trainer.micro_batch_size) + " × " + str(m.seq_length) + " = " + std::to_string(sp_rows) +
            " token rows over parallelism.tp=" + str(tp) + " ranks, which does not divide them",
        "make micro_batch_size × seq_length a multiple of tp=" + str(tp) + ", or set sequence_parallel=false");
  // The communication overlap pipelines TP's collectives with the linears' GEMMs: with sequence
  // parallelism its all-gathers / reduce-scatters, one TP rank's row block at a time; without it the
  // row-parallel forward's all-reduce, in tp_overlap_chunks row chunks (core/model/linear.hpp).
  // Without TP there is no collective to hide.
  if (par.tp_comm_overlap && tp == 1)
    ctx.violation("parallelism.tp_comm_overlap",
                  "parallelism.tp_comm_overlap=true needs parallelism.tp > 1 (it overlaps tensor parallelism's "
                  "collectives with the linears' GEMMs), got tp=1",
                  "set parallelism.tp ≥ 2, or tp_comm_overlap=false");
  // tp_overlap_chunks acts only on that non-SP forward (the rings always take tp blocks), and each
  // chunk needs a token row: micro_batch_size × seq_length / cp rows per rank and micro-batch. A
  // value other than the default where it cannot act is refused (the default itself is written
  // into every resolved.toml, which must re-resolve).
  const bool chunked = par.tp_comm_overlap && !par.sequence_parallel && tp > 1;
  if (par.tp_overlap_chunks != plan::ParallelismConfig{}.tp_overlap_chunks && !chunked &&
      !ctx.bad_paths.count("parallelism.tp_overlap_chunks"))
    ctx.violation(
        "parallelism.tp_overlap_chunks",
        "parallelism.tp_overlap_chunks=" + str(par.tp_overlap_chunks) +
            " has no effect here: it splits the row-parallel forward of tensor parallelism without sequence "
            "parallelism, with the overlap on (tp_comm_overlap=true, sequence_parallel=false, tp > 1); got tp=" +
            str(tp) + ", sequence_parallel=" + (par.sequence_parallel ? "true" : "false") +
            ", tp_comm_overlap=" + (par.tp_comm_overlap ? "true" : "false") +
            (par.sequence_parallel ? " (the sequence-parallel rings always take tp row blocks)" : ""),
        "remove parallelism.tp_overlap_chunks, or set tp_comm_overlap=true with sequence_parallel=false");
  const int64_t chunk_rows = static_cast<int64_t>(p.trainer.micro_batch_size) * m.seq_length / std::max(1, par.cp);
  if (chunked && p.trainer.micro_batch_size > 0 && chunk_rows > 0 && par.tp_overlap_chunks > chunk_rows)
    ctx.violation("parallelism.tp_overlap_chunks",
                  "parallelism.tp_overlap_chunks=" + str(par.tp_overlap_chunks) +
                      " splits trainer.micro_batch_size × model.seq_length" + (par.cp > 1 ? " / parallelism.cp" : "") +
                      " = " + std::to_string(chunk_rows) + " token rows, fewer than the chunks",
                  "set tp_overlap_chunks ≤ " + std::to_string(chunk_rows) + " (the default is 2)");

  // Context parallelism: each rank holds two mirrored chunks of the sequence (load balance with causal masking).
  if (par.cp > 1 && m.seq_length % (2 * par.cp) != 0)
    ctx.violation("parallelism.cp",
                  "parallelism.cp=" + str(par.cp) + " needs model.seq_length divisible by 2·cp=" + str(2 * par.cp) +
                      ", got seq_length=" + str(m.seq_length),
                  "choose cp so that seq_length % (2·cp) == 0");

  // Pipeline parallelism. With virtual pipeline stages the layers split into pp·virtual_pp chunks
  // (layers_per_stage then lists one count per chunk, in model order).
  const int pp = par.pp, vpp = par.virtual_pp;
  // Both ≤ num_layers here or check_ranges said so; the product stays in range either way.
  const int chunks = int(std::min<int64_t>(int64_t(pp) * vpp, INT32_MAX));
  const std::string split_of = vpp > 1 ? "pp·virtual_pp=" + str(pp) + "·" + str(vpp) + "=" + str(chunks) : "pp";
  // The overlapped exchanges move stage tensors between pipeline stages; one stage has none.
  if (par.pp_comm_overlap && pp == 1)
    ctx.violation("parallelism.pp_comm_overlap",
                  "parallelism.pp_comm_overlap=true needs parallelism.pp > 1 (it overlaps the pipeline's sends and "
                  "receives between stages with compute), got pp=1",
                  "set parallelism.pp ≥ 2, or pp_comm_overlap=false");
  if (vpp > 1 && pp < 2)
    ctx.violation(
        "parallelism.virtual_pp",
        "parallelism.virtual_pp=" + str(vpp) + " needs pipeline stages to interleave, got parallelism.pp=" + str(pp),
        "set parallelism.pp ≥ 2, or virtual_pp=1");
  if (!par.layers_per_stage.empty()) {
    int sum = 0;
    bool positive = true;
    for (int n : par.layers_per_stage) {
      sum += n;
      positive = positive && n >= 1;
    }
    std::string list;
    for (std::size_t i = 0; i < par.layers_per_stage.size(); ++i)
      list += (i ? ", " : "") + std::to_string(par.layers_per_stage[i]);
    if (static_cast<int>(par.layers_per_stage.size()) != chunks)
      ctx.violation("parallelism.layers_per_stage",
                    "parallelism.layers_per_stage has " + str(static_cast<int>(par.layers_per_stage.size())) +
                        " entries [" + list + "] but parallelism." + (vpp > 1 ? split_of : "pp=" + str(pp)),
                    vpp > 1 ? "give one layer count per virtual pipeline stage (model chunk), in model order"
                            : "give one layer count per pipeline stage");
    else if (sum != m.num_layers)
      ctx.violation("parallelism.layers_per_stage",
                    "parallelism.layers_per_stage [" + list + "] sums to " + str(sum) +
                        ", not model.num_layers=" + str(m.num_layers),
                    "make the entries add up to " + str(m.num_layers));
    if (!positive)
      ctx.violation("parallelism.layers_per_stage",
                    "parallelism.layers_per_stage [" + list + "] has a stage with no layers",
                    "every stage needs ≥ 1 layer");
  } else if (par.pipeline_split == plan::PipelineSplit::balanced) {
    // Any count splits, as long as every model chunk gets a layer.
    if (chunks > m.num_layers && pp <= m.num_layers)
      ctx.violation(vpp > 1 ? "parallelism.virtual_pp" : "parallelism.pp",
                    "parallelism." + split_of + " exceeds model.num_layers=" + str(m.num_layers) +
                        ": every model chunk needs ≥ 1 layer",
                    "use " + std::string(vpp > 1 ? "pp·virtual_pp" : "pp") + " ≤ " + str(m.num_layers));
  } else if (vpp > 1 && pp >= 2 && m.num_layers % chunks != 0) {
    std::vector<std::string> choices;
    for (int q = 2; q <= std::min(m.num_layers / pp, 8); ++q)
      if (q != vpp && m.num_layers % (pp * q) == 0) choices.push_back("virtual_pp=" + std::to_string(q));
    // Balanced or explicit splits need a layer per chunk: offer them only where there are enough.
    const std::string entries = str(chunks) + " entries";
    const std::string other_splits =
        chunks <= m.num_layers
            ? ", set parallelism.pipeline_split=\"balanced\", or give parallelism.layers_per_stage with " + entries
            : " (more model chunks than layers: every chunk needs ≥ 1 layer)";
    ctx.violation("parallelism.virtual_pp",
                  "parallelism." + split_of + " does not divide model.num_layers=" + str(m.num_layers),
                  (choices.empty() ? std::string("use virtual_pp=1") : "try " + join_or(choices)) + other_splits);
  } else if (pp > m.num_layers) {
    // check_ranges reported it.
  } else if (m.num_layers % pp != 0) {
    std::vector<std::string> choices;
    for (int q = 1; q <= std::min(m.num_layers, 16); ++q)
      if (q != pp && m.num_layers % q == 0) choices.push_back("pp=" + std::to_string(q));
    ctx.violation("parallelism.pp",
                  "parallelism.pp=" + str(pp) + " does not divide model.num_layers=" + str(m.num_layers),
                  "try " + join_or(choices) +
                      ", set parallelism.pipeline_split=\"balanced\", or give parallelism.layers_per_stage explicitly");
  }

  // World size = tp·pp·cp·dp, and the executor must supply it.
  const int64_t model_parallel = static_cast<int64_t>(tp) * pp * par.cp;
  if (!ctx.world_ok) {
    const std::string supply =
        t.device == plan::Device::cuda
            ? "executor.nodes=" + str(ex.nodes) + " × executor.gpus_per_node=" + str(ex.gpus_per_node)
            : "executor.nodes=" + str(ex.nodes) + " × executor.cpu_ranks=" + str(ex.cpu_ranks);
    const std::string per_node_key = t.device == plan::Device::cuda ? "executor.gpus_per_node" : "executor.cpu_ranks";
    const int per_node = t.device == plan::Device::cuda ? std::max(1, ex.gpus_per_node) : ex.cpu_ranks;
    const std::string product = "tp·pp·cp = " + str(tp) + "·" + str(pp) + "·" + str(par.cp);
    if (ctx.dp_auto) {
      // Smallest per-node count (≤ 8 for GPUs) and node count that make the world a multiple.
      std::vector<std::string> options;
      for (int g = 1; g <= (t.device == plan::Device::cuda ? 8 : 64); ++g)
        if ((static_cast<int64_t>(ex.nodes) * g) % model_parallel == 0) {
          options.push_back(per_node_key + "=" + str(g) + " (" + str(ex.nodes) + " × " + str(g) + " = " +
                            str(static_cast<int64_t>(ex.nodes) * g) + " ranks)");
          break;
        }
      const int64_t nodes_needed = model_parallel / std::gcd<int64_t>(model_parallel, per_node);
      options.push_back("executor.nodes=" + str(nodes_needed) + " (" + str(nodes_needed) + " × " + str(per_node) +
                        " = " + str(nodes_needed * per_node) + " ranks)");
      ctx.violation("parallelism.world_size",
                    "world size " + str(ctx.world) + " (" + supply + ") is not divisible by " + product + " = " +
                        str(model_parallel),
                    "run a multiple of " + str(model_parallel) + " ranks: " + join_or(options) +
                        "; or lower parallelism.tp/pp/cp",
                    per_node_key);
    } else {
      ctx.violation("parallelism.dp",
                    "world size " + str(ctx.world) + " (" + supply + ") != " + product + "·dp = " + str(tp) + "·" +
                        str(pp) + "·" + str(par.cp) + "·" + str(par.dp) + " = " + str(model_parallel * par.dp),
                    ctx.world % model_parallel == 0
                        ? "set parallelism.dp=" + str(ctx.world / model_parallel) + " or 0 (derived)"
                        : "set parallelism.dp=0 and use a world size that is a multiple of " + str(model_parallel));
    }
  }

  // Batch arithmetic.
  const int64_t per_step = static_cast<int64_t>(t.micro_batch_size) * par.dp;
  if (t.global_batch_size % per_step != 0) {
    const int64_t lo = t.global_batch_size / per_step * per_step, hi = lo + per_step;
    std::string fix = "try trainer.global_batch_size=" + (lo > 0 ? str(lo) + " or " + str(hi) : str(hi));
    fix += ", or change trainer.micro_batch_size";
    ctx.violation("trainer.global_batch_size",
                  "trainer.global_batch_size=" + str(t.global_batch_size) +
                      " is not divisible by micro_batch_size × dp = " + str(t.micro_batch_size) + " × " + str(par.dp) +
                      " = " + str(per_step),
                  fix);
  }

  // Interleaved 1F1B runs the micro-batches in groups of pp (Megatron's rule).
  const int64_t micro_batches = t.global_batch_size / per_step;
  if (vpp > 1 && pp > 1 && t.global_batch_size % per_step == 0 && micro_batches % pp != 0) {
    const int64_t lo = micro_batches / pp * pp * per_step, hi = (micro_batches / pp + 1) * pp * per_step;
    ctx.violation(
        "parallelism.virtual_pp",
        "parallelism.virtual_pp=" + str(vpp) + " (interleaved 1F1B) needs trainer.num_micro_batches = " +
            "global_batch_size / (micro_batch_size × dp) = " + str(micro_batches) +
            " divisible by parallelism.pp=" + str(pp),
        "try trainer.global_batch_size=" + (lo > 0 ? str(lo) + " or " + str(hi) : str(hi)) + ", or virtual_pp=1",
        "trainer.global_batch_size");
  }

  // Schedule.
  const plan::ScheduleConfig& s = p.schedule;
  // A short run of a preset with a long warmup (decay_steps derived from max_steps) is fine, as in
  // Megatron: the run simply ends inside warmup. Only an explicit decay_steps shorter than warmup is
  // a contradiction.
  if (s.decay_style != plan::DecayStyle::constant && s.decay_steps < s.warmup_steps &&
      ctx.was_set("schedule.decay_steps"))
    ctx.violation(
        "schedule.warmup_steps",
        "schedule.warmup_steps=" + str(s.warmup_steps) + " exceeds schedule.decay_steps=" + str(s.decay_steps),
        "lower warmup_steps or raise schedule.decay_steps / trainer.max_steps");
  else if (s.warmup_steps > t.max_steps)
    ctx.warn("schedule.warmup_steps=" + str(s.warmup_steps) + " > trainer.max_steps=" + str(t.max_steps) +
             ": the run ends before warmup does");

  // PEFT.
  const plan::PeftConfig& pe = p.peft;
  if (pe.kind == plan::PeftKind::lora) {
    const core::Family& family = plan::model_family(m);
    const std::vector<std::string> names = plan::lora_target_names(family);
    if (pe.target_modules.empty())
      ctx.violation("peft.target_modules", "peft.target_modules is empty; LoRA needs at least one linear to adapt",
                    "e.g. target_modules = {\"qkv\", \"proj\"} (any of " + join_or(names) + ")");
    for (const auto& target : pe.target_modules)
      if (std::find(names.begin(), names.end(), target) == names.end())
        ctx.violation("peft.target_modules",
                      "peft.target_modules has \"" + target + "\", which is not a linear of the model" +
                          did_you_mean(target, names),
                      "use any of " + join_or(names));
    for (const std::string& problem : plan::lora_targets(family, pe.target_modules).problems)
      if (problem.find("fused") != std::string::npos)
        ctx.violation("peft.target_modules", "peft.target_modules: " + problem,
                      "adapt the whole fused linear, or leave its parts out");
    // A rank above min(in, out) of an adapted linear adds parameters but no expressiveness: B·A
    // cannot exceed the rank of the smaller side (PEFT allows it silently; it is a typo here).
    const unsigned mask = plan::lora_targets(family, pe.target_modules).mask;
    const int attn_side = m.hidden_size;  // qkv: hidden → (heads+2·kv)·head_dim; proj: hidden → hidden
    const int mlp_side = std::min(m.hidden_size, m.ffn_hidden_size);  // fc1: hidden → ffn; fc2: ffn → hidden
    int bound = std::numeric_limits<int>::max();
    std::string limiting;
    if ((mask & (core::lora_qkv | core::lora_proj)) && attn_side < bound) {
      bound = attn_side;
      limiting = "model.hidden_size=" + str(m.hidden_size) + " (attention linears)";
    }
    if ((mask & (core::lora_mlp_in | core::lora_mlp_out)) && mlp_side < bound) {
      bound = mlp_side;
      limiting = "min(model.hidden_size, model.ffn_hidden_size) = " + str(mlp_side) + " (MLP linears)";
    }
    if (pe.rank >= 1 && bound != std::numeric_limits<int>::max() && pe.rank > bound)
      ctx.violation("peft.rank",
                    "peft.rank=" + str(pe.rank) + " exceeds the smaller side of an adapted linear: " + limiting,
                    "use peft.rank ≤ " + str(bound) + " (typical ranks are 8 to 64)");
    if (p.mode != plan::Mode::finetune)
      ctx.violation("mode", "peft.kind=lora needs mode=finetune, got mode=" + std::string(plan::to_string(p.mode)),
                    "use `recipe finetune`, or set mode=\"finetune\"");
  }
  if (p.mode == plan::Mode::finetune && p.checkpoint.load.empty() && !p.checkpoint.allow_random_init)
    ctx.violation("checkpoint.load", "mode=finetune needs checkpoint.load, the weights to fine-tune",
                  "set checkpoint.load to a checkpoint or run dir (`recipe ckpt import` makes one from a Hugging Face "
                  "model), or checkpoint.allow_random_init=true to fine-tune random weights on purpose",
                  "mode");

  // Data.
  const plan::DataConfig& d = p.data;
  if (!d.path.empty() && d.blend.size() >= 1 && !(d.blend.size() == 1 && d.blend.front().second == d.path))
    ctx.violation("data.path", "data.path=\"" + d.path + "\" and data.blend are both set",
                  "set data.path for one dataset, or data.blend for several, not both");
  if ((d.kind == plan::DataKind::indexed || d.kind == plan::DataKind::sft) && d.blend.empty())
    ctx.violation("data.path", "data.kind=" + std::string(plan::to_string(d.kind)) + " needs data.path or data.blend",
                  "set data.path to a dataset prefix (the .bin/.idx pair without extension), or data.blend");
  if (d.kind == plan::DataKind::sft && d.chat_template == plan::ChatTemplate::none)
    ctx.violation("data.chat_template",
                  "data.kind=sft needs data.chat_template, the template the dataset was prepared with",
                  "set data.chat_template to llama3, chatml or plain (as given to `recipe data prepare --format chat "
                  "--chat-template ...`)");
  if (d.kind == plan::DataKind::mock && !d.blend.empty())
    ctx.warn("data.kind=mock ignores data.path/data.blend; set data.kind=\"indexed\" to train on them");
  if (d.tokenizer == plan::Tokenizer::gpt2_bpe) {
    if (d.vocab_file.empty())
      ctx.violation("data.vocab_file", "data.tokenizer=gpt2_bpe needs data.vocab_file (vocab.json)",
                    "set data.vocab_file and data.merges_file");
    if (d.merges_file.empty())
      ctx.violation("data.merges_file", "data.tokenizer=gpt2_bpe needs data.merges_file (merges.txt)",
                    "set data.vocab_file and data.merges_file");
  }
  if (d.tokenizer == plan::Tokenizer::sentencepiece && d.tokenizer_model.empty())
    ctx.violation("data.tokenizer_model", "data.tokenizer=sentencepiece needs data.tokenizer_model (the .model file)",
                  "set data.tokenizer_model");
  if (d.tokenizer == plan::Tokenizer::hf && d.tokenizer_model.empty())
    ctx.violation("data.tokenizer_model", "data.tokenizer=hf needs data.tokenizer_model (the tokenizer.json)",
                  "set data.tokenizer_model to the model's tokenizer.json");
  if (d.tokenizer != plan::Tokenizer::hf && !d.eod_token.empty())
    ctx.violation("data.eod_token", "data.eod_token=\"" + d.eod_token + "\" is only read by data.tokenizer=hf",
                  "remove data.eod_token, or set data.tokenizer=\"hf\"");
  if (d.tokenizer == plan::Tokenizer::byte && m.vocab_size < 256)
    require(ctx, "model.vocab_size", m.vocab_size, false, "is smaller than the 256 ids of the byte tokenizer",
            "set vocab_size ≥ 256");

  // Advice that is not an error.
  if (par.zero1 && par.dp == 1) ctx.warn("parallelism.zero1=true has no effect with dp=1");
  if (p.checkpoint.save_interval > t.max_steps)
    ctx.warn("checkpoint.save_interval=" + str(p.checkpoint.save_interval) +
             " > trainer.max_steps=" + str(t.max_steps) + ": only the final checkpoint is written");
}

}  // namespace recipe::dsl::detail
