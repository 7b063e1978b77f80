// Elementwise ops: residual add (out may alias a or b), GELU (tanh approximation) and SwiGLU on
// rows [gate (F) | up (F)] → out [N, F] = silu(gate)·up. Input gradients OVERWRITE.
#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/cpu_detail.hpp"

namespace recipe::kernels {

void CpuBackend::add(Tensor out, Tensor a, Tensor b) {
  const char* op = "add";
  cpu::require_tensor(a, op, "a", DType::f32);
  cpu::require_tensor(b, op, "b", DType::f32);
  cpu::require_tensor(out, op, "out", DType::f32);
  cpu::require_numel(b, a.numel(), op, "b");
  cpu::require_numel(out, a.numel(), op, "out");
  const float *x = a.as<float>(), *y = b.as<float>();
  float* o = out.as<float>();
  for (int64_t i = 0, n = a.numel(); i < n; ++i) o[i] = x[i] + y[i];
}

void CpuBackend::gelu_fwd(Tensor out, Tensor inp) {
  const char* op = "gelu_fwd";
  cpu::require_tensor(inp, op, "inp", DType::f32);
  cpu::require_tensor(out, op, "out", DType::f32);
  cpu::require_numel(out, inp.numel(), op, "out");
  const float* x = inp.as<float>();
  float* o = out.as<float>();
  for (int64_t i = 0, n = inp.numel(); i < n; ++i) o[i] = cpu::gelu(x[i]);
}

void CpuBackend::gelu_bwd(Tensor dinp, Tensor dout, Tensor inp) {
  const char* op = "gelu_bwd";
  cpu::require_tensor(inp, op, "inp", DType::f32);
  cpu::require_tensor(dout, op, "dout", DType::f32);
  cpu::require_tensor(dinp, op, "dinp", DType::f32);
  cpu::require_numel(dout, inp.numel(), op, "dout");
  cpu::require_numel(dinp, inp.numel(), op, "dinp");
  const float *x = inp.as<float>(), *g = dout.as<float>();
  float* d = dinp.as<float>();
  for (int64_t i = 0, n = inp.numel(); i < n; ++i) d[i] = g[i] * cpu::gelu_grad(x[i]);
}

namespace {
int64_t swiglu_width(const char* op, const Tensor& gate_up, const Tensor& half) {
  cpu::require_tensor(gate_up, op, "gate_up", DType::f32);
  int64_t two_f = gate_up.dim(-1);
  cpu::require(gate_up.ndim >= 1 && two_f % 2 == 0, op,
               "gate_up " + gate_up.shape_str() + " must have an even last dimension [gate (F) | up (F)]");
  cpu::require_numel(half, gate_up.numel() / 2, op, "the [N, F] tensor");
  return two_f / 2;
}
}  // namespace

void CpuBackend::swiglu_fwd(Tensor out, Tensor gate_up) {
  const char* op = "swiglu_fwd";
  cpu::require_tensor(out, op, "out", DType::f32);
  const int64_t F = swiglu_width(op, gate_up, out);
  const int64_t N = F ? gate_up.numel() / (2 * F) : 0;
  for (int64_t n = 0; n < N; ++n) {
    const float* gate = gate_up.as<float>() + n * 2 * F;
    const float* up = gate + F;
    float* o = out.as<float>() + n * F;
    for (int64_t f = 0; f < F; ++f) o[f] = gate[f] * cpu::sigmoid(gate[f]) * up[f];
  }
}

void CpuBackend::swiglu_bwd(Tensor dgate_up, Tensor dout, Tensor gate_up) {
  const char* op = "swiglu_bwd";
  cpu::require_tensor(dout, op, "dout", DType::f32);
  cpu::require_tensor(dgate_up, op, "dgate_up", DType::f32);
  const int64_t F = swiglu_width(op, gate_up, dout);
  cpu::require_numel(dgate_up, gate_up.numel(), op, "dgate_up");
  const int64_t N = F ? gate_up.numel() / (2 * F) : 0;
  for (int64_t n = 0; n < N; ++n) {
    const float* gate = gate_up.as<float>() + n * 2 * F;
    const float* up = gate + F;
    const float* g = dout.as<float>() + n * F;
    float* dgate = dgate_up.as<float>() + n * 2 * F;
    float* dup = dgate + F;
    for (int64_t f = 0; f < F; ++f) {
      // silu'(x) = σ(x)·(1 + x·(1 − σ(x))). Read both inputs before writing (dgate_up may alias gate_up).
      float x = gate[f], u = up[f], s = cpu::sigmoid(x);
      dgate[f] = g[f] * u * s * (1.0f + x * (1.0f - s));
      dup[f] = g[f] * x * s;
    }
  }
}

}  // namespace recipe::kernels
