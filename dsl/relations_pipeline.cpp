// Rules of pipeline parallelism: stages, virtual stages, explicit and balanced layer splits (part
// of check_relations).
#include <algorithm>
#include <cstdint>

#include "dsl/suggest.hpp"
#include "dsl/check_require.hpp"
#include "dsl/relations.hpp"

namespace recipe::dsl::detail {

void check_pipeline(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const plan::ModelConfig& m = p.model;
  const plan::ParallelismConfig& par = p.parallelism;
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
}

}  // namespace recipe::dsl::detail
