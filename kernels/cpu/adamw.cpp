// The optimizer-side ops on flat f32 buffers: AdamW with decoupled weight decay (formula in ops.hpp,
// bias corrections 1 − β^step computed in double), the squared norm for gradient clipping
// (double accumulator, fixed order) and an in-place scale.
#include <cmath>

#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/cpu_detail.hpp"

namespace recipe::kernels {

void CpuBackend::adamw(Tensor master, Tensor grad, Tensor m, Tensor v, Tensor compute_copy, const AdamWArgs& a) {
  const char* op = "adamw";
  cpu::require_tensor(master, op, "master", DType::f32);
  const int64_t n = master.numel();
  cpu::require_tensor(grad, op, "grad", DType::f32);
  cpu::require_numel(grad, n, op, "grad");
  cpu::require_tensor(m, op, "m", DType::f32);
  cpu::require_numel(m, n, op, "m");
  cpu::require_tensor(v, op, "v", DType::f32);
  cpu::require_numel(v, n, op, "v");
  cpu::require(a.step >= 1, op, "step=" + std::to_string(a.step) + " must be 1-based (>= 1) for bias correction");
  if (compute_copy.defined()) {
    cpu::require(compute_copy.device == Device::cpu && compute_copy.dtype != DType::i32, op,
                 "compute_copy " + compute_copy.shape_str() + " must be a host f32 or bf16 tensor");
    cpu::require_numel(compute_copy, n, op, "compute_copy");
  }
  float grad_scale = a.grad_scale;
  if (a.grad_scale_device) {  // CPU backend memory is host memory
    grad_scale = *a.grad_scale_device;
    if (!std::isfinite(grad_scale)) return;  // the "skip this update" signal (ops.hpp)
  }
  float *w = master.as<float>(), *mp = m.as<float>(), *vp = v.as<float>();
  const float* g = grad.as<float>();
  if (a.schedule_device) {
    // lr and the inverse bias corrections from (host) backend memory: {lr, 1/bc1, 1/bc2}.
    const float lr = a.schedule_device[0], inv_bc1 = a.schedule_device[1], inv_bc2 = a.schedule_device[2];
    for (int64_t i = 0; i < n; ++i) {
      float gi = g[i] * grad_scale;
      mp[i] = a.beta1 * mp[i] + (1.0f - a.beta1) * gi;
      vp[i] = a.beta2 * vp[i] + (1.0f - a.beta2) * gi * gi;
      float m_hat = mp[i] * inv_bc1, v_hat = vp[i] * inv_bc2;
      w[i] -= lr * (m_hat / (std::sqrt(v_hat) + a.eps) + a.weight_decay * w[i]);
    }
    if (compute_copy.defined()) cast(compute_copy, master);
    return;
  }
  const float bc1 = float(1.0 - std::pow(double(a.beta1), a.step));
  const float bc2 = float(1.0 - std::pow(double(a.beta2), a.step));
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i] * grad_scale;
    mp[i] = a.beta1 * mp[i] + (1.0f - a.beta1) * gi;
    vp[i] = a.beta2 * vp[i] + (1.0f - a.beta2) * gi * gi;
    float m_hat = mp[i] / bc1, v_hat = vp[i] / bc2;
    w[i] -= a.lr * (m_hat / (std::sqrt(v_hat) + a.eps) + a.weight_decay * w[i]);
  }
  if (compute_copy.defined()) cast(compute_copy, master);
}

double CpuBackend::sum_squares(Tensor x) {
  cpu::require_tensor(x, "sum_squares", "x", DType::f32);
  const float* p = x.as<float>();
  double s = 0.0;
  for (int64_t i = 0, n = x.numel(); i < n; ++i) s += double(p[i]) * p[i];
  return s;
}

void CpuBackend::scale(Tensor x, float s) {
  cpu::require(x.defined() && x.device == Device::cpu, "scale", "x must be a defined host tensor");
  if (x.dtype == DType::f32) {
    float* p = x.as<float>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) p[i] *= s;
  } else if (x.dtype == DType::bf16) {
    bf16_t* p = x.as<bf16_t>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) p[i] = f32_to_bf16(bf16_to_f32(p[i]) * s);
  } else {
    cpu::fail("scale", "x is " + x.shape_str() + "; only f32 and bf16 tensors can be scaled");
  }
}

}  // namespace recipe::kernels
