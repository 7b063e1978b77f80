// Linear layers through cuBLASLt: bf16 operands, f32 accumulation, fused epilogues.
//   forward:  out = inp·Wᵀ (+ bias) with the BIAS or GELU_AUX_BIAS epilogue (pre_gelu = aux);
//   dinp:     dinp = dout·W, with the DGELU epilogue (aux = the previous layer's pre-GELU);
//   dweight:  dweight += doutᵀ·inp with beta = 1 into the f32 gradient; dbias += Σ_rows dout by
//             the one-launch column-sum kernel (elementwise.cu) accumulating straight into dbias.
//             (cuBLASLt's BGRADB epilogue only writes, not accumulates, and runs as a separate
//             kernel anyway: a scratch vector plus an add; kept as BiasGrad::epilogue.)
// Every (shape, epilogue, dtypes, alignment) key gets its descriptors and algorithm built once and
// cached. The algorithm is the heuristic's first choice, or, with `tune` (not in deterministic
// mode), the fastest of the heuristic's top candidates timed once on the key's first call with
// the real operands; the choice then stays fixed for the process. When cuBLASLt has no algorithm
// for a fused epilogue, the same result is produced by the plain GEMM plus the equivalent
// elementwise/reduction kernel (remembered per key).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda/cuda_kernels.hpp"

namespace recipe::kernels::cuda {

class CublasLtLinear {
 public:
  enum class BiasGrad { column_sum, epilogue };
  struct Options {
    bool tune = false;                        // time the heuristic's top candidates per key (non-deterministic mode)
    int tune_candidates = 8;                  // how many heuristic results to time
    bool log_tuning = false;                  // one notice line per timed key (BackendOptions::gemm_tune_log)
    std::function<void(std::string)> notice;  // where log_tuning lines go (the backend's notices)
    BiasGrad bias_grad = BiasGrad::column_sum;
    ColumnSumTickets tickets;  // required by BiasGrad::column_sum and the unfused fallbacks
  };
  CublasLtLinear(cudaStream_t stream, void* workspace, size_t workspace_bytes, const Options& options);
  ~CublasLtLinear();
  CublasLtLinear(const CublasLtLinear&) = delete;
  CublasLtLinear& operator=(const CublasLtLinear&) = delete;

  // out[N,OC] (bf16) = inp[N,IC]·W[OC,IC]ᵀ + bias; pre_gelu != null: pre_gelu = affine,
  // out = gelu(pre_gelu). accumulate: out += inp·Wᵀ (beta = 1; no bias, no pre_gelu).
  void forward(void* out, const void* inp, const void* weight, const void* bias, void* pre_gelu, int64_t N, int64_t IC,
               int64_t OC, bool accumulate = false);
  // dinp[N,IC] (bf16) = dout·W (·gelu'(gelu_aux) if gelu_aux != null); dinp_sum[IC] (f32, if
  // non-null) += Σ_rows dinp ("=" with overwrite_sum) by the column-sum kernel. (cuBLASLt's
  // DGELU_BGRAD epilogue would fuse it, but CUDA 13's cuBLASLt offers no algorithm for it with
  // bf16 output and an f32 bias gradient on sm_90: measured, see docs/performance.md.)
  // accumulate: dinp += dout·W (beta = 1; no gelu_aux, no dinp_sum).
  void backward_input(void* dinp, const void* dout, const void* weight, const void* gelu_aux, int64_t N, int64_t IC,
                      int64_t OC, float* dinp_sum = nullptr, bool overwrite_sum = false, Workspace scratch = {},
                      bool accumulate = false);
  // dweight[OC,IC] (f32) += doutᵀ·inp; dbias[OC] (f32) += Σ_rows dout (if non-null); each "="
  // instead when its overwrite flag is set (the gradient's first write of the step).
  void backward_weight(float* dweight, float* dbias, const void* dout, const void* inp, int64_t N, int64_t IC,
                       int64_t OC, Workspace scratch, bool overwrite_dweight = false, bool overwrite_dbias = false);

