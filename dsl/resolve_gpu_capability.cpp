// The target GPU must run the CUDA kernels: they compute in bf16 on tensor cores, which need compute
// capability 8.0 or newer (Ampere on). A V100 (7.0) or a T4 (7.5) is refused here, before launch, with
// the GPU named, instead of failing at the first kernel launch on every rank.
// The GPU is the one executor.gpu_model names (the GPU catalog knows its compute capability), else
// the one detected on this host (ExecutorFacts); an unknown compute capability is not checked.
#include <string>

#include "plan/gpu_catalog.hpp"
#include "dsl/resolve_internal.hpp"

namespace recipe::dsl::detail {

namespace {

constexpr int kMinComputeCapability = 80;  // bf16 tensor cores (sm_80)

std::string cc_text(int cc) { return std::to_string(cc / 10) + "." + std::to_string(cc % 10); }

}  // namespace

void check_gpu_capability(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  if (p.trainer.device != plan::Device::cuda) return;
  int cc = 0;
  std::string gpu, path;
  if (!p.executor.gpu_model.empty()) {
    const auto spec = plan::find_gpu(p.executor.gpu_model);
    if (!spec) return;  // an unknown model is reported by the memory check
    cc = spec->compute_capability;
    gpu = "executor.gpu_model=\"" + p.executor.gpu_model + "\" (" + spec->name + ")";
    path = "executor.gpu_model";
  } else if (ctx.facts.has_gpu) {
    cc = ctx.facts.gpu_compute_capability;
    gpu = ctx.facts.gpu_name.empty() ? "the visible GPU" : "the visible GPU " + ctx.facts.gpu_name;
    path = "trainer.device";
  }
  if (cc == 0 || cc >= kMinComputeCapability) return;
  std::string fix = "train on a GPU of compute capability " + cc_text(kMinComputeCapability) +
                    " or newer (A100, A10, L4, L40, RTX 30/40/50 series, H100, H200, B200, GB10), or on the CPU "
                    "with trainer.device=\"cpu\"";
  if (path == "trainer.device") fix += "; if the run targets other machines, name their GPU with executor.gpu_model";
  ctx.violation(path,
                gpu + " has compute capability " + cc_text(cc) +
                    ": recipe's CUDA kernels compute in bf16 on "
                    "tensor cores, which need compute capability " +
                    cc_text(kMinComputeCapability) + " or newer",
                fix);
}

}  // namespace recipe::dsl::detail
