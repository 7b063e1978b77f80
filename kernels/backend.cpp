// Backend selection and the default (unfused) compositions shared by both backends.
#include <stdexcept>

#include "kernels/ops.hpp"

namespace recipe::kernels {

void Backend::residual_norm_fwd(Tensor residual, Tensor out, Tensor mean, Tensor rstd, Tensor a,
                                Tensor b, Tensor weight, Tensor bias, float eps, bool rms) {
  add(residual, a, b);
  if (rms)
    rmsnorm_fwd(out, rstd, residual, weight, eps);
  else
    layernorm_fwd(out, mean, rstd, residual, weight, bias, eps);
}

std::unique_ptr<Backend> make_backend(Device device, const BackendOptions& opts) {
  return device == Device::cuda ? make_cuda_backend(opts) : make_cpu_backend(opts);
}

bool built_with_cuda() {
#ifdef RECIPE_WITH_CUDA
  return true;
#else
  return false;
#endif
}

#ifndef RECIPE_WITH_CUDA
// A CPU-only build (no nvcc at configure time) has no CUDA backend; the CLI turns this into
// "no GPU: running on CPU" for --device auto and into an actionable error for --device cuda.
std::unique_ptr<Backend> make_cuda_backend(const BackendOptions&) {
  throw std::runtime_error(
      "this recipe binary was built without CUDA (nvcc was not found when CMake configured it); "
      "rebuild on a machine with the CUDA toolkit or use --device cpu");
}
GpuInfo query_gpus() { return {}; }
#endif

}  // namespace recipe::kernels
