// cuBLASLt GEMMs of the linear layers; see cublaslt_linear.hpp for the layout mapping.
// Row-major X[r,c] is column-major Xᵀ, so each row-major product is issued transposed:
//   forward  outᵀ[OC,N]   = W(col-major [IC,OC])ᵀ · inpᵀ[IC,N]        m=OC n=N  k=IC
//   dinp     dinpᵀ[IC,N]  = W(col-major [IC,OC]) · doutᵀ[OC,N]         m=IC n=N  k=OC
//   dweight  dWᵀ[IC,OC]  += inpᵀ[IC,N] · (doutᵀ[OC,N])ᵀ                m=IC n=OC k=N
// In the dweight GEMM, BGRADB reduces op(B) = dout over k = N rows: Σ_rows dout, length n = OC.
#include "kernels/cuda/cublaslt_linear.hpp"

#include <algorithm>
#include <sstream>
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
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_BGRADB;
}
bool epilogue_has_aux(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU;
}

}  // namespace

// FP8 operands carry their inverse scales (device pointers, like the bias: set on every call, as
// the same key may see other scale buffers). bf16 GEMMs set none.
void CublasLtLinear::set_scale_pointers(cublasLtMatmulDesc_t desc, const Gemm& g) {
  if (g.a_scale)
    RECIPE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g.a_scale, sizeof(g.a_scale)));
  if (g.b_scale)
    RECIPE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g.b_scale, sizeof(g.b_scale)));
}

CublasLtLinear::CublasLtLinear(cudaStream_t stream, void* workspace, size_t workspace_bytes, const Options& options)
    : stream_(stream), workspace_(workspace), workspace_bytes_(workspace_bytes), options_(options) {
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

CublasLtLinear::Key CublasLtLinear::key_of(const Gemm& g, bool beta_nonzero) {
  return Key{g.m,
             g.n,
             g.k,
             g.lda,
             g.ldb,
             g.ldd,
             g.aux ? g.aux_ld : 0,
             int(g.transA),
             int(g.transB),
             int(g.d_type),
             int(g.epilogue),
             int(g.bias_type),
             pointer_alignment(g.A),
             pointer_alignment(g.B),
             pointer_alignment(g.D),
             int(beta_nonzero),
             int(g.a_type),
             int(g.b_type),
             int(g.fast_accum)};
}

CublasLtLinear::Plan& CublasLtLinear::plan_for(const Gemm& g) {
  const int al_a = pointer_alignment(g.A), al_b = pointer_alignment(g.B), al_d = pointer_alignment(g.D);
  const Key key = key_of(g, g.beta != 0.f);  // beta = 0 and beta != 0 run different kernels
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan& p = plans_[key];

  RECIPE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  RECIPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  RECIPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  RECIPE_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue, sizeof(g.epilogue)));
  if (epilogue_has_bias(g.epilogue)) {
    RECIPE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &g.bias_type, sizeof(g.bias_type)));
    RECIPE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  }
  if (epilogue_has_aux(g.epilogue)) {
    cudaDataType_t aux_type = CUDA_R_16BF;
    RECIPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type,
                                                       sizeof(aux_type)));
    RECIPE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &g.aux_ld, sizeof(g.aux_ld)));
    RECIPE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.aux, sizeof(g.aux)));
  }
  set_scale_pointers(p.desc, g);
  if (g.fast_accum) {
    const int8_t on = 1;
    RECIPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &on, sizeof(on)));
  }
  RECIPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, g.a_type, g.transA ? g.k : g.m, g.transA ? g.m : g.k, g.lda));
  RECIPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, g.b_type, g.transB ? g.n : g.k, g.transB ? g.k : g.n, g.ldb));
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
  const int wanted = options_.tune ? std::max(1, options_.tune_candidates) : 1;
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(wanted));
  int returned = 0;
  cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.d, p.d, pref, wanted, results.data(), &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  p.ok = st == CUBLAS_STATUS_SUCCESS && returned > 0;
  if (p.ok) {
    p.algo = results[0].algo;
    for (int i = 0; i < returned; ++i)
      if (results[size_t(i)].state == CUBLAS_STATUS_SUCCESS) p.candidates.push_back(results[size_t(i)].algo);
    if (p.candidates.size() < 2) p.candidates.clear();
  }
  return p;
}

