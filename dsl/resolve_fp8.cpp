// trainer.precision = "fp8": the checks that make an FP8 plan run (validates ⇒ runs). What this
// version executes: tensorwise current scaling or delayed scaling (an amax history per tensor),
// E4M3 forward, E5M2 or E4M3 gradients, any subset of the four block linears, full training or
// LoRA (the frozen base in FP8, the adapters in bf16), on a GPU of compute capability ≥ 8.9 (Ada,
// Hopper, Blackwell) or emulated on CPU (kernels/cpu/fp8.cpp). Every FP8 GEMM dimension (in and
// out features per TP rank, tokens per micro-batch) must be a multiple of 16, as cuBLASLt's FP8
// kernels require.
#include <string>
#include <vector>

#include "plan/gpu_catalog.hpp"
#include "dsl/resolve_internal.hpp"
#include "dsl/suggest.hpp"
#include "plan/fp8.hpp"
#include "plan/model_family.hpp"
#include "plan/lora.hpp"

namespace recipe::dsl::detail {
namespace {

// A history longer than this is a typo (TE's default is 1024; each step of it is 48 bytes per layer).
constexpr int kMaxAmaxHistory = 65536;

std::string cc_text(int cc) { return std::to_string(cc / 10) + "." + std::to_string(cc % 10); }

// The GPU the plan targets: executor.gpu_model when set (the run may target other machines),
// else the visible GPU. cc 0 = not known.
struct TargetGpu {
  std::string what;
  int cc = 0;
};
TargetGpu target_gpu(const ResolveContext& ctx) {
  const plan::ExecutorConfig& ex = ctx.plan().executor;
  if (!ex.gpu_model.empty()) {
    const auto gpu = plan::find_gpu(ex.gpu_model);  // an unknown model is reported by the memory check
    if (!gpu) return {"executor.gpu_model=\"" + ex.gpu_model + "\"", 0};
    return {"executor.gpu_model=\"" + ex.gpu_model + "\" (" + gpu->name + ")", gpu->compute_capability};
  }
  const ExecutorFacts& f = ctx.facts;
  if (f.gpu_compute_capability > 0) return {"the visible GPU (" + f.gpu_name + ")", f.gpu_compute_capability};
  if (const auto gpu = plan::find_gpu(f.gpu_name)) return {gpu->name, gpu->compute_capability};
  return {"", 0};
}

void check_gpu(ResolveContext& ctx) {
  const TargetGpu gpu = target_gpu(ctx);
  if (gpu.cc == 0) {
    if (gpu.what.empty())
      ctx.warn(
          "trainer.precision=fp8: no GPU model is known (no GPU visible, executor.gpu_model unset); FP8 needs "
          "compute capability >= 8.9 (Ada, Hopper or newer): set executor.gpu_model to check it here");
    else
      ctx.warn("trainer.precision=fp8: the compute capability of " + gpu.what +
               " is not known; FP8 needs >= 8.9 (Ada, Hopper or newer)");
    return;
  }
  if (gpu.cc < 89)
    ctx.violation("trainer.precision",
                  "trainer.precision=\"fp8\" on " + gpu.what + " of compute capability " + cc_text(gpu.cc) +
                      ": FP8 tensor-core GEMMs need compute capability >= 8.9 (Ada: L4, L40, L40S, RTX 4090; "
                      "Hopper: H100, H200; Blackwell)",
                  "use trainer.precision=\"bf16\" on this GPU, or run on an Ada/Hopper GPU");
}

void check_shapes(ResolveContext& ctx, unsigned mask) {
  const plan::Plan& p = ctx.plan();
  const int tp = p.parallelism.tp;
  const std::string per_rank = tp > 1 ? " per TP rank (parallelism.tp=" + std::to_string(tp) + ")" : "";
  for (const plan::Fp8LinearShape& s : plan::block_linear_shapes(p)) {
    if (!(mask & s.bit)) continue;
    for (const auto& [side, n] : {std::pair{"in", s.in}, std::pair{"out", s.out}}) {
      if (n % 16 == 0) continue;
      ctx.violation("fp8.linears",
                    std::string("fp8.linears includes ") + s.name + ", whose " + side + " features" + per_rank +
                        " are " + std::to_string(n) +
                        ", not a multiple of 16: cuBLASLt's FP8 GEMMs need every dimension a multiple of 16",
                    std::string("leave ") + s.name +
                        " out of fp8.linears, or choose model sizes (hidden, heads·head_dim, ffn) whose shards are "
                        "multiples of 16");
    }
  }
  const int64_t tokens = int64_t(p.trainer.micro_batch_size) * p.model.seq_length;
  if (tokens % 16)
    ctx.violation(
        "trainer.micro_batch_size",
        "trainer.precision=\"fp8\" with trainer.micro_batch_size=" + std::to_string(p.trainer.micro_batch_size) +
            " × model.seq_length=" + std::to_string(p.model.seq_length) + " = " + std::to_string(tokens) +
            " tokens per micro-batch, not a multiple of 16 (the K dimension of the FP8 weight-gradient GEMM)",
        "make micro_batch_size · seq_length a multiple of 16");
}

}  // namespace

void check_fp8(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  // peft.base_fp8_only acts on the frozen base of a LoRA fine-tune in FP8 and on nothing else.
  // (A resolved plan read back sets every key: those warnings are for what a person wrote.)
  const bool written = !ctx.tree.resolved_plan;
  if (written && ctx.was_set("peft.base_fp8_only") && p.peft.base_fp8_only &&
      (p.trainer.precision != plan::Precision::fp8 || p.peft.kind != plan::PeftKind::lora))
    ctx.warn(
        "peft.base_fp8_only=true has no effect: it holds the frozen base of a LoRA fine-tune (peft.kind=\"lora\") "
        "with trainer.precision=\"fp8\" in FP8, and this plan has no such base");
  if (p.trainer.precision != plan::Precision::fp8 || ctx.bad_paths.count("trainer.precision")) {
    for (const char* key : {"fp8.scaling", "fp8.amax_history_len", "fp8.amax_compute", "fp8.forward_format",
                            "fp8.backward_format", "fp8.linears"})
      if (written && ctx.was_set(key)) {
        ctx.warn(std::string(key) + " is set but trainer.precision is not \"fp8\": the fp8 section has no effect");
        break;
      }
    return;
  }
  const plan::Fp8Config& f = p.fp8;
  if (f.scaling == plan::Fp8Scaling::delayed && !ctx.bad_paths.count("fp8.amax_history_len") &&
      (f.amax_history_len < 1 || f.amax_history_len > kMaxAmaxHistory))
    ctx.violation("fp8.amax_history_len",
                  "fp8.amax_history_len=" + std::to_string(f.amax_history_len) +
                      " with fp8.scaling=\"delayed\": the history keeps 1 to " + std::to_string(kMaxAmaxHistory) +
                      " steps per tensor",
                  "set fp8.amax_history_len between 1 and " + std::to_string(kMaxAmaxHistory) +
                      " (Transformer Engine's default: 1024)");
  if (f.scaling != plan::Fp8Scaling::delayed)
    for (const char* key : {"fp8.amax_history_len", "fp8.amax_compute"})
      if (ctx.was_set(key)) ctx.warn(std::string(key) + " is set but fp8.scaling is not \"delayed\": it has no effect");
  if (f.forward_format == plan::Fp8Format::e5m2 && !ctx.bad_paths.count("fp8.forward_format"))
    ctx.violation("fp8.forward_format",
                  "fp8.forward_format=\"e5m2\": activations and weights need E4M3's precision (3 mantissa bits); "
                  "E5M2's range is for gradients (fp8.backward_format), as in Transformer Engine's recipes",
                  "set fp8.forward_format=\"e4m3\"");
  const plan::Fp8Linears linears = plan::fp8_linears(p);
  for (const std::string& problem : linears.problems)
    ctx.violation("fp8.linears", "fp8.linears: " + problem,
                  "use " + join_or(plan::lora_target_names(plan::model_family(p.model))));
  if (linears.problems.empty() && linears.mask == 0)
    ctx.violation("fp8.linears", "fp8.linears names no linear, so nothing would run in FP8",
                  "name the linears (e.g. fp8.linears={\"all-linear\"}), or use trainer.precision=\"bf16\"");
  if (ctx.shape_ok) check_shapes(ctx, linears.mask);
  if (p.trainer.device == plan::Device::cuda) {
    check_gpu(ctx);
  } else {
    ctx.warn(
        "trainer.precision=fp8 on CPU: FP8 is emulated (each GEMM operand rounded to E4M3/E5M2 with the CUDA "
        "path's scales, then computed in fp32); it checks numerics, it is not faster");
  }
}

}  // namespace recipe::dsl::detail
