// Backend selection and the default (unfused) compositions shared by both backends.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernels/ops.hpp"

namespace recipe::kernels {

void Backend::residual_norm_fwd(const ResidualNormFwdArgs& a) {
  add(a.residual, a.a, a.b);
  if (a.rms)
    rmsnorm_fwd({.out = a.out, .rstd = a.rstd, .inp = a.residual, .weight = a.weight, .eps = a.eps});
  else
    layernorm_fwd({.out = a.out,
                   .mean = a.mean,
                   .rstd = a.rstd,
                   .inp = a.residual,
                   .weight = a.weight,
                   .bias = a.bias,
                   .eps = a.eps});
}

void Backend::gelu_rebuild_linear_bwd(const GeluRebuildLinearBwdArgs& a) {
  gelu_fwd(a.act, a.pre);
  linear_bwd({.dinp = a.dinp,
              .dweight = a.dweight,
              .dbias = a.dbias,
              .dout = a.dout,
              .inp = a.act,
              .weight = a.weight,
              .dinp_gelu_aux = a.pre,
              .dinp_sum = a.dinp_sum});
}

void Backend::swiglu_bwd_rebuild(const SwigluBwdRebuildArgs& a) {
  if (a.act.defined()) swiglu_fwd(a.act, a.gate_up);
  swiglu_bwd(a.dgate_up, a.dout, a.gate_up);
}

// A backend without FP8 (none today: both implement them) cannot run trainer.precision = fp8.
namespace {
[[noreturn]] void no_fp8(const Backend& b, const char* op) {
  throw std::logic_error("the " + b.name() + " backend has no " + op + " (trainer.precision=fp8)");
}
}  // namespace
void Backend::fp8_amax(Tensor, Tensor) { no_fp8(*this, "fp8_amax"); }
void Backend::fp8_quantize(const Fp8QuantizeArgs&) { no_fp8(*this, "fp8_quantize"); }
void Backend::fp8_quantize_swiglu_bwd(const Fp8QuantizeSwigluBwdArgs&) { no_fp8(*this, "fp8_quantize_swiglu_bwd"); }
void Backend::fp8_swiglu_fwd_quantize(const Fp8SwigluFwdQuantizeArgs&) { no_fp8(*this, "fp8_swiglu_fwd_quantize"); }
void Backend::fp8_amax_history(const Fp8AmaxHistoryArgs&) { no_fp8(*this, "fp8_amax_history"); }
void Backend::fp8_transpose(Tensor, Tensor) { no_fp8(*this, "fp8_transpose"); }
void Backend::fp8_linear_fwd(const Fp8LinearFwdArgs&) { no_fp8(*this, "fp8_linear_fwd"); }
void Backend::fp8_linear_bwd(const Fp8LinearBwdArgs&) { no_fp8(*this, "fp8_linear_bwd"); }

void Backend::attention_block_fwd(const AttentionBlockFwdArgs&) {
  throw std::logic_error(name() +
                         " backend: attention_block_fwd (ring attention, parallelism.cp > 1) is not implemented");
}

void Backend::attention_block_bwd(const AttentionBlockBwdArgs&) {
  throw std::logic_error(name() +
                         " backend: attention_block_bwd (ring attention, parallelism.cp > 1) is not implemented");
}

AttentionPlan Backend::prepare_attention_blocks(const AttentionShape&, const std::vector<AttentionBlockShape>&) {
  throw std::logic_error(name() + " backend: ring attention blocks (parallelism.cp > 1) are not implemented");
}

void Backend::grad_norm_clip(Tensor out, Tensor grads, float clip, Tensor losses, double loss_sum_limit) {
  if (out.dtype != DType::f32 || out.numel() != 2)
    throw std::invalid_argument("grad_norm_clip: out " + out.shape_str() + " must be f32 with 2 elements");
  const double norm = std::sqrt(sum_squares(grads));
  bool skip = !std::isfinite(norm);
  if (losses.defined()) {
    if (losses.dtype != DType::f32)
      throw std::invalid_argument("grad_norm_clip: losses " + losses.shape_str() + " must be f32");
    std::vector<float> h(size_t(losses.numel()));
    to_host(h.data(), losses);
    double s = 0;
    for (float v : h) s += double(v);
    skip = skip || !std::isfinite(s) || s > loss_sum_limit;
  }
  const double scale = clip > 0 ? std::min(1.0, double(clip) / (norm + 1e-6)) : 1.0;
  const float host[2] = {float(norm), skip ? std::numeric_limits<float>::quiet_NaN() : float(scale)};
  from_host(out, host);
}

void Backend::norm_loss_sums(Tensor sums, const std::vector<Tensor>& grads, Tensor losses) {
  if (sums.dtype != DType::f64 || sums.numel() != 2)
    throw std::invalid_argument("norm_loss_sums: sums " + sums.shape_str() + " must be f64 with 2 elements");
  double h[2] = {0.0, 0.0};
  for (const Tensor& g : grads) h[0] += sum_squares(g);
  if (losses.defined()) {
    if (losses.dtype != DType::f32)
      throw std::invalid_argument("norm_loss_sums: losses " + losses.shape_str() + " must be f32");
    std::vector<float> l(size_t(losses.numel()));
    to_host(l.data(), losses);
    for (float v : l) h[1] += double(v);
  }
  from_host(sums, h);
}

void Backend::clip_from_sums(Tensor out, Tensor sums, float clip, double loss_sum_limit) {
  if (out.dtype != DType::f32 || out.numel() != 2)
    throw std::invalid_argument("clip_from_sums: out " + out.shape_str() + " must be f32 with 2 elements");
  if (sums.dtype != DType::f64 || sums.numel() != 2)
    throw std::invalid_argument("clip_from_sums: sums " + sums.shape_str() + " must be f64 with 2 elements");
  double h[2];
  to_host(h, sums);
  const double norm = std::sqrt(h[0]);
  const bool skip = !std::isfinite(norm) || !std::isfinite(h[1]) || h[1] > loss_sum_limit;
  const double scale = clip > 0 ? std::min(1.0, double(clip) / (norm + 1e-6)) : 1.0;
  const float host[2] = {float(norm), skip ? std::numeric_limits<float>::quiet_NaN() : float(scale)};
  from_host(out, host);
}

void Backend::begin_grad_writes(const std::vector<Tensor>& grads) {
  for (const Tensor& g : grads) zero(g);
}
void Backend::end_grad_writes() {}

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

namespace recipe::kernels {

namespace {
[[noreturn]] void no_vocab_parallel(const Backend& b) {
  throw std::logic_error("the " + b.name() +
                         " backend has no vocab-parallel cross-entropy; "
                         "tensor parallelism (parallelism.tp > 1) cannot run on it");
}
}  // namespace

void Backend::vocab_parallel_ce_max(Tensor, Tensor, int) { no_vocab_parallel(*this); }
void Backend::vocab_parallel_ce_sums(const VocabParallelCeSumsArgs&) { no_vocab_parallel(*this); }
void Backend::vocab_parallel_ce_finish(const VocabParallelCeFinishArgs&) { no_vocab_parallel(*this); }

}  // namespace recipe::kernels
