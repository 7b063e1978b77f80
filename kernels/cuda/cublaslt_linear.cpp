// cuBLASLt GEMMs of the linear layers; see cublaslt_linear.hpp for the layout mapping.
// Row-major X[r,c] is column-major Xᵀ, so each row-major product is issued transposed:
//   forward  outᵀ[OC,N]   = W(col-major [IC,OC])ᵀ · inpᵀ[IC,N]        m=OC n=N  k=IC
//   dinp     dinpᵀ[IC,N]  = W(col-major [IC,OC]) · doutᵀ[OC,N]         m=IC n=N  k=OC
//   dweight  dWᵀ[IC,OC]  += inpᵀ[IC,N] · (doutᵀ[OC,N])ᵀ                m=IC n=OC k=N
// In the dweight GEMM, BGRADB reduces op(B) = dout over k = N rows: Σ_rows dout, length n = OC.
#include "kernels/cuda/cublaslt_linear.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.hpp"

namespace recipe::kernels::cuda {
namespace {

int pointer_alignment(const void* p) {
  auto a = reinterpret_cast<uintptr_t>(p);
  int align = 256;
  while (align > 1 && (a % align)) align /= 2;
  return align;
}

bool epilogue_has_bias(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
         e == CUBLASLT_EPILOGUE_BGRADB;
}
bool epilogue_has_aux(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
         e == CUBLASLT_EPILOGUE_DGELU;
}

}  // namespace

CublasLtLinear::CublasLtLinear(cudaStream_t stream, void* workspace, size_t workspace_bytes)
    : stream_(stream), workspace_(workspace), workspace_bytes_(workspace_bytes) {
  RECIPE_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

CublasLtLinear::~CublasLtLinear() {
  for (auto& [key, p] : plans_) {
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.d) cublasLtMatrixLayoutDestroy(p.d);
    if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  }
  if (handle_) cublasLtDestroy(handle_);
}

CublasLtLinear::Plan& CublasLtLinear::plan_for(const Gemm& g) {
  const int al_a = pointer_alignment(g.A), al_b = pointer_alignment(g.B),
            al_d = pointer_alignment(g.D);
  Key key{g.m,        g.n,         g.k,          g.lda,       g.ldb,
          g.ldd,      g.aux ? g.aux_ld : 0,      int(g.transA), int(g.transB),
          int(g.d_type), int(g.epilogue), int(g.bias_type), al_a, al_b, al_d};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan& p = plans_[key];

  RECIPE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  RECIPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  RECIPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  RECIPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                     &g.epilogue, sizeof(g.epilogue)));
  if (epilogue_has_bias(g.epilogue)) {
    RECIPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                       &g.bias_type, sizeof(g.bias_type)));
    RECIPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &g.bias, sizeof(g.bias)));
  }
  if (epilogue_has_aux(g.epilogue)) {
    cudaDataType_t aux_type = CUDA_R_16BF;
    RECIPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type, sizeof(aux_type)));
    RECIPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                       &g.aux_ld, sizeof(g.aux_ld)));
    RECIPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.aux, sizeof(g.aux)));
  }
  RECIPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, g.transA ? g.k : g.m,
                                                 g.transA ? g.m : g.k, g.lda));
  RECIPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, g.transB ? g.n : g.k,
                                                 g.transB ? g.k : g.n, g.ldb));
  RECIPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, g.d_type, g.m, g.n, g.ldd));

  cublasLtMatmulPreference_t pref = nullptr;
  RECIPE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = workspace_bytes_;
  uint32_t a32 = al_a, b32 = al_b, d32 = al_d;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &a32, sizeof(a32));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &b32, sizeof(b32));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &d32, sizeof(d32));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &d32, sizeof(d32));
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.d, p.d, pref, 1,
                                                     &result, &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  p.ok = st == CUBLAS_STATUS_SUCCESS && returned > 0;
  if (p.ok) p.algo = result.algo;
  return p;
}

bool CublasLtLinear::run(const Gemm& g) {
  Plan& p = plan_for(g);
  if (!p.ok) return false;
  if (epilogue_has_bias(g.epilogue))
    RECIPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &g.bias, sizeof(g.bias)));
  if (epilogue_has_aux(g.epilogue))
    RECIPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.aux, sizeof(g.aux)));
  const float alpha = 1.f;
  RECIPE_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, g.A, p.a, g.B, p.b, &g.beta, g.D, p.d,
                                     g.D, p.d, &p.algo, workspace_, workspace_bytes_, stream_));
  return true;
}