bool CublasLtLinear::run(const Gemm& g, Workspace backup) {
  Plan& p = plan_for(g);
  if (!p.ok) return false;
  if (epilogue_has_bias(g.epilogue))
    RECIPE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  if (epilogue_has_aux(g.epilogue))
    RECIPE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.aux, sizeof(g.aux)));
  set_scale_pointers(p.desc, g);
  if (!p.candidates.empty() && g.beta != 0.f) {
    // An accumulating GEMM (a later micro-batch or classifier chunk) takes the algorithm timed for
    // its overwriting sibling, which always runs first in a step (first writes overwrite), instead
    // of timing on its own: that would need a backup of D (the 206 MB f32 classifier gradient at
    // gpt3_345m), i.e. a workspace that large. Without a sibling it is timed with a backup if one
    // fits, else it keeps the heuristic's choice.
    auto sib = plans_.find(key_of(g, false));
    if (sib != plans_.end() && sib->second.ok && sib->second.candidates.empty()) {
      p.algo = sib->second.algo;
      p.candidates.clear();
    }
  }
  if (!p.candidates.empty()) tune(p, g, backup);
  const float alpha = 1.f;
  RECIPE_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, g.A, p.a, g.B, p.b, &g.beta, g.D, p.d, g.D, p.d, &p.algo,
                                     workspace_, workspace_bytes_, stream_));
  return true;
}

