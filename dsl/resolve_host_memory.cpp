// CPU runs on the local executor: every rank runs on the launching host and holds the per-rank
// memory estimate (plan.memory), so ranks × estimate must fit the host's available memory. Without
// this check a plan that validates dies at start-up with a bare std::bad_alloc on every rank.
// (GPU plans are checked against the device in resolve_memory.cpp.)
#include <algorithm>
#include <cmath>

#include "dsl/resolve_internal.hpp"
#include "plan/memory_estimate.hpp"

namespace recipe::dsl::detail {

void check_host_memory(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const double host_gib = ctx.facts.host_memory_gib;
  if (!ctx.shape_ok || host_gib <= 0 || p.trainer.device != plan::Device::cpu ||
      p.executor.kind != plan::ExecutorKind::local)
    return;
  for (const auto& v : ctx.out.violations)
    if (v.path.rfind("parallelism.", 0) == 0 || v.path == "memory") return;  // the layout itself is wrong
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const double per_rank = static_cast<double>(p.memory.total);
  const int ranks = std::max(1, ctx.world);
  const double host = host_gib * kGiB;
  if (per_rank * ranks <= host) return;
  const auto fitting = static_cast<int64_t>(std::floor(host / std::max(per_rank, 1.0)));
  std::string fix;
  if (ranks > 1 && fitting >= 1) fix = "use executor.cpu_ranks=" + std::to_string(fitting) + " or fewer, ";
  fix += "lower trainer.micro_batch_size (" + std::to_string(p.trainer.micro_batch_size) +
         ") or model.seq_length, or pick a smaller model (gpt_tiny and llama_tiny suit a CPU)";
  ctx.violation("memory",
                "estimated host memory " + std::to_string(ranks) + " CPU rank" + (ranks == 1 ? "" : "s") + " × " +
                    plan::format_bytes(per_rank) + " = " + plan::format_bytes(per_rank * ranks) + " exceeds the " +
                    plan::format_bytes(host) + " available on this host (MemAvailable)",
                fix, p.executor.cpu_ranks > 1 ? "executor.cpu_ranks" : "trainer.micro_batch_size");
}

}  // namespace recipe::dsl::detail
