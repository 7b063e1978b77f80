// Linear layers through cuBLASLt: bf16 operands, f32 accumulation, fused epilogues.
//   forward:  out = inp·Wᵀ (+ bias) with the BIAS or GELU_AUX_BIAS epilogue (pre_gelu = aux);
//   dinp:     dinp = dout·W, with the DGELU epilogue (aux = the previous layer's pre-GELU);
//   dweight:  dweight += doutᵀ·inp with beta = 1 into the f32 gradient, and the BGRADB epilogue
//             writing Σ_rows dout into a scratch vector that is then added to dbias.
// Every (shape, epilogue, dtypes, alignment) key gets its descriptors and heuristic algorithm
// built once and cached. When cuBLASLt has no algorithm for a fused epilogue, the same result is
// produced by the plain GEMM plus the equivalent elementwise/reduction kernel (remembered per key).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "kernels/cuda/cuda_kernels.hpp"

namespace recipe::kernels::cuda {

class CublasLtLinear {
 public:
  CublasLtLinear(cudaStream_t stream, void* workspace, size_t workspace_bytes);
  ~CublasLtLinear();
  CublasLtLinear(const CublasLtLinear&) = delete;
  CublasLtLinear& operator=(const CublasLtLinear&) = delete;

  // out[N,OC] (bf16) = inp[N,IC]·W[OC,IC]ᵀ + bias; pre_gelu != null: pre_gelu = affine,
  // out = gelu(pre_gelu).
  void forward(void* out, const void* inp, const void* weight, const void* bias, void* pre_gelu,
               int64_t N, int64_t IC, int64_t OC);
  // dinp[N,IC] (bf16) = dout·W (·gelu'(gelu_aux) if gelu_aux != null).
  void backward_input(void* dinp, const void* dout, const void* weight, const void* gelu_aux,
                      int64_t N, int64_t IC, int64_t OC);
  // dweight[OC,IC] (f32) += doutᵀ·inp; dbias[OC] (f32) += Σ_rows dout (if non-null).
  void backward_weight(float* dweight, float* dbias, const void* dout, const void* inp, int64_t N,
                       int64_t IC, int64_t OC, Workspace scratch);

  // Which epilogues ran fused (for tests and logs): counts of fused vs fallback calls.
  struct Stats {
    int64_t fused = 0, unfused = 0;
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
  };
  // (m, n, k, lda, ldb, ldd, aux_ld, transA, transB, d_type, epilogue, bias_type, and the
  // pointer alignments of A, B, D that the chosen algorithm may assume)
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int,
                         int, int, int, int, int, int>;
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool ok = false;
  };
  // Runs g; returns false (without running) when no algorithm supports its epilogue.
  bool run(const Gemm& g);
  Plan& plan_for(const Gemm& g);

  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_;
  size_t workspace_bytes_;
  std::map<Key, Plan> plans_;
  Stats stats_;
};

}  // namespace recipe::kernels::cuda
