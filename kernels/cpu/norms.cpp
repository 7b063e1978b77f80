// LayerNorm (optional bias) and RMSNorm over the last dimension C = weight.numel() of [N, C] rows.
// Statistics are accumulated in double and stored as f32 mean/rstd [N] for the backward. Backward
// ACCUMULATES into dinp (it feeds the residual stream), dweight and dbias; the weight/bias
// reductions over rows run in row order in a double scratch, then are added once.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/cpu_detail.hpp"

namespace recipe::kernels {

namespace {
struct NormShape {
  int64_t N, C;
};

NormShape norm_shape(const char* op, const Tensor& inp, const Tensor& weight) {
  cpu::require_tensor(inp, op, "inp", DType::f32);
  cpu::require_tensor(weight, op, "weight", DType::f32);
  int64_t C = weight.numel();
  cpu::require(C > 0 && inp.numel() % C == 0, op,
               "inp " + inp.shape_str() + " is not a whole number of rows of C=" + std::to_string(C));
  return {inp.numel() / C, C};
}

void require_optional(const Tensor& t, int64_t n, const char* op, const char* arg) {
  if (!t.defined()) return;
  cpu::require_tensor(t, op, arg, DType::f32);
  cpu::require_numel(t, n, op, arg);
}
}  // namespace

void CpuBackend::layernorm_fwd(const LayerNormFwdArgs& args) {
  const Tensor out = args.out, mean = args.mean, rstd = args.rstd, inp = args.inp, weight = args.weight,
               bias = args.bias;
  const float eps = args.eps;
  const char* op = "layernorm_fwd";
  auto [N, C] = norm_shape(op, inp, weight);
  cpu::require_tensor(out, op, "out", DType::f32);
  cpu::require_numel(out, N * C, op, "out");
  require_optional(mean, N, op, "mean");
  require_optional(rstd, N, op, "rstd");
  require_optional(bias, C, op, "bias");
  const float* w = weight.as<float>();
  const float* b = bias.defined() ? bias.as<float>() : nullptr;
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp.as<float>() + n * C;
    double sum = 0.0;
    for (int64_t c = 0; c < C; ++c) sum += x[c];
    double mu = sum / double(C);
    double var = 0.0;
    for (int64_t c = 0; c < C; ++c) var += (x[c] - mu) * (x[c] - mu);
    var /= double(C);
    float m = float(mu);
    float r = float(1.0 / std::sqrt(var + double(eps)));
    float* y = out.as<float>() + n * C;  // may alias inp: x[c] is read before y[c] is written
    for (int64_t c = 0; c < C; ++c) y[c] = (x[c] - m) * r * w[c] + (b ? b[c] : 0.0f);
    if (mean.defined()) mean.as<float>()[n] = m;
    if (rstd.defined()) rstd.as<float>()[n] = r;
  }
}

void CpuBackend::layernorm_bwd(const LayerNormBwdArgs& args) {
  const Tensor dinp = args.dinp, dweight = args.dweight, dbias = args.dbias, dout = args.dout, inp = args.inp,
               weight = args.weight, mean = args.mean, rstd = args.rstd, dinp_sum = args.dinp_sum;
  const char* op = "layernorm_bwd";
  auto [N, C] = norm_shape(op, inp, weight);
  cpu::require_tensor(dout, op, "dout", DType::f32);
  cpu::require_numel(dout, N * C, op, "dout");
  cpu::require_tensor(mean, op, "mean", DType::f32);
  cpu::require_numel(mean, N, op, "mean");
  cpu::require_tensor(rstd, op, "rstd", DType::f32);
  cpu::require_numel(rstd, N, op, "rstd");
  require_optional(dinp, N * C, op, "dinp");
  require_optional(dweight, C, op, "dweight");
  require_optional(dbias, C, op, "dbias");
  require_optional(dinp_sum, C, op, "dinp_sum");
  cpu::require(!dinp_sum.defined() || dinp.defined(), op, "dinp_sum needs dinp (it is the column sum of dinp)");
  const float* w = weight.as<float>();
  std::vector<double> dw(dweight.defined() ? size_t(C) : 0, 0.0), db(dbias.defined() ? size_t(C) : 0, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp.as<float>() + n * C;
    const float* g = dout.as<float>() + n * C;
    const float m = mean.as<float>()[n], r = rstd.as<float>()[n];
    // dx = r·(dŷ − mean(dŷ) − x̂·mean(dŷ·x̂)) with dŷ = g·w, x̂ = (x − m)·r.
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int64_t c = 0; c < C; ++c) {
      float xhat = (x[c] - m) * r;
      float dy = g[c] * w[c];
      sum_dy += dy;
      sum_dy_xhat += double(dy) * xhat;
      if (!dw.empty()) dw[c] += double(g[c]) * xhat;
      if (!db.empty()) db[c] += g[c];
    }
    if (dinp.defined()) {
      const float mean_dy = float(sum_dy / double(C)), mean_dy_xhat = float(sum_dy_xhat / double(C));
      float* dx = dinp.as<float>() + n * C;
      for (int64_t c = 0; c < C; ++c) {
        float xhat = (x[c] - m) * r;
        dx[c] += r * (g[c] * w[c] - mean_dy - xhat * mean_dy_xhat);
      }
    }
  }
  for (size_t c = 0; c < dw.size(); ++c) dweight.as<float>()[c] += float(dw[c]);
  for (size_t c = 0; c < db.size(); ++c) dbias.as<float>()[c] += float(db[c]);
  if (dinp_sum.defined()) cpu::add_column_sums(dinp_sum.as<float>(), dinp.as<float>(), N, C);
}

