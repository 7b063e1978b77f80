// The CUDA backend's FP8 ops (the contract is in kernels/ops.hpp; the CPU twin kernels/cpu/fp8.cpp):
// argument checks, then the casts of fp8.cu and the FP8 GEMMs of cublaslt_fp8.cpp. Parameter
// gradients follow the backend's first-write rule (GradWriteTracker): beta = 0 / "=" on a
// gradient's first write of the step.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/cublaslt_linear.hpp"
#include "kernels/cuda/cuda_backend.hpp"
#include "kernels/cuda/fp8_kernels.hpp"
#include "kernels/cuda/op_checks.hpp"

namespace recipe::kernels::cuda {

namespace {

void expect_fp8(const char* op, const char* name, const Tensor& t) {
  if (!t.defined()) bad_arg(op, std::string(name) + " is undefined");
  if (t.device != Device::cuda) bad_arg(op, std::string(name) + " " + t.shape_str() + " is not a CUDA tensor");
  if (!is_fp8(t.dtype)) bad_arg(op, std::string(name) + " " + t.shape_str() + " must be e4m3 or e5m2");
}
void expect_scale(const char* op, const char* name, const Tensor& t) {
  expect(op, name, t, DType::f32);
  expect_numel(op, name, t, 1);
  // cuBLASLt's A/B scale pointers must be 16-byte aligned (else its matmul, not its heuristic,
  // answers NOT_SUPPORTED); amax shares the rule so every FP8 scalar can feed a GEMM.
  if (reinterpret_cast<uintptr_t>(t.ptr) % 16)
    bad_arg(op, std::string(name) + " is not 16-byte aligned (cuBLASLt's FP8 scale pointers must be)");
}
cudaDataType_t cuda_type(DType t) { return t == DType::e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3; }
CublasLtLinear::Fp8Operand operand(const Tensor& q, const Tensor& scale_inv) {
  return {q.ptr, cuda_type(q.dtype), scale_inv.as<float>()};
}
void* ptr_or_null(const Tensor& t) { return t.defined() ? t.ptr : nullptr; }

}  // namespace

void CudaBackend::fp8_amax(Tensor amax, Tensor x) {
  const char* op = "fp8_amax";
  expect(op, "x", x, DType::bf16);
  expect_scale(op, "amax", amax);
  fp8_amax_bf16(amax.as<float>(), x.ptr, x.numel(), stream_);
}

void CudaBackend::fp8_quantize(const Fp8QuantizeArgs& a) {
  const char* op = "fp8_quantize";
  expect(op, "inp", a.inp, DType::bf16);
  expect_scale(op, "amax", a.amax);
  expect_scale(op, "scale_inv", a.scale_inv);
  if (!a.out.defined() && !a.out_t.defined()) bad_arg(op, "out and out_t are both undefined");
  const int64_t n = a.inp.numel();
  if (a.cols <= 0 || n % a.cols)
    bad_arg(op, "inp " + a.inp.shape_str() + " is not rows of cols=" + std::to_string(a.cols));
  if (a.out.defined()) expect_fp8(op, "out", a.out), expect_numel(op, "out", a.out, n);
  if (a.out_t.defined()) expect_fp8(op, "out_t", a.out_t), expect_numel(op, "out_t", a.out_t, n);
  if (a.out.defined() && a.out_t.defined() && a.out.dtype != a.out_t.dtype)
    bad_arg(op, "out and out_t differ in format");
  if (a.amax_out.defined()) expect(op, "amax_out", a.amax_out, DType::f32), expect_numel(op, "amax_out", a.amax_out, 1);
  const DType fmt = a.out.defined() ? a.out.dtype : a.out_t.dtype;
  fp8_quantize_bf16(ptr_or_null(a.out), ptr_or_null(a.out_t), a.scale_inv.as<float>(), a.inp.ptr, a.amax.as<float>(),
                    static_cast<float*>(ptr_or_null(a.amax_out)), n / a.cols, a.cols, fmt == DType::e5m2, stream_);
}

void CudaBackend::fp8_transpose(Tensor out, Tensor inp) {
  const char* op = "fp8_transpose";
  expect_fp8(op, "inp", inp);
  expect_fp8(op, "out", out);
  if (inp.ndim != 2 || out.ndim != 2 || out.dim(0) != inp.dim(1) || out.dim(1) != inp.dim(0))
    bad_arg(op, "out " + out.shape_str() + " is not the transpose of inp " + inp.shape_str());
  if (out.dtype != inp.dtype) bad_arg(op, "out and inp differ in format");
  fp8_transpose_bytes(out.ptr, inp.ptr, inp.dim(0), inp.dim(1), stream_);
}

void CudaBackend::fp8_quantize_swiglu_bwd(const Fp8QuantizeSwigluBwdArgs& a) {
  const char* op = "fp8_quantize_swiglu_bwd";
  expect(op, "dout", a.dout, DType::bf16);
  expect(op, "gate_up", a.gate_up, DType::bf16);
  expect_scale(op, "amax", a.amax);
  expect_scale(op, "scale_inv", a.scale_inv);
  if (!a.out.defined() && !a.out_t.defined()) bad_arg(op, "out and out_t are both undefined");
  const int64_t two_f = a.gate_up.ndim >= 1 ? a.gate_up.dim(-1) : 0, F = two_f / 2;
  if (two_f <= 0 || two_f % 2)
    bad_arg(op, "gate_up " + a.gate_up.shape_str() + " must have an even last dimension [gate (F) | up (F)]");
  const int64_t n = a.gate_up.numel(), rows = n / two_f;
  expect_numel(op, "dout", a.dout, rows * F);
  if (a.out.defined()) expect_fp8(op, "out", a.out), expect_numel(op, "out", a.out, n);
  if (a.out_t.defined()) expect_fp8(op, "out_t", a.out_t), expect_numel(op, "out_t", a.out_t, n);
  if (a.out.defined() && a.out_t.defined() && a.out.dtype != a.out_t.dtype)
    bad_arg(op, "out and out_t differ in format");
  if (a.amax_out.defined()) expect(op, "amax_out", a.amax_out, DType::f32), expect_numel(op, "amax_out", a.amax_out, 1);
  const DType fmt = a.out.defined() ? a.out.dtype : a.out_t.dtype;
  fp8_quantize_swiglu_bwd_bf16(ptr_or_null(a.out), ptr_or_null(a.out_t), a.scale_inv.as<float>(), a.dout.ptr,
                               a.gate_up.ptr, a.amax.as<float>(), static_cast<float*>(ptr_or_null(a.amax_out)), rows, F,
                               fmt == DType::e5m2, stream_);
}

void CudaBackend::fp8_swiglu_fwd_quantize(const Fp8SwigluFwdQuantizeArgs& a) {
  const char* op = "fp8_swiglu_fwd_quantize";
  expect(op, "out", a.out, DType::bf16);
  expect(op, "gate_up", a.gate_up, DType::bf16);
  expect_fp8(op, "q", a.q);
  expect_scale(op, "amax", a.amax);
  expect_scale(op, "scale_inv", a.scale_inv);
  const int64_t F = a.out.ndim >= 1 ? a.out.dim(-1) : 0;
  if (F <= 0) bad_arg(op, "out " + a.out.shape_str() + " has no columns");
  const int64_t rows = a.out.numel() / F;
  expect_numel(op, "gate_up", a.gate_up, rows * 2 * F);
  expect_numel(op, "q", a.q, rows * F);
  if (a.amax_out.defined()) expect(op, "amax_out", a.amax_out, DType::f32), expect_numel(op, "amax_out", a.amax_out, 1);
  fp8_swiglu_fwd_quantize_bf16(a.out.ptr, a.q.ptr, a.scale_inv.as<float>(), a.gate_up.ptr, a.amax.as<float>(),
                               static_cast<float*>(ptr_or_null(a.amax_out)), rows, F, a.q.dtype == DType::e5m2,
                               stream_);
}

void CudaBackend::fp8_amax_history(const Fp8AmaxHistoryArgs& a) {
  const char* op = "fp8_amax_history";
  expect(op, "history", a.history, DType::f32);
  if (a.history.ndim != 2 || a.history.dim(1) < 1) bad_arg(op, "history must be [T, H], got " + a.history.shape_str());
  const int64_t T = a.history.dim(0);
  constexpr int64_t kCellFloats = 4;
  expect(op, "amax", a.amax, DType::f32);
  expect_numel(op, "amax", a.amax, T * kCellFloats);
  expect(op, "scale_amax", a.scale_amax, DType::f32);
  expect_numel(op, "scale_amax", a.scale_amax, T * kCellFloats);
  if (reinterpret_cast<uintptr_t>(a.scale_amax.ptr) % 16)
    bad_arg(op, "scale_amax is not 16-byte aligned (its cells feed fp8_quantize's amax)");
  fp8_amax_history_f32(a.history.as<float>(), a.amax.as<float>(), a.scale_amax.as<float>(), T, a.history.dim(1), a.push,
                       a.most_recent, stream_);
}

void CudaBackend::fp8_linear_fwd(const Fp8LinearFwdArgs& a) {
  const char* op = "fp8_linear_fwd";
  expect_fp8(op, "inp", a.inp);
  expect_fp8(op, "weight", a.weight);
  expect_scale(op, "inp_scale_inv", a.inp_scale_inv);
  expect_scale(op, "weight_scale_inv", a.weight_scale_inv);
  if (a.weight.ndim != 2) bad_arg(op, "weight must be [out, in], got " + a.weight.shape_str());
  const int64_t OC = a.weight.dim(0), IC = a.weight.dim(1), N = a.inp.numel() / IC;
  expect_numel(op, "inp", a.inp, N * IC);
  expect(op, "out", a.out, DType::bf16);
  expect_numel(op, "out", a.out, N * OC);
  expect_opt(op, "bias", a.bias, DType::bf16);
  if (a.bias.defined()) expect_numel(op, "bias", a.bias, OC);
  expect_opt(op, "pre_gelu", a.pre_gelu, DType::bf16);
  if (a.pre_gelu.defined()) expect_numel(op, "pre_gelu", a.pre_gelu, N * OC);
  linear_->fp8_gemm({.d = a.out.ptr,
                     .d_type = CUDA_R_16BF,
                     .a = operand(a.inp, a.inp_scale_inv),
                     .b = operand(a.weight, a.weight_scale_inv),
                     .M = N,
                     .N = OC,
                     .K = IC,
                     .bias = ptr_or_null(a.bias),
                     .pre_gelu = ptr_or_null(a.pre_gelu),
                     .fast_accum = a.fast_accum},
                    workspace());
}

void CudaBackend::fp8_linear_bwd(const Fp8LinearBwdArgs& a) {
  const char* op = "fp8_linear_bwd";
  expect(op, "dout", a.dout, DType::bf16);
  int64_t OC = 0, IC = 0;
  if (a.dinp.defined()) {
    expect_fp8(op, "weight_t", a.weight_t);
    if (a.weight_t.ndim != 2) bad_arg(op, "weight_t must be [in, out], got " + a.weight_t.shape_str());
    IC = a.weight_t.dim(0), OC = a.weight_t.dim(1);
  } else if (a.dweight.defined()) {
    expect_fp8(op, "dout_t", a.dout_t);
    expect_fp8(op, "inp_t", a.inp_t);
    if (a.dout_t.ndim != 2 || a.inp_t.ndim != 2) bad_arg(op, "dout_t and inp_t must be 2-D");
    OC = a.dout_t.dim(0), IC = a.inp_t.dim(0);
  } else if (a.dbias.defined()) {
    OC = a.dbias.numel();
  } else {
    return;
  }
  if (OC <= 0 || a.dout.numel() % OC)
    bad_arg(op, "dout " + a.dout.shape_str() + " is not rows of " + std::to_string(OC));
  const int64_t N = a.dout.numel() / OC;
  using W = GradWriteTracker::Write;
  if (a.dinp.defined()) {
    expect(op, "dinp", a.dinp, DType::bf16);
    expect_numel(op, "dinp", a.dinp, N * IC);
    expect_fp8(op, "dout_fp8", a.dout_fp8);
    expect_numel(op, "dout_fp8", a.dout_fp8, N * OC);
    expect_scale(op, "dout_scale_inv", a.dout_scale_inv);
    expect_scale(op, "weight_scale_inv", a.weight_scale_inv);
    expect_opt(op, "dinp_gelu_aux", a.dinp_gelu_aux, DType::bf16);
    if (a.dinp_gelu_aux.defined()) expect_numel(op, "dinp_gelu_aux", a.dinp_gelu_aux, N * IC);
    expect_opt(op, "dinp_sum", a.dinp_sum, DType::f32);
    if (a.dinp_sum.defined()) expect_numel(op, "dinp_sum", a.dinp_sum, IC);
    const bool os = N > 0 && a.dinp_sum.defined() && grad_writes_.whole_write(a.dinp_sum) == W::overwrite;
    linear_->fp8_gemm({.d = a.dinp.ptr,
                       .d_type = CUDA_R_16BF,
                       .a = operand(a.dout_fp8, a.dout_scale_inv),
                       .b = operand(a.weight_t, a.weight_scale_inv),
                       .M = N,
                       .N = IC,
                       .K = OC,
                       .dgelu_aux = ptr_or_null(a.dinp_gelu_aux),
                       .column_sum = static_cast<float*>(ptr_or_null(a.dinp_sum)),
                       .overwrite_sum = os},
                      workspace());
  } else if (a.dinp_sum.defined() || a.dinp_gelu_aux.defined()) {
    bad_arg(op, "dinp_sum and dinp_gelu_aux need dinp");
  }
  if (a.dweight.defined() && N > 0) {
    expect(op, "dweight", a.dweight, DType::f32);
    expect_numel(op, "dweight", a.dweight, OC * IC);
    expect_fp8(op, "dout_t", a.dout_t);
    expect_numel(op, "dout_t", a.dout_t, N * OC);
    expect_fp8(op, "inp_t", a.inp_t);
    expect_numel(op, "inp_t", a.inp_t, N * IC);
    expect_scale(op, "dout_scale_inv", a.dout_scale_inv);
    expect_scale(op, "inp_scale_inv", a.inp_scale_inv);
    const bool ow = grad_writes_.whole_write(a.dweight) == W::overwrite;
    linear_->fp8_gemm({.d = a.dweight.ptr,
                       .d_type = CUDA_R_32F,
                       .a = operand(a.dout_t, a.dout_scale_inv),
                       .b = operand(a.inp_t, a.inp_scale_inv),
                       .M = OC,
                       .N = IC,
                       .K = N,
                       .accumulate = !ow},
                      workspace());
  }
  if (a.dbias.defined() && N > 0) {
    expect(op, "dbias", a.dbias, DType::f32);
    expect_numel(op, "dbias", a.dbias, OC);
    const bool ob = grad_writes_.whole_write(a.dbias) == W::overwrite;
    linear_->backward_weight(nullptr, a.dbias.as<float>(), a.dout.ptr, nullptr, N, IC, OC, workspace(), false, ob);
  }
}

}  // namespace recipe::kernels::cuda
