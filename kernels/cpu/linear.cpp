// Linear layers through OpenBLAS sgemm, row-major, weights [OC, IC] (HF layout):
//   fwd  out[N,OC]     = inp[N,IC] · Wᵀ + b        (optional GELU epilogue keeps pre_gelu; or +=)
//   bwd  dinp[N,IC]    = dout[N,OC] · W            (overwrite, or +=; optional ·gelu'(aux) epilogue)
//        dweight[OC,IC] += doutᵀ · inp             (beta = 1)
//        dbias[OC]     += Σ_rows dout               (fixed row order, double accumulator)
#include <cblas.h>

#include <vector>

#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/cpu_detail.hpp"

namespace recipe::kernels {

namespace {
struct LinearShape {
  int64_t N, IC, OC;
};

LinearShape linear_shape(const char* op, const Tensor& inp, const Tensor& weight) {
  cpu::require_tensor(weight, op, "weight", DType::f32);
  cpu::require(weight.ndim == 2, op, "weight must be [out, in], got " + weight.shape_str());
  cpu::require_tensor(inp, op, "inp", DType::f32);
  int64_t OC = weight.dim(0), IC = weight.dim(1);
  cpu::require(IC > 0 && inp.numel() % IC == 0, op,
               "inp " + inp.shape_str() + " is not a whole number of rows of in_features=" + std::to_string(IC));
  const int64_t N = inp.numel() / IC;
  constexpr int64_t kBlasMax = 2147483647;  // cblas takes int dimensions
  cpu::require(N <= kBlasMax && IC <= kBlasMax && OC <= kBlasMax, op,
               "dimensions N=" + std::to_string(N) + " IC=" + std::to_string(IC) + " OC=" + std::to_string(OC) +
                   " exceed the BLAS int range; split the rows into smaller calls");
  return {N, IC, OC};
}
}  // namespace

void CpuBackend::linear_fwd(const LinearFwdArgs& args) {
  const Tensor out = args.out, inp = args.inp, weight = args.weight, bias = args.bias, pre_gelu = args.pre_gelu;
  const char* op = "linear_fwd";
  auto [N, IC, OC] = linear_shape(op, inp, weight);
  cpu::require_tensor(out, op, "out", DType::f32);
  cpu::require_numel(out, N * OC, op, "out");
  if (bias.defined()) {
    cpu::require_tensor(bias, op, "bias", DType::f32);
    cpu::require_numel(bias, OC, op, "bias");
  }
  if (pre_gelu.defined()) {
    cpu::require_tensor(pre_gelu, op, "pre_gelu", DType::f32);
    cpu::require_numel(pre_gelu, N * OC, op, "pre_gelu");
  }
  cpu::require(!args.accumulate || (!bias.defined() && !pre_gelu.defined()), op,
               "accumulate takes neither bias nor pre_gelu");
  float* affine = pre_gelu.defined() ? pre_gelu.as<float>() : out.as<float>();
  // The bias is broadcast into the destination first so sgemm can add onto it (beta = 1).
  float beta = args.accumulate ? 1.0f : 0.0f;
  if (bias.defined()) {
    const float* b = bias.as<float>();
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < OC; ++o) affine[n * OC + o] = b[o];
    beta = 1.0f;
  }
  if (N > 0 && OC > 0)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(N), int(OC), int(IC), 1.0f, inp.as<float>(), int(IC),
                weight.as<float>(), int(IC), beta, affine, int(OC));
  if (pre_gelu.defined()) {
    float* o = out.as<float>();
    for (int64_t i = 0; i < N * OC; ++i) o[i] = cpu::gelu(affine[i]);
  }
}

void CpuBackend::linear_bwd(const LinearBwdArgs& args) {
  const Tensor dinp = args.dinp, dweight = args.dweight, dbias = args.dbias, dout = args.dout, inp = args.inp,
               weight = args.weight, dinp_gelu_aux = args.dinp_gelu_aux, dinp_sum = args.dinp_sum;
  const char* op = "linear_bwd";
  auto [N, IC, OC] = linear_shape(op, inp, weight);
  cpu::require_tensor(dout, op, "dout", DType::f32);
  cpu::require_numel(dout, N * OC, op, "dout");
  const float* g = dout.as<float>();

  if (dinp.defined()) {
    cpu::require_tensor(dinp, op, "dinp", DType::f32);
    cpu::require_numel(dinp, N * IC, op, "dinp");
    cpu::require(!args.dinp_accumulate || (!dinp_gelu_aux.defined() && !dinp_sum.defined()), op,
                 "dinp_accumulate takes neither dinp_gelu_aux nor dinp_sum");
    float* di = dinp.as<float>();
    if (N > 0 && IC > 0)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(N), int(IC), int(OC), 1.0f, g, int(OC),
                  weight.as<float>(), int(IC), args.dinp_accumulate ? 1.0f : 0.0f, di, int(IC));
    if (dinp_gelu_aux.defined()) {
      cpu::require_tensor(dinp_gelu_aux, op, "dinp_gelu_aux", DType::f32);
      cpu::require_numel(dinp_gelu_aux, N * IC, op, "dinp_gelu_aux");
      const float* aux = dinp_gelu_aux.as<float>();
      for (int64_t i = 0; i < N * IC; ++i) di[i] *= cpu::gelu_grad(aux[i]);
    }
  }
  if (dweight.defined()) {
    cpu::require_tensor(dweight, op, "dweight", DType::f32);
    cpu::require_numel(dweight, OC * IC, op, "dweight");
    if (N > 0 && OC > 0 && IC > 0)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(OC), int(IC), int(N), 1.0f, g, int(OC), inp.as<float>(),
                  int(IC), 1.0f, dweight.as<float>(), int(IC));
  }
  if (dbias.defined()) {
    cpu::require_tensor(dbias, op, "dbias", DType::f32);
    cpu::require_numel(dbias, OC, op, "dbias");
    cpu::add_column_sums(dbias.as<float>(), g, N, OC);
  }
  if (dinp_sum.defined()) {
    cpu::require(dinp.defined(), op, "dinp_sum needs dinp (it is the column sum of dinp)");
    cpu::require_tensor(dinp_sum, op, "dinp_sum", DType::f32);
    cpu::require_numel(dinp_sum, IC, op, "dinp_sum");
    cpu::add_column_sums(dinp_sum.as<float>(), dinp.as<float>(), N, IC);
  }
}

}  // namespace recipe::kernels