void CpuBackend::rmsnorm_fwd(const RmsNormFwdArgs& args) {
  const Tensor out = args.out, rstd = args.rstd, inp = args.inp, weight = args.weight;
  const float eps = args.eps;
  const char* op = "rmsnorm_fwd";
  auto [N, C] = norm_shape(op, inp, weight);
  cpu::require_tensor(out, op, "out", DType::f32);
  cpu::require_numel(out, N * C, op, "out");
  require_optional(rstd, N, op, "rstd");
  const float* w = weight.as<float>();
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp.as<float>() + n * C;
    double ss = 0.0;
    for (int64_t c = 0; c < C; ++c) ss += double(x[c]) * x[c];
    float r = float(1.0 / std::sqrt(ss / double(C) + double(eps)));
    float* y = out.as<float>() + n * C;
    for (int64_t c = 0; c < C; ++c) y[c] = x[c] * r * w[c];
    if (rstd.defined()) rstd.as<float>()[n] = r;
  }
}

void CpuBackend::rmsnorm_bwd(const RmsNormBwdArgs& args) {
  const Tensor dinp = args.dinp, dweight = args.dweight, dout = args.dout, inp = args.inp, weight = args.weight,
               rstd = args.rstd;
  const char* op = "rmsnorm_bwd";
  auto [N, C] = norm_shape(op, inp, weight);
  cpu::require_tensor(dout, op, "dout", DType::f32);
  cpu::require_numel(dout, N * C, op, "dout");
  cpu::require_tensor(rstd, op, "rstd", DType::f32);
  cpu::require_numel(rstd, N, op, "rstd");
  require_optional(dinp, N * C, op, "dinp");
  require_optional(dweight, C, op, "dweight");
  const float* w = weight.as<float>();
  std::vector<double> dw(dweight.defined() ? size_t(C) : 0, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp.as<float>() + n * C;
    const float* g = dout.as<float>() + n * C;
    const float r = rstd.as<float>()[n];
    // dx = r·(dŷ − x̂·mean(dŷ·x̂)) with dŷ = g·w, x̂ = x·r.
    double sum_dy_xhat = 0.0;
    for (int64_t c = 0; c < C; ++c) {
      float xhat = x[c] * r;
      sum_dy_xhat += double(g[c] * w[c]) * xhat;
      if (!dw.empty()) dw[c] += double(g[c]) * xhat;
    }
    if (dinp.defined()) {
      const float mean_dy_xhat = float(sum_dy_xhat / double(C));
      float* dx = dinp.as<float>() + n * C;
      for (int64_t c = 0; c < C; ++c) dx[c] += r * (g[c] * w[c] - x[c] * r * mean_dy_xhat);
    }
  }
  for (size_t c = 0; c < dw.size(); ++c) dweight.as<float>()[c] += float(dw[c]);
}

}  // namespace recipe::kernels
