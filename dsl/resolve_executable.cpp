// Keys whose value this version of the engine cannot execute. The field table accepts them (they
// are part of the recipe language and other versions run them), but a plan that validates must
// run, so the resolver rejects them here, before any run dir or process exists, naming the key,
// the value and what is available instead.
#include "dsl/resolve_internal.hpp"

namespace recipe::dsl::detail {

void check_executable(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const plan::ParallelismConfig& par = p.parallelism;
  if (par.cp > 1 && !ctx.bad_paths.count("parallelism.cp"))
    ctx.violation("parallelism.cp",
                  "parallelism.cp=" + std::to_string(par.cp) +
                      ": context parallelism is not implemented in this version; available: cp=1 (tensor, pipeline "
                      "and data parallelism are)",
                  "set parallelism.cp=1");
  if (par.sequence_parallel && !ctx.bad_paths.count("parallelism.sequence_parallel"))
    ctx.violation("parallelism.sequence_parallel",
                  "parallelism.sequence_parallel=true: sequence parallelism is not implemented in this version; "
                  "available: false (tensor parallelism runs without it)",
                  "set parallelism.sequence_parallel=false");
  if (p.data.kind == plan::DataKind::sft && p.data.pack && !ctx.bad_paths.count("data.pack"))
    ctx.violation("data.pack",
                  "data.pack=true with data.kind=sft: packing needs per-sample attention masks, not yet available in "
                  "this version; available: data.pack=false (one conversation per sequence, padded at the end)",
                  "set data.pack=false");
  if (p.peft.kind == plan::PeftKind::lora && !ctx.bad_paths.count("peft.kind"))
    ctx.violation("peft.kind",
                  "peft.kind=\"lora\": LoRA is not implemented in this version; use peft.kind=\"none\" for a full "
                  "fine-tune",
                  "set peft.kind=\"none\" (every weight trains)");
}

}  // namespace recipe::dsl::detail