  // FP8 GEMMs (cublaslt_fp8.cpp), through the same descriptor and algorithm cache. Row-major
  //   D[M,N] (+)= (a.scale_inv·b.scale_inv) · A[M,K] · B[N,K]ᵀ (+ bias[N])
  // with A and B FP8 (E4M3, or E5M2 for at most one of them), both K-major as cuBLASLt's FP8
  // kernels require ("TN": the column-major view is D'[N,M] = B'ᵀ·A' with B' = [K,N], A' = [K,M]).
  // D is bf16 (bias bf16; pre_gelu: pre_gelu = the affine result, D = gelu of it) or f32 (the
  // weight gradient; no epilogue); accumulate: beta = 1. dgelu_aux (bf16 [M,N]): D ·= gelu'(aux).
  // Where cuBLASLt has no algorithm for a fused epilogue, the plain GEMM runs and a kernel adds
  // the bias / GELU / dGELU after it. M, N, K multiples of 16, 16-byte aligned pointers.
  struct Fp8Operand {
    const void* data;
    cudaDataType_t type;     // CUDA_R_8F_E4M3 or CUDA_R_8F_E5M2
    const float* scale_inv;  // device f32 [1]
  };
  struct Fp8Gemm {
    void* d;
    cudaDataType_t d_type;  // CUDA_R_16BF or CUDA_R_32F
    Fp8Operand a, b;
    int64_t M, N, K;
    const void* bias = nullptr;
    void* pre_gelu = nullptr;
    const void* dgelu_aux = nullptr;
    bool accumulate = false;
    bool fast_accum = false;  // CUBLASLT_MATMUL_DESC_FAST_ACCUM (Fp8LinearFwdArgs::fast_accum)
    // Optional (bf16 D): column_sum[N] (f32) += Σ_rows D, the final D ("=" with overwrite_sum).
    float* column_sum = nullptr;
    bool overwrite_sum = false;
  };
  // scratch: the column sum's and, for an accumulating GEMM, the algorithm timing's backup of D.
  void fp8_gemm(const Fp8Gemm& g, Workspace scratch);

  // Which epilogues ran fused (for tests and logs): counts of fused vs fallback calls.
  struct Stats {
    int64_t fused = 0, unfused = 0;
    int64_t tuned_keys = 0, tuned_changed = 0;  // keys timed; of those, where #1 was not fastest
  };
  Stats stats() const { return stats_; }

 private:
  // A column-major GEMM D[m,n] = alpha·op(A)·op(B) + beta·C (C = D), as cuBLASLt sees it.
  struct Gemm {
    const void* A;
    bool transA;
    int64_t lda;
    const void* B;
    bool transB;
    int64_t ldb;
    void* D;
    cudaDataType_t d_type;
    int64_t ldd;
    int64_t m, n, k;
    float beta;
    cublasLtEpilogue_t epilogue;
    const void* bias;  // bias (forward) or bias-gradient output (BGRADB)
    cudaDataType_t bias_type;
    void* aux;
    int64_t aux_ld;
    // Operand types and scales: bf16 without scales, or FP8 with their inverse scales (fp8_gemm).
    cudaDataType_t a_type = CUDA_R_16BF, b_type = CUDA_R_16BF;
    const float* a_scale = nullptr;
    const float* b_scale = nullptr;
    bool fast_accum = false;  // FP8 only
  };
  // (m, n, k, lda, ldb, ldd, aux_ld, transA, transB, d_type, epilogue, bias_type, and the
  // pointer alignments of A, B, D that the chosen algorithm may assume, whether beta != 0, the
  // operand types a_type, b_type, and fast_accum)
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int, int, int,
                         int, int, int, int, int, int>;
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool ok = false;
    std::vector<cublasLtMatmulAlgo_t> candidates;  // heuristic order; emptied once tuned
  };
  // Runs g; returns false (without running) when no algorithm supports its epilogue. `backup`
  // (may be empty) is scratch where D is saved while candidates are timed when beta != 0.
  bool run(const Gemm& g, Workspace backup = {});
  static Key key_of(const Gemm& g, bool beta_nonzero);
  static void set_scale_pointers(cublasLtMatmulDesc_t desc, const Gemm& g);
  Plan& plan_for(const Gemm& g);
  // Times p.candidates on g's operands, sets p.algo to the fastest, leaves D as it found it.
  void tune(Plan& p, const Gemm& g, Workspace backup);

  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_;
  size_t workspace_bytes_;
  Options options_;
  std::map<Key, Plan> plans_;
  Stats stats_;
};

}  // namespace recipe::kernels::cuda
