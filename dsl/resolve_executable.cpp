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
  // Packing (several conversations per sequence) gives RoPE and attention each token's position in
  // its sample (ModelShape::packed). Learned position embeddings do not take them yet, and on CUDA
  // packed attention runs the own kernels (head_dim <= 128), not cuDNN.
  const bool packed = p.data.kind == plan::DataKind::sft && p.data.pack && !ctx.bad_paths.count("data.pack");
  if (packed && p.model.position_embedding == plan::PositionEmbedding::learned &&
      !ctx.bad_paths.count("model.position_embedding"))
    ctx.violation("data.pack",
                  "data.pack=true with data.kind=sft and model.position_embedding=\"learned\": packed samples need "
                  "positions restarting per sample, which learned position embeddings do not take in this version; "
                  "available: packing with model.position_embedding=\"rope\" (Llama-style models), or "
                  "data.pack=false (one conversation per sequence, padded at the end)",
                  "set data.pack=false, or use a RoPE model");
  if (packed && p.trainer.device != plan::Device::cpu && p.model.head_dim > 128 &&
      !ctx.bad_paths.count("model.head_dim"))
    ctx.violation("data.pack",
                  "data.pack=true on CUDA with model.head_dim=" + std::to_string(p.model.head_dim) +
                      ": packed samples run the own CUDA attention kernels, which take head_dim <= 128; available: "
                      "head_dim <= 128, trainer.device=\"cpu\", or data.pack=false (cuDNN attention)",
                  "set data.pack=false");
}

}  // namespace recipe::dsl::detail
