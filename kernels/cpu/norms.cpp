// LayerNorm (optional bias) and RMSNorm over the last dimension C = weight.numel() of [N, C] rows,
// and qk-norm (RMSNorm over each q and k head vector of packed qkv rows; ops.hpp QkNormFwdArgs).
// Statistics are accumulated in double and stored as f32 mean/rstd [N] for the backward. Backward
// ACCUMULATES into dinp (it feeds the residual stream), dweight and dbias; the weight/bias
// reductions over rows run in row order in a double scratch, then are added once.
#include <algorithm>
#include <cmath>
#include <string>
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

namespace {

// The packed qkv rows a qk-norm op reads: rows of W = (Hq + 2·Hkv)·D, of which the first
// (Hq + Hkv)·D columns are normalised head by head.
struct QkShape {
  int64_t rows, W, heads, D;
};

QkShape qk_shape(const char* op, const Tensor& inp, const Tensor& q_weight, const Tensor& k_weight, int Hq, int Hkv,
                 int D) {
  cpu::require(Hq > 0 && Hkv > 0 && D > 0 && Hq % Hkv == 0, op,
               "Hq=" + std::to_string(Hq) + ", Hkv=" + std::to_string(Hkv) + ", D=" + std::to_string(D) +
                   ": need positive head counts with Hkv dividing Hq");
  cpu::require_tensor(inp, op, "inp", DType::f32);
  cpu::require_tensor(q_weight, op, "q_weight", DType::f32);
  cpu::require_tensor(k_weight, op, "k_weight", DType::f32);
  cpu::require_numel(q_weight, D, op, "q_weight");
  cpu::require_numel(k_weight, D, op, "k_weight");
  const int64_t W = int64_t(Hq + 2 * Hkv) * D;
  cpu::require(inp.numel() % W == 0, op,
               "inp " + inp.shape_str() + " is not a whole number of packed qkv rows of " + std::to_string(W));
  return {inp.numel() / W, W, int64_t(Hq) + Hkv, D};
}

// 1/sqrt(mean(x²) + eps) of one head vector, accumulated in double as rmsnorm_fwd.
float head_rstd(const float* x, int64_t D, float eps) {
  double ss = 0.0;
  for (int64_t c = 0; c < D; ++c) ss += double(x[c]) * x[c];
  return float(1.0 / std::sqrt(ss / double(D) + double(eps)));
}

}  // namespace

void CpuBackend::qk_norm_fwd(const QkNormFwdArgs& a) {
  const char* op = "qk_norm_fwd";
  const auto [rows, W, heads, D] = qk_shape(op, a.inp, a.q_weight, a.k_weight, a.Hq, a.Hkv, a.D);
  cpu::require_tensor(a.out, op, "out", DType::f32);
  cpu::require_numel(a.out, rows * W, op, "out");
  for (int64_t n = 0; n < rows; ++n) {
    const float* x = a.inp.as<float>() + n * W;
    float* y = a.out.as<float>() + n * W;  // may alias x: each value is read before it is written
    for (int64_t h = 0; h < heads; ++h) {
      const float* w = (h < a.Hq ? a.q_weight : a.k_weight).as<float>();
      const float r = head_rstd(x + h * D, D, a.eps);
      for (int64_t c = 0; c < D; ++c) y[h * D + c] = x[h * D + c] * r * w[c];
    }
    if (y != x)
      for (int64_t c = heads * D; c < W; ++c) y[c] = x[c];  // v heads
  }
}

void CpuBackend::qk_norm_bwd(const QkNormBwdArgs& a) {
  const char* op = "qk_norm_bwd";
  const auto [rows, W, heads, D] = qk_shape(op, a.inp, a.q_weight, a.k_weight, a.Hq, a.Hkv, a.D);
  cpu::require_tensor(a.dout, op, "dout", DType::f32);
  cpu::require_numel(a.dout, rows * W, op, "dout");
  require_optional(a.dinp, rows * W, op, "dinp");
  require_optional(a.dq_weight, D, op, "dq_weight");
  require_optional(a.dk_weight, D, op, "dk_weight");
  // The weight gradients over every vector of their heads, in (row, head) order, in double.
  std::vector<double> dw[2] = {std::vector<double>(a.dq_weight.defined() ? size_t(D) : 0, 0.0),
                               std::vector<double>(a.dk_weight.defined() ? size_t(D) : 0, 0.0)};
  std::vector<float> dx(static_cast<size_t>(D));
  for (int64_t n = 0; n < rows; ++n) {
    const float* xrow = a.inp.as<float>() + n * W;
    const float* grow = a.dout.as<float>() + n * W;
    for (int64_t h = 0; h < heads; ++h) {
      const bool is_q = h < a.Hq;
      const float* w = (is_q ? a.q_weight : a.k_weight).as<float>();
      std::vector<double>& acc = dw[is_q ? 0 : 1];
      const float* x = xrow + h * D;
      const float* g = grow + h * D;
      const float r = head_rstd(x, D, a.eps);
      // As rmsnorm_bwd: dx = r·(dŷ − x̂·mean(dŷ·x̂)), dŷ = g·w, x̂ = x·r.
      double sum_dy_xhat = 0.0;
      for (int64_t c = 0; c < D; ++c) {
        const float xhat = x[c] * r;
        sum_dy_xhat += double(g[c] * w[c]) * xhat;
        if (!acc.empty()) acc[size_t(c)] += double(g[c]) * xhat;
      }
      if (!a.dinp.defined()) continue;
      const float mean_dy_xhat = float(sum_dy_xhat / double(D));
      for (int64_t c = 0; c < D; ++c) dx[size_t(c)] = r * (g[c] * w[c] - x[c] * r * mean_dy_xhat);
      // dinp may alias dout: the head's g is read in full above before it is overwritten here.
      std::copy(dx.begin(), dx.end(), a.dinp.as<float>() + n * W + h * D);
    }
    if (a.dinp.defined() && a.dinp.as<float>() + n * W != grow)
      std::copy(grow + heads * D, grow + W, a.dinp.as<float>() + n * W + heads * D);  // v heads
  }
  if (a.dq_weight.defined())
    for (int64_t c = 0; c < D; ++c) a.dq_weight.as<float>()[c] += float(dw[0][size_t(c)]);
  if (a.dk_weight.defined())
    for (int64_t c = 0; c < D; ++c) a.dk_weight.as<float>()[c] += float(dw[1][size_t(c)]);
}

}  // namespace recipe::kernels
