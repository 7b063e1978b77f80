// The FP8 ops on the CPU: the reference the CUDA FP8 path is tested against. Quantization rounds
// exactly as the CUDA casts do (fp8_format.hpp), with the same f32 scale arithmetic; the GEMMs
// decode their FP8 operands times their inverse scales into f32 and run the f32 linear ops
// (linear.cpp), so an FP8 linear on CPU is q(x)·q(W)ᵀ computed in f32. The CUDA GEMM differs from
// it only in summation order (f32 accumulation both) and the bf16 rounding of its output.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/cpu_detail.hpp"
#include "kernels/cpu/fp8_format.hpp"

namespace recipe::kernels {

namespace {

void require_fp8(const Tensor& t, const char* op, const char* arg) {
  cpu::require(t.defined(), op, std::string(arg) + " is undefined");
  cpu::require(t.device == Device::cpu, op, std::string(arg) + " is a CUDA tensor; the CPU backend needs host tensors");
  cpu::require(is_fp8(t.dtype), op, std::string(arg) + " is " + t.shape_str() + " but must be e4m3 or e5m2");
}

float scalar(const Tensor& t, const char* op, const char* arg) {
  cpu::require_tensor(t, op, arg, DType::f32);
  cpu::require_numel(t, 1, op, arg);
  return *t.as<float>();
}

// rows × cols FP8 values (optionally stored transposed, [cols, rows]) decoded times scale_inv,
// as a row-major [rows, cols] f32 matrix.
std::vector<float> decode(const Tensor& q, float scale_inv, int64_t rows, int64_t cols, bool stored_transposed) {
  const fp8::Format& f = fp8::format_of(q.dtype);
  float table[256];
  for (int b = 0; b < 256; ++b) table[b] = fp8::decode(uint8_t(b), f) * scale_inv;
  const uint8_t* p = q.as<uint8_t>();
  std::vector<float> out(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[size_t(r * cols + c)] = table[p[stored_transposed ? c * rows + r : r * cols + c]];
  return out;
}

Tensor host_f32(std::vector<float>& v, int64_t rows, int64_t cols) {
  return Tensor(v.data(), DType::f32, Device::cpu, {rows, cols});
}

}  // namespace

void CpuBackend::fp8_amax(Tensor amax, Tensor x) {
  const char* op = "fp8_amax";
  cpu::require_tensor(x, op, "x", DType::f32);
  cpu::require_tensor(amax, op, "amax", DType::f32);
  cpu::require_numel(amax, 1, op, "amax");
  const float* p = x.as<float>();
  float m = 0.f;
  for (int64_t i = 0; i < x.numel(); ++i) m = std::fmax(m, std::fabs(p[i]));  // fmax skips NaN
  *amax.as<float>() = m;
}

void CpuBackend::fp8_quantize(const Fp8QuantizeArgs& a) {
  const char* op = "fp8_quantize";
  cpu::require_tensor(a.inp, op, "inp", DType::f32);
  cpu::require(a.out.defined() || a.out_t.defined(), op, "out and out_t are both undefined");
  const int64_t cols = a.cols, n = a.inp.numel();
  cpu::require(cols > 0 && n % cols == 0, op,
               "inp " + a.inp.shape_str() + " is not rows of cols=" + std::to_string(cols));
  const int64_t rows = n / cols;
  const Tensor& any = a.out.defined() ? a.out : a.out_t;
  if (a.out.defined()) require_fp8(a.out, op, "out"), cpu::require_numel(a.out, n, op, "out");
  if (a.out_t.defined()) require_fp8(a.out_t, op, "out_t"), cpu::require_numel(a.out_t, n, op, "out_t");
  cpu::require(!a.out.defined() || !a.out_t.defined() || a.out.dtype == a.out_t.dtype, op,
               "out and out_t must have one format");
  const fp8::Format& f = fp8::format_of(any.dtype);
  const float scale = fp8::scale_from_amax(scalar(a.amax, op, "amax"), f);
  cpu::require_tensor(a.scale_inv, op, "scale_inv", DType::f32);
  cpu::require_numel(a.scale_inv, 1, op, "scale_inv");
  *a.scale_inv.as<float>() = 1.f / scale;
  const float* x = a.inp.as<float>();
  uint8_t* q = a.out.defined() ? a.out.as<uint8_t>() : nullptr;
  uint8_t* qt = a.out_t.defined() ? a.out_t.as<uint8_t>() : nullptr;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t b = fp8::encode(x[r * cols + c] * scale, f);
      if (q) q[r * cols + c] = b;
      if (qt) qt[c * rows + r] = b;
    }
  if (a.amax_out.defined()) {
    cpu::require_tensor(a.amax_out, op, "amax_out", DType::f32);
    cpu::require_numel(a.amax_out, 1, op, "amax_out");
    float m = *a.amax_out.as<float>();
    for (int64_t i = 0; i < n; ++i) m = std::fmax(m, std::fabs(x[i]));  // fmax skips NaN
    *a.amax_out.as<float>() = m;
  }
}

// The reference of the fusion is the composition itself: swiglu_bwd into host memory, then the
// cast of that tensor, so the fused op's bytes are those of the two ops by construction.
void CpuBackend::fp8_quantize_swiglu_bwd(const Fp8QuantizeSwigluBwdArgs& a) {
  const char* op = "fp8_quantize_swiglu_bwd";
  cpu::require_tensor(a.gate_up, op, "gate_up", DType::f32);
  const int64_t two_f = a.gate_up.dim(-1);
  std::vector<float> dgate_up(size_t(a.gate_up.numel()));
  const Tensor d(dgate_up.data(), DType::f32, Device::cpu, {a.gate_up.numel() / std::max<int64_t>(two_f, 1), two_f});
  swiglu_bwd(d, a.dout, a.gate_up);
  fp8_quantize({.out = a.out,
                .out_t = a.out_t,
                .scale_inv = a.scale_inv,
                .inp = d,
                .amax = a.amax,
                .cols = two_f,
                .amax_out = a.amax_out});
}

// Likewise the forward: swiglu_fwd, then the cast of what it wrote.
void CpuBackend::fp8_swiglu_fwd_quantize(const Fp8SwigluFwdQuantizeArgs& a) {
  swiglu_fwd(a.out, a.gate_up);
  fp8_quantize({.out = a.q,
                .scale_inv = a.scale_inv,
                .inp = a.out,
                .amax = a.amax,
                .cols = a.out.ndim >= 1 ? a.out.dim(-1) : 0,
                .amax_out = a.amax_out});
}

void CpuBackend::fp8_amax_history(const Fp8AmaxHistoryArgs& a) {
  const char* op = "fp8_amax_history";
  cpu::require_tensor(a.history, op, "history", DType::f32);
  cpu::require_tensor(a.amax, op, "amax", DType::f32);
  cpu::require_tensor(a.scale_amax, op, "scale_amax", DType::f32);
  cpu::require(a.history.ndim == 2, op, "history must be [T, H], got " + a.history.shape_str());
  const int64_t T = a.history.dim(0), H = a.history.dim(1);
  cpu::require(H > 0, op, "history has no columns");
  cpu::require_numel(a.amax, T * fp8::kCellFloats, op, "amax");
  cpu::require_numel(a.scale_amax, T * fp8::kCellFloats, op, "scale_amax");
  float* hist = a.history.as<float>();
  float* cur = a.amax.as<float>();
  float* src = a.scale_amax.as<float>();
  for (int64_t t = 0; t < T; ++t)
    src[t * fp8::kCellFloats] =
        fp8::roll_amax_history(hist + t * H, H, cur + t * fp8::kCellFloats, a.push, a.most_recent);
}

void CpuBackend::fp8_transpose(Tensor out, Tensor inp) {
  const char* op = "fp8_transpose";
  require_fp8(inp, op, "inp");
  require_fp8(out, op, "out");
  cpu::require(inp.ndim == 2 && out.ndim == 2 && out.dim(0) == inp.dim(1) && out.dim(1) == inp.dim(0), op,
               "out " + out.shape_str() + " is not the transpose of inp " + inp.shape_str());
  cpu::require(out.dtype == inp.dtype, op, "out and inp differ in format");
  const int64_t rows = inp.dim(0), cols = inp.dim(1);
  const uint8_t* src = inp.as<uint8_t>();
  uint8_t* dst = out.as<uint8_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
}

void CpuBackend::fp8_linear_fwd(const Fp8LinearFwdArgs& a) {
  const char* op = "fp8_linear_fwd";
  require_fp8(a.inp, op, "inp");
  require_fp8(a.weight, op, "weight");
  cpu::require(a.weight.ndim == 2, op, "weight must be [out, in], got " + a.weight.shape_str());
  const int64_t OC = a.weight.dim(0), IC = a.weight.dim(1);
  cpu::require(IC > 0 && a.inp.numel() % IC == 0, op,
               "inp " + a.inp.shape_str() + " is not rows of " + std::to_string(IC));
  const int64_t N = a.inp.numel() / IC;
  std::vector<float> x = decode(a.inp, scalar(a.inp_scale_inv, op, "inp_scale_inv"), N, IC, false);
  std::vector<float> w = decode(a.weight, scalar(a.weight_scale_inv, op, "weight_scale_inv"), OC, IC, false);
  linear_fwd(
      {.out = a.out, .inp = host_f32(x, N, IC), .weight = host_f32(w, OC, IC), .bias = a.bias, .pre_gelu = a.pre_gelu});
}

void CpuBackend::fp8_linear_bwd(const Fp8LinearBwdArgs& a) {
  const char* op = "fp8_linear_bwd";
  cpu::require_tensor(a.dout, op, "dout", DType::f32);
  const Tensor& shape_src = a.dinp.defined() ? a.weight_t : a.inp_t;
  int64_t OC = 0, IC = 0;
  if (a.dinp.defined() || a.dweight.defined()) {
    require_fp8(shape_src, op, a.dinp.defined() ? "weight_t" : "inp_t");
    IC = shape_src.dim(0);
    OC = a.dinp.defined() ? a.weight_t.dim(1) : a.dout_t.dim(0);
  } else {
    cpu::require(a.dbias.defined(), op, "nothing to compute (dinp, dweight and dbias undefined)");
    OC = a.dbias.numel();
  }
  cpu::require(OC > 0 && a.dout.numel() % OC == 0, op,
               "dout " + a.dout.shape_str() + " is not rows of " + std::to_string(OC));
  const int64_t N = a.dout.numel() / OC;
  if (a.dinp.defined()) {
    require_fp8(a.dout_fp8, op, "dout_fp8");
    require_fp8(a.weight_t, op, "weight_t");
    cpu::require_numel(a.weight_t, IC * OC, op, "weight_t");
    std::vector<float> g = decode(a.dout_fp8, scalar(a.dout_scale_inv, op, "dout_scale_inv"), N, OC, false);
    std::vector<float> w = decode(a.weight_t, scalar(a.weight_scale_inv, op, "weight_scale_inv"), OC, IC, true);
    linear_bwd({.dinp = a.dinp,
                .dout = host_f32(g, N, OC),
                .inp = a.dinp.view({N, IC}),
                .weight = host_f32(w, OC, IC),
                .dinp_gelu_aux = a.dinp_gelu_aux,
                .dinp_sum = a.dinp_sum});
  } else {
    cpu::require(!a.dinp_sum.defined() && !a.dinp_gelu_aux.defined(), op, "dinp_sum and dinp_gelu_aux need dinp");
  }
  if (a.dweight.defined()) {
    require_fp8(a.dout_t, op, "dout_t");
    require_fp8(a.inp_t, op, "inp_t");
    cpu::require_numel(a.dout_t, N * OC, op, "dout_t");
    cpu::require_numel(a.inp_t, N * IC, op, "inp_t");
    std::vector<float> g = decode(a.dout_t, scalar(a.dout_scale_inv, op, "dout_scale_inv"), N, OC, true);
    std::vector<float> x = decode(a.inp_t, scalar(a.inp_scale_inv, op, "inp_scale_inv"), N, IC, true);
    linear_bwd({.dweight = a.dweight,
                .dout = host_f32(g, N, OC),
                .inp = host_f32(x, N, IC),
                .weight = a.dweight.view({OC, IC})});
  }
  if (a.dbias.defined()) {
    cpu::require_tensor(a.dbias, op, "dbias", DType::f32);
    cpu::require_numel(a.dbias, OC, op, "dbias");
    cpu::add_column_sums(a.dbias.as<float>(), a.dout.as<float>(), N, OC);  // the unquantized gradient
  }
}

}  // namespace recipe::kernels
