// Keys whose value this version of the engine cannot execute. The field table accepts them (they
// are part of the recipe language and other versions run them), but a plan that validates must
// run, so the resolver rejects them here, before any run dir or process exists, naming the key,
// the value and what is available instead.
#include "dsl/resolve_internal.hpp"

namespace recipe::dsl::detail {

namespace {

// Context parallelism (ring attention, core/model/ring_attention.hpp) runs on CPU ranks and on GPUs
// (the CUDA backend runs its blocks through cuDNN's fused attention, with no own-kernel path), with
// TP, DP, PP and ZeRO-1. What it does not take yet is rejected here, one violation per conflict.
void check_context_parallel(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const int cp = p.parallelism.cp;
  if (cp <= 1 || ctx.bad_paths.count("parallelism.cp")) return;
  const std::string cps = "parallelism.cp=" + std::to_string(cp);
  if (p.trainer.device != plan::Device::cpu) {
    // CP on GPUs: tests/core/parallel/test_context_parallel.cpp's CUDA case (CP2, CP2×DP2, CP2×TP2
    // against one GPU) and the CUDA block-attention and CP-position op tests pass on H100s
    // (bench/results/2026-11-27-multi-gpu.md, "Context parallelism on GPUs").
    if (p.kernels.attention == plan::Attention::fallback)
      ctx.violation("kernels.attention",
                    cps +
                        " with kernels.attention=\"fallback\": ring attention on CUDA runs its blocks through "
                        "cuDNN's fused attention; the engine's own attention kernels run only whole causal "
                        "sequences; available: kernels.attention=\"cudnn\" with context parallelism",
                    "set kernels.attention=\"cudnn\" or parallelism.cp=1");
    // cuDNN's fused attention (forward and backward, bf16) takes head dims that are multiples of 8
    // up to 256 (Hopper; 128 for the backward before Hopper, which the backend says at start).
    const int D = p.model.head_dim;
    if ((D % 8 != 0 || D > 256) && !ctx.bad_paths.count("model.head_dim"))
      ctx.violation("model.head_dim",
                    cps + " on CUDA with model.head_dim=" + std::to_string(D) +
                        ": ring attention runs cuDNN's fused attention, which takes head_dim a multiple of 8 up to "
                        "256; available: such a head_dim, trainer.device=\"cpu\", or parallelism.cp=1",
                    "set parallelism.cp=1, or choose model.hidden_size / model.num_attention_heads a multiple of 8 "
                    "up to 256");
  }
  if (p.data.kind == plan::DataKind::sft && p.data.pack)
    ctx.violation("data.pack",
                  cps +
                      " with data.pack=true: packed samples need attention restricted to each sample, which ring "
                      "attention does not take in this version; available: data.pack=false (one conversation per "
                      "sequence) with context parallelism, or cp=1 with packing",
                  "set data.pack=false or parallelism.cp=1");
  if (p.peft.kind == plan::PeftKind::lora && p.peft.dropout > 0)
    ctx.violation("peft.dropout",
                  cps + " with peft.dropout=" + fmt_double(p.peft.dropout) +
                      ": the adapter dropout mask is keyed by a token's row in the sequence, which context "
                      "parallelism reorders; available: peft.dropout=0 with context parallelism",
                  "set peft.dropout=0 or parallelism.cp=1");
  if (p.parallelism.sequence_parallel)
    ctx.violation("parallelism.sequence_parallel",
                  cps +
                      " with parallelism.sequence_parallel=true: the two together are not implemented in this "
                      "version; available: either one alone",
                  "set parallelism.sequence_parallel=false or parallelism.cp=1");
  if (p.parallelism.virtual_pp > 1)
    ctx.violation("parallelism.virtual_pp",
                  cps + " with parallelism.virtual_pp=" + std::to_string(p.parallelism.virtual_pp) +
                      ": context parallelism with interleaved pipeline stages is not implemented in this version; "
                      "available: either one alone (cp with the plain 1F1B pipeline runs)",
                  "set parallelism.virtual_pp=1 or parallelism.cp=1");
}

}  // namespace

void check_executable(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  check_context_parallel(ctx);
  // Sequence parallelism and interleaved stages were each proven against one process, not together.
  if (p.parallelism.sequence_parallel && p.parallelism.virtual_pp > 1 && !ctx.bad_paths.count("parallelism.virtual_pp"))
    ctx.violation("parallelism.virtual_pp",
                  "parallelism.virtual_pp=" + std::to_string(p.parallelism.virtual_pp) +
                      " with parallelism.sequence_parallel=true: the two together are not implemented in this "
                      "version; available: either one alone",
                  "set parallelism.virtual_pp=1 or parallelism.sequence_parallel=false");
  // The communication overlap splits linears' GEMMs into row blocks (the TP ranks' with sequence
  // parallelism, tp_overlap_chunks without); an adapter's dropout mask and FP8's per-tensor scales
  // are computed per call over the whole rows. (tp = 1 is refused by check_relations.)
  if (p.parallelism.tp_comm_overlap && p.parallelism.tp > 1) {
    if (p.peft.kind == plan::PeftKind::lora)
      ctx.violation("parallelism.tp_comm_overlap",
                    "parallelism.tp_comm_overlap=true with peft.kind=\"lora\": the overlapped linears run their GEMMs "
                    "one block of token rows at a time, which the adapters' path (whole-row scratch and dropout rows) "
                    "does not take in this version; available: LoRA under tensor parallelism without the overlap",
                    "set parallelism.tp_comm_overlap=false");
    if (p.trainer.precision == plan::Precision::fp8)
      ctx.violation("parallelism.tp_comm_overlap",
                    "parallelism.tp_comm_overlap=true with trainer.precision=\"fp8\": FP8 scales each GEMM operand "
                    "by its amax over the whole call, which per-row-block GEMMs would change; not implemented in this "
                    "version; available: FP8 under tensor parallelism without the overlap",
                    "set parallelism.tp_comm_overlap=false, or trainer.precision=\"bf16\"");
  }
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
  // qk-norm on CUDA: one warp per head vector, at most 8 of its values a lane (kernels/cuda/qk_norm.cu).
  if (p.model.qk_norm && p.trainer.device != plan::Device::cpu && p.model.head_dim > 256 &&
      !ctx.bad_paths.count("model.head_dim"))
    ctx.violation("model.head_dim",
                  "model.qk_norm=true on CUDA with model.head_dim=" + std::to_string(p.model.head_dim) +
                      ": the CUDA qk-norm kernels take head_dim <= 256; available: head_dim <= 256, or "
                      "trainer.device=\"cpu\"",
                  "set model.head_dim to at most 256");
  if (packed && p.trainer.device != plan::Device::cpu && p.model.head_dim > 128 &&
      !ctx.bad_paths.count("model.head_dim"))
    ctx.violation("data.pack",
                  "data.pack=true on CUDA with model.head_dim=" + std::to_string(p.model.head_dim) +
                      ": packed samples run the own CUDA attention kernels, which take head_dim <= 128; available: "
                      "head_dim <= 128, trainer.device=\"cpu\", or data.pack=false (cuDNN attention)",
                  "set data.pack=false");
}

}  // namespace recipe::dsl::detail