void CublasLtLinear::forward(void* out, const void* inp, const void* weight, const void* bias,
                             void* pre_gelu, int64_t N, int64_t IC, int64_t OC) {
  if (N <= 0 || OC <= 0) return;
  Gemm g{weight, true, IC, inp, false, IC, out, CUDA_R_16BF, OC, OC, N, IC, 0.f,
         CUBLASLT_EPILOGUE_DEFAULT, bias, CUDA_R_16BF, nullptr, 0};
  if (pre_gelu) {
    g.epilogue = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    g.aux = pre_gelu;
    g.aux_ld = OC;
    if (run(g)) {
      ++stats_.fused;
      return;
    }
    // Unfused: the affine result into pre_gelu, then gelu.
    ++stats_.unfused;
    g.D = pre_gelu;
    g.aux = nullptr;
    g.aux_ld = 0;
    g.epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    if (!run(g))
      throw std::runtime_error("cuBLASLt: no algorithm for the linear forward GEMM [" +
                               std::to_string(N) + "x" + std::to_string(IC) + "]·[" +
                               std::to_string(OC) + "x" + std::to_string(IC) + "]ᵀ");
    gelu_fwd_bf16(out, pre_gelu, N * OC, stream_);
    return;
  }
  g.epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  if (!run(g))
    throw std::runtime_error("cuBLASLt: no algorithm for the linear forward GEMM [" +
                             std::to_string(N) + "x" + std::to_string(IC) + "]·[" +
                             std::to_string(OC) + "x" + std::to_string(IC) + "]ᵀ");
  ++stats_.fused;
}

void CublasLtLinear::backward_input(void* dinp, const void* dout, const void* weight,
                                    const void* gelu_aux, int64_t N, int64_t IC, int64_t OC) {
  if (N <= 0 || IC <= 0) return;
  Gemm g{weight, false, IC, dout, false, OC, dinp, CUDA_R_16BF, IC, IC, N, OC, 0.f,
         gelu_aux ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_DEFAULT, nullptr, CUDA_R_16BF,
         const_cast<void*>(gelu_aux), gelu_aux ? IC : 0};
  if (run(g)) {
    ++stats_.fused;
    return;
  }
  if (!gelu_aux)
    throw std::runtime_error("cuBLASLt: no algorithm for the linear dinp GEMM [" +
                             std::to_string(N) + "x" + std::to_string(OC) + "]·[" +
                             std::to_string(OC) + "x" + std::to_string(IC) + "]");
  ++stats_.unfused;
  g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  g.aux = nullptr;
  g.aux_ld = 0;
  if (!run(g))
    throw std::runtime_error("cuBLASLt: no algorithm for the linear dinp GEMM");
  gelu_bwd_bf16(dinp, dinp, gelu_aux, N * IC, stream_);
}

void CublasLtLinear::backward_weight(float* dweight, float* dbias, const void* dout,
                                     const void* inp, int64_t N, int64_t IC, int64_t OC,
                                     Workspace scratch) {
  if (N <= 0 || OC <= 0) return;
  if (!dweight) {
    if (dbias) column_sum_accumulate(dbias, dout, N, OC, scratch, stream_);
    return;
  }
  Gemm g{inp, false, IC, dout, true, OC, dweight, CUDA_R_32F, IC, IC, OC, N, 1.f,
         CUBLASLT_EPILOGUE_DEFAULT, nullptr, CUDA_R_32F, nullptr, 0};
  if (dbias) {
    // BGRADB writes (does not accumulate) the bias gradient: into scratch, then added.
    Workspace ws = scratch;
    float* db = static_cast<float*>(ws.take(size_t(OC) * 4, "bias gradient"));
    g.epilogue = CUBLASLT_EPILOGUE_BGRADB;
    g.bias = db;
    if (run(g)) {
      ++stats_.fused;
      add_f32(dbias, dbias, db, OC, stream_);
      return;
    }
    ++stats_.unfused;
    g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    g.bias = nullptr;
    column_sum_accumulate(dbias, dout, N, OC, scratch, stream_);
  }
  if (!run(g))
    throw std::runtime_error("cuBLASLt: no algorithm for the weight-gradient GEMM [" +
                             std::to_string(OC) + "x" + std::to_string(N) + "]·[" +
                             std::to_string(N) + "x" + std::to_string(IC) + "] (f32 accumulate)");
  if (!dbias) ++stats_.fused;
}

}  // namespace recipe::kernels::cuda
