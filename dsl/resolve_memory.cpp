// Device memory per rank (recipe key, GPU catalog, or detected GPU) and the check that the per-rank
// estimate fits, with the estimates of the usual remedies as the fix.
#include <algorithm>
#include <cmath>

#include "plan/gpu_catalog.hpp"
#include "plan/memory_estimate.hpp"
#include "dsl/resolve_internal.hpp"
#include "dsl/suggest.hpp"

namespace recipe::dsl::detail {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The plan with other tp/pp, its dependent derived values recomputed (padded vocab, dp, micro-batches).
plan::Plan with_parallel(const plan::Plan& p, int world, int tp, int pp) {
  plan::Plan q = p;
  q.parallelism.tp = tp;
  q.parallelism.pp = pp;
  q.parallelism.layers_per_stage.clear();
  q.parallelism.dp = std::max(1, world / (tp * pp * std::max(1, p.parallelism.cp)));
  const int64_t multiple = static_cast<int64_t>(q.model.make_vocab_size_divisible_by) * tp;
  q.model.padded_vocab_size = static_cast<int>((q.model.vocab_size + multiple - 1) / multiple * multiple);
  const int64_t per_step = static_cast<int64_t>(q.trainer.micro_batch_size) * q.parallelism.dp;
  q.trainer.num_micro_batches = static_cast<int>(std::max<int64_t>(1, q.trainer.global_batch_size / per_step));
  return q;
}

bool tp_fits_model(const plan::ModelConfig& m, int t) {
  return m.num_attention_heads % t == 0 && (m.num_kv_heads % t == 0 || t % m.num_kv_heads == 0) &&
         m.ffn_hidden_size % t == 0;
}

std::string remedies(const ResolveContext& ctx, double device_bytes) {
  const plan::Plan& p = ctx.plan();
  const int world = ctx.world, tp = p.parallelism.tp, pp = p.parallelism.pp, cp = p.parallelism.cp;
  std::vector<std::pair<std::string, plan::Plan>> options;
  for (int t = tp * 2; t <= 8; t *= 2)
    if (tp_fits_model(p.model, t) && world % (t * pp * cp) == 0) {
      options.emplace_back("parallelism.tp=" + std::to_string(t), with_parallel(p, world, t, pp));
      break;
    }
  for (int q = pp * 2; q <= p.model.num_layers; q *= 2)
    if (p.model.num_layers % q == 0 && world % (tp * q * cp) == 0) {
      options.emplace_back("parallelism.pp=" + std::to_string(q), with_parallel(p, world, tp, q));
      break;
    }
  // Sequence parallelism splits the residual stream's activations over the TP group (the
  // estimate counts N/tp rows for them, plan/memory_estimate.cpp).
  if (!p.parallelism.sequence_parallel && tp > 1 &&
      (static_cast<int64_t>(p.trainer.micro_batch_size) * p.model.seq_length) % tp == 0) {
    plan::Plan q = p;
    q.parallelism.sequence_parallel = true;
    options.emplace_back("parallelism.sequence_parallel=true", q);
  }
  if (!p.parallelism.zero1 && p.parallelism.dp > 1) {
    plan::Plan q = p;
    q.parallelism.zero1 = true;
    options.emplace_back("parallelism.zero1=true", q);
  }
  // The cheaper recompute level first (rebuilds norm outputs and the MLP activation only).
  if (p.trainer.recompute == plan::Recompute::none || p.trainer.recompute == plan::Recompute::gelu) {
    plan::Plan q = p;
    q.trainer.recompute = plan::Recompute::norm;
    options.emplace_back("trainer.recompute=\"norm\"", q);
  }
  if (p.trainer.recompute != plan::Recompute::full) {
    plan::Plan q = p;
    q.trainer.recompute = plan::Recompute::full;
    options.emplace_back("trainer.recompute=\"full\"", q);
  }
  if (p.trainer.micro_batch_size > 1) {
    plan::Plan q = p;
    q.trainer.micro_batch_size = 1;
    q.trainer.num_micro_batches = q.trainer.global_batch_size / std::max(1, p.parallelism.dp);
    options.emplace_back("trainer.micro_batch_size=1", q);
  }
  std::string text;
  if (!options.empty()) {
    text = "estimated per rank with ";
    for (std::size_t i = 0; i < options.size(); ++i) {
      const double total = static_cast<double>(estimate_memory(options[i].second).total);
      text += (i ? "; " : "") + options[i].first + ": " + plan::format_bytes(total) +
              (total <= device_bytes ? " (fits)" : "");
    }
  }
  // Model state that no activation trick removes: tells how many ranks it must be spread over.
  const plan::MemoryEstimate& e = p.memory;
  const double state = static_cast<double>(e.weights + e.gradients + e.optimizer) * tp * pp;
  const int64_t min_ranks = static_cast<int64_t>(std::ceil(state / (0.8 * device_bytes)));
  if (min_ranks > 1) {
    if (!text.empty()) text += ". ";
    text += "Weights, gradients and Adam state total " + plan::format_bytes(state) + ": spread them over ≥ " +
            std::to_string(min_ranks) + " GPUs with tp·pp (and parallelism.zero1=true), i.e. more GPUs if needed";
  }
  return text.empty() ? "lower trainer.micro_batch_size or model size" : text;
}

}  // namespace

