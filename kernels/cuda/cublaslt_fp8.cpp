// FP8 GEMMs of the linear layers through cuBLASLt (the contract is in cublaslt_linear.hpp,
// CublasLtLinear::fp8_gemm): the bf16 path's descriptor/algorithm cache and tuning, with FP8
// operand types and A/B scale pointers. cuBLASLt computes
//   D = scale_a · scale_b · op(A)·op(B) (+ beta·C)   (accumulated in f32; C = D)
// and takes FP8 only in the "TN" form (A transposed, B not), i.e. both operands K-major; the
// callers hand over K-major copies (the backward's transposed casts, kernels/cuda/fp8.cu).
// Outputs: bf16 with the BIAS / GELU_AUX(_BIAS) / DGELU epilogues (bias and aux bf16), or f32
// (C f32, the weight gradient). Fast accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM) only where the
// caller asks (the forward GEMM, fp8.fast_accum_forward, as Transformer Engine does); the gradient
// GEMMs promote their partial sums to f32 as the bf16 GEMMs do.
#include <stdexcept>
#include <string>

#include "kernels/cuda/cublaslt_linear.hpp"
#include "kernels/cuda/fp8_kernels.hpp"

namespace recipe::kernels::cuda {

void CublasLtLinear::fp8_gemm(const Fp8Gemm& f, Workspace scratch) {
  if (f.M <= 0 || f.N <= 0) return;
  if (f.pre_gelu && f.dgelu_aux) throw std::invalid_argument("fp8_gemm: pre_gelu and dgelu_aux together");
  if (f.d_type == CUDA_R_32F && (f.bias || f.pre_gelu || f.dgelu_aux || f.column_sum))
    throw std::invalid_argument("fp8_gemm: an f32 output takes no epilogue");
  // Row-major D[M,N] = A[M,K]·B[N,K]ᵀ is column-major D'[N,M] = (B')ᵀ·A' with B' = [K,N] and
  // A' = [K,M] (ld K each): cuBLASLt's A is our B (transposed), its B our A.
  Gemm g{f.b.data,
         true,
         f.K,
         f.a.data,
         false,
         f.K,
         f.d,
         f.d_type,
         f.N,
         f.N,
         f.M,
         f.K,
         f.accumulate ? 1.f : 0.f,
         CUBLASLT_EPILOGUE_DEFAULT,
         f.bias,
         CUDA_R_16BF,
         nullptr,
         0,
         f.b.type,
         f.a.type,
         f.b.scale_inv,
         f.a.scale_inv,
         f.fast_accum};
  auto fail = [&] {
    throw std::runtime_error("cuBLASLt: no FP8 algorithm for [" + std::to_string(f.M) + "x" + std::to_string(f.K) +
                             "]·[" + std::to_string(f.N) + "x" + std::to_string(f.K) + "]ᵀ (types " +
                             std::to_string(int(f.a.type)) + ", " + std::to_string(int(f.b.type)) + " -> " +
                             std::to_string(int(f.d_type)) + ")");
  };
  const int64_t n = f.M * f.N;
  auto sum_columns = [&] {
    if (f.column_sum)
      column_sum_accumulate(f.column_sum, f.d, f.M, f.N, options_.tickets, scratch, stream_, f.overwrite_sum);
  };
  if (f.pre_gelu) {
    g.epilogue = f.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    g.aux = f.pre_gelu;
    g.aux_ld = f.N;
    if (run(g, scratch)) {
      ++stats_.fused;
      return;
    }
    g.aux = nullptr;
    g.aux_ld = 0;
    g.D = f.pre_gelu;  // the affine result into pre_gelu, then gelu (and the bias before it)
  } else if (f.dgelu_aux) {
    g.epilogue = CUBLASLT_EPILOGUE_DGELU;
    g.aux = const_cast<void*>(f.dgelu_aux);
    g.aux_ld = f.N;
    if (run(g, scratch)) {
      ++stats_.fused;
      sum_columns();
      return;
    }
    g.aux = nullptr;
    g.aux_ld = 0;
  }
  g.epilogue = f.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  bool bias_done = true;
  if (!run(g, scratch)) {
    if (!f.bias) fail();
    g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;  // the bias by its own kernel
    if (!run(g, scratch)) fail();
    bias_done = false;
  }
  const bool fused = bias_done && !f.pre_gelu && !f.dgelu_aux;
  ++(fused ? stats_.fused : stats_.unfused);
  if (!bias_done) add_bias_bf16(g.D, f.bias, f.M, f.N, stream_);
  if (f.pre_gelu) gelu_fwd_bf16(f.d, f.pre_gelu, n, stream_);
  if (f.dgelu_aux) gelu_bwd_bf16(f.d, f.d, f.dgelu_aux, n, stream_);
  sum_columns();
}

}  // namespace recipe::kernels::cuda