// Timing needs a host wait on the stream: it is skipped (the key keeps the heuristic's choice
// and is tried again on its next call) while the stream is being captured into a CUDA graph.
// Every extra run must leave the outputs as the real call will: beta = 0 GEMMs rewrite the same
// D and aux from the same inputs (unless an output aliases an input: then no timing); a beta != 0
// GEMM accumulates into D, so D is saved to `backup` first and restored afterwards (no timing
// when backup is too small).
void CublasLtLinear::tune(Plan& p, const Gemm& g, Workspace backup) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  RECIPE_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capture));
  if (capture != cudaStreamCaptureStatusNone) return;
  std::vector<cublasLtMatmulAlgo_t> candidates;
  candidates.swap(p.candidates);  // tuned at most once per key, whatever happens below
  const bool aliased = g.D == g.A || g.D == g.B || (g.aux && (g.aux == g.A || g.aux == g.B));
  if (aliased) return;
  const size_t d_bytes = size_t(g.ldd) * size_t(g.n) * (g.d_type == CUDA_R_32F ? 4 : 2);
  void* saved = nullptr;
  if (g.beta != 0.f) {
    size_t start = (backup.used + 255) & ~size_t(255);
    if (!backup.ptr || start + d_bytes > backup.bytes) return;
    saved = backup.take(d_bytes, "GEMM algorithm timing");
    RECIPE_CUDA_CHECK(cudaMemcpyAsync(saved, g.D, d_bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  cudaEvent_t start = nullptr, stop = nullptr;
  RECIPE_CUDA_CHECK(cudaEventCreate(&start));
  RECIPE_CUDA_CHECK(cudaEventCreate(&stop));
  const float alpha = 1.f;
  constexpr int kReps = 3;
  float best_ms = 0.f, first_ms = -1.f;
  size_t best = 0;
  bool found = false;
  for (size_t i = 0; i < candidates.size(); ++i) {
    auto launch = [&] {
      return cublasLtMatmul(handle_, p.desc, &alpha, g.A, p.a, g.B, p.b, &g.beta, g.D, p.d, g.D, p.d, &candidates[i],
                            workspace_, workspace_bytes_, stream_);
    };
    if (launch() != CUBLAS_STATUS_SUCCESS) continue;  // warm-up; a refused candidate is skipped
    RECIPE_CUDA_CHECK(cudaEventRecord(start, stream_));
    bool ran = true;
    for (int r = 0; r < kReps && ran; ++r) ran = launch() == CUBLAS_STATUS_SUCCESS;
    RECIPE_CUDA_CHECK(cudaEventRecord(stop, stream_));
    RECIPE_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.f;
    RECIPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (ran && i == 0) first_ms = ms;
    if (ran && (!found || ms < best_ms)) best_ms = ms, best = i, found = true;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (saved) RECIPE_CUDA_CHECK(cudaMemcpyAsync(g.D, saved, d_bytes, cudaMemcpyDeviceToDevice, stream_));
  if (!found) return;
  if (options_.log_tuning && options_.notice) {
    std::ostringstream line;
    line << "recipe: cuBLASLt m=" << g.m << " n=" << g.n << " k=" << g.k << " epilogue=" << int(g.epilogue)
         << " beta=" << g.beta << ": heuristic #1 "
         << (first_ms < 0 ? std::string("refused") : std::to_string(first_ms * 1e3f / kReps)) << " us, chosen #"
         << best + 1 << " of " << candidates.size() << " " << best_ms * 1e3f / kReps << " us";
    options_.notice(line.str());
  }
  ++stats_.tuned_keys;
  if (best != 0) ++stats_.tuned_changed;
  p.algo = candidates[best];
}

void CublasLtLinear::forward(void* out, const void* inp, const void* weight, const void* bias, void* pre_gelu,
                             int64_t N, int64_t IC, int64_t OC, bool accumulate) {
  if (N <= 0 || OC <= 0) return;
  Gemm g{weight,
         true,
         IC,
         inp,
         false,
         IC,
         out,
         CUDA_R_16BF,
         OC,
         OC,
         N,
         IC,
         accumulate ? 1.f : 0.f,
         CUBLASLT_EPILOGUE_DEFAULT,
         bias,
         CUDA_R_16BF,
         nullptr,
         0};
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
      throw std::runtime_error("cuBLASLt: no algorithm for the linear forward GEMM [" + std::to_string(N) + "x" +
                               std::to_string(IC) + "]·[" + std::to_string(OC) + "x" + std::to_string(IC) + "]ᵀ");
    gelu_fwd_bf16(out, pre_gelu, N * OC, stream_);
    return;
  }
  g.epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  if (!run(g))
    throw std::runtime_error("cuBLASLt: no algorithm for the linear forward GEMM [" + std::to_string(N) + "x" +
                             std::to_string(IC) + "]·[" + std::to_string(OC) + "x" + std::to_string(IC) + "]ᵀ");
  ++stats_.fused;
}

void CublasLtLinear::backward_input(void* dinp, const void* dout, const void* weight, const void* gelu_aux, int64_t N,
                                    int64_t IC, int64_t OC, float* dinp_sum, bool overwrite_sum, Workspace scratch,
                                    bool accumulate) {
  if (N <= 0 || IC <= 0) return;
  Gemm g{weight,
         false,
         IC,
         dout,
         false,
         OC,
         dinp,
         CUDA_R_16BF,
         IC,
         IC,
         N,
         OC,
         accumulate ? 1.f : 0.f,
         gelu_aux ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_DEFAULT,
         nullptr,
         CUDA_R_16BF,
         const_cast<void*>(gelu_aux),
         gelu_aux ? IC : 0};
  auto sum_columns = [&] {
    if (dinp_sum) column_sum_accumulate(dinp_sum, dinp, N, IC, options_.tickets, scratch, stream_, overwrite_sum);
  };
  if (run(g)) {
    ++stats_.fused;
    sum_columns();
    return;
  }
  if (!gelu_aux)
    throw std::runtime_error("cuBLASLt: no algorithm for the linear dinp GEMM [" + std::to_string(N) + "x" +
                             std::to_string(OC) + "]·[" + std::to_string(OC) + "x" + std::to_string(IC) + "]");
  ++stats_.unfused;
  g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  g.aux = nullptr;
  g.aux_ld = 0;
  if (!run(g)) throw std::runtime_error("cuBLASLt: no algorithm for the linear dinp GEMM");
  gelu_bwd_bf16(dinp, dinp, gelu_aux, N * IC, stream_);
  sum_columns();
}

void CublasLtLinear::backward_weight(float* dweight, float* dbias, const void* dout, const void* inp, int64_t N,
                                     int64_t IC, int64_t OC, Workspace scratch, bool overwrite_dweight,
                                     bool overwrite_dbias) {
  if (N <= 0 || OC <= 0) return;
  if (!dweight) {
    if (dbias) column_sum_accumulate(dbias, dout, N, OC, options_.tickets, scratch, stream_, overwrite_dbias);
    return;
  }
  // beta = 0 on a gradient's first write of the step: no read of the old f32 values, and the
  // per-step memset that would otherwise zero them is skipped (Backend::begin_grad_writes).
  Gemm g{inp,
         false,
         IC,
         dout,
         true,
         OC,
         dweight,
         CUDA_R_32F,
         IC,
         IC,
         OC,
         N,
         overwrite_dweight ? 0.f : 1.f,
         CUBLASLT_EPILOGUE_DEFAULT,
         nullptr,
         CUDA_R_32F,
         nullptr,
         0};
  if (dbias && options_.bias_grad == BiasGrad::epilogue) {
    // BGRADB writes (does not accumulate) the bias gradient: straight into dbias on its first
    // write, otherwise into scratch, then added.
    Workspace ws = scratch;
    float* db = overwrite_dbias ? dbias : static_cast<float*>(ws.take(size_t(OC) * 4, "bias gradient"));
    g.epilogue = CUBLASLT_EPILOGUE_BGRADB;
    g.bias = db;
    if (run(g, ws)) {
      ++stats_.fused;
      if (db != dbias) add_f32(dbias, dbias, db, OC, stream_);
      return;
    }
    ++stats_.unfused;
    g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    g.bias = nullptr;
  }
  if (dbias) column_sum_accumulate(dbias, dout, N, OC, options_.tickets, scratch, stream_, overwrite_dbias);
  if (!run(g, scratch))
    throw std::runtime_error("cuBLASLt: no algorithm for the weight-gradient GEMM [" + std::to_string(OC) + "x" +
                             std::to_string(N) + "]·[" + std::to_string(N) + "x" + std::to_string(IC) +
                             "] (f32 accumulate)");
  if (!dbias || options_.bias_grad == BiasGrad::column_sum) ++stats_.fused;
}

}  // namespace recipe::kernels::cuda