void derive_and_check_memory(ResolveContext& ctx) {
  plan::Plan& p = ctx.plan();
  if (!ctx.shape_ok) return;
  p.memory = estimate_memory(p);
  if (p.trainer.device != plan::Device::cuda) return;  // host memory is not checked: CPU runs are small by nature

  plan::ExecutorConfig& ex = p.executor;
  const ExecutorFacts& facts = ctx.facts;
  double gib = 0;
  std::string device;
  // A catalog GPU. A unified-memory one (GB10) shares its memory with the operating system and the
  // CPU: the check takes the host's available memory when the plan runs on this host's GPU, else
  // the documented share of the total (plan::kUnifiedMemoryUsableFraction, plan/gpu_catalog.hpp).
  auto set_device = [&](const plan::GpuSpec& g, bool on_this_host) {
    const double available = on_this_host ? facts.host_memory_gib : 0;
    gib = plan::usable_memory_gib(g, available);
    device = g.name;
    if (g.unified_memory)
      device += available > 0
                    ? " (unified memory: " + plan::format_bytes(gib * kGiB) + " available on this host)"
                    : " (unified memory: " + std::to_string(std::lround(plan::kUnifiedMemoryUsableFraction * 100)) +
                          "% of " + plan::format_bytes(g.memory_gib * kGiB) + " shared with the CPU)";
  };
  // An explicit size or model in the recipe beats detection: the run may target other machines
  // than the one resolving it.
  if (!ex.device_memory.empty()) {
    const auto parsed = plan::parse_memory_gib(ex.device_memory);
    if (!parsed) return;  // reported by check_ranges
    gib = *parsed;
    device = "executor.device_memory=\"" + ex.device_memory + "\"";
  } else if (!ex.gpu_model.empty()) {
    const auto gpu = plan::find_gpu(ex.gpu_model);
    if (!gpu) {
      std::vector<std::string> names;
      for (const auto& g : plan::gpu_catalog()) names.push_back(g.name);
      ctx.violation(
          "executor.gpu_model",
          "executor.gpu_model=\"" + ex.gpu_model + "\" is not a known GPU" + did_you_mean(ex.gpu_model, names),
          "use one of " + join_or(names) + ", or state the size with executor.device_memory=\"80GiB\"");
      return;
    }
    // A unified-memory GPU that is also the one visible here: what this host has available.
    const auto here = plan::find_gpu(facts.gpu_name);
    set_device(*gpu, here && here->name == gpu->name);
  } else if (const auto gpu = plan::find_gpu(facts.gpu_name); gpu && gpu->unified_memory) {
    set_device(*gpu, true);
  } else if (facts.gpu_memory_gib > 0) {
    gib = facts.gpu_memory_gib;
    device = facts.gpu_name.empty() ? "the visible GPU" : facts.gpu_name;
  } else if (gpu) {
    set_device(*gpu, false);
  } else {
    const auto h100 = plan::find_gpu("H100-80GB");
    gib = h100->memory_gib;
    device = "H100-80GB (assumed)";
    ctx.warn("no GPU model is known (no GPU visible, executor.gpu_model unset): the memory check assumes H100-80GB (" +
             fmt_double(gib) + " GiB); set executor.gpu_model or executor.device_memory");
  }
  ex.device_memory_gib = gib;

  // With a broken layout (tp not dividing heads, world ≠ tp·pp·cp·dp) the estimate describes a
  // run that cannot exist; those violations come first.
  for (const auto& v : ctx.out.violations)
    if (v.path.rfind("parallelism.", 0) == 0) return;
  const double device_bytes = gib * kGiB;
  if (static_cast<double>(p.memory.total) > device_bytes)
    ctx.violation("memory",
                  "estimated memory per rank " + plan::format_bytes(static_cast<double>(p.memory.total)) + " exceeds " +
                      plan::format_bytes(device_bytes) + " of " + device + " (tp=" + std::to_string(p.parallelism.tp) +
                      ", pp=" + std::to_string(p.parallelism.pp) + ", dp=" + std::to_string(p.parallelism.dp) +
                      ", micro_batch_size=" + std::to_string(p.trainer.micro_batch_size) +
                      "): " + describe_memory(p.memory),
                  remedies(ctx, device_bytes), "parallelism.tp");
}

}  // namespace recipe::dsl::detail
