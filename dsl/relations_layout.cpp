// Rules of the rank layout: context parallelism's sequence split, and world = tp·pp·cp·dp with the
// executor supplying that world (part of check_relations).
#include <algorithm>
#include <cstdint>
#include <numeric>

#include "dsl/suggest.hpp"
#include "dsl/check_require.hpp"
#include "dsl/relations.hpp"

namespace recipe::dsl::detail {

void check_context_parallel(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const plan::ModelConfig& m = p.model;
  const plan::ParallelismConfig& par = p.parallelism;
  // Context parallelism: each rank holds two mirrored chunks of the sequence (load balance with causal masking).
  if (par.cp > 1 && m.seq_length % (2 * par.cp) != 0)
    ctx.violation("parallelism.cp",
                  "parallelism.cp=" + str(par.cp) + " needs model.seq_length divisible by 2·cp=" + str(2 * par.cp) +
                      ", got seq_length=" + str(m.seq_length),
                  "choose cp so that seq_length % (2·cp) == 0");
}

void check_world_size(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const plan::ParallelismConfig& par = p.parallelism;
  const plan::TrainerConfig& t = p.trainer;
  const plan::ExecutorConfig& ex = p.executor;
  const int tp = par.tp, pp = par.pp;
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
}

}  // namespace recipe::dsl::detail
