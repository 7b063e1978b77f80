// Fused softmax cross-entropy, one block per row of logits [N, Vp] (bf16, columns ≥ vocab are
// padding): pass 1 keeps a per-thread online (max, Σexp) over the row and combines them
// block-wide into the log-sum-exp; the loss is lse - logit[target]. Pass 2 (compute_grad)
// overwrites the logits in place with dloss·(softmax - onehot), zero in padding columns. Rows
// whose target is negative are ignored (loss 0, gradient 0); a target ≥ vocab gives a NaN loss so
// the trainer's NaN guard reports the bad data instead of reading out of bounds.
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"

namespace recipe::kernels::cuda {
namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ void online_add(float x, float& m, float& s) {
  if (x > m) {
    s = s * __expf(m - x) + 1.f;
    m = x;
  } else {
    s += __expf(x - m);
  }
}

template <bool VEC>
__global__ void __launch_bounds__(kThreads) cross_entropy_kernel(
    float* losses, bf16* logits, const int32_t* targets, int64_t Vp, int vocab, float dloss,
    bool compute_grad) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  bf16* x = logits + row * Vp;
  const int target = targets[row];
  if (target < 0 || target >= vocab) {
    if (threadIdx.x == 0) losses[row] = target < 0 ? 0.f : __int_as_float(0x7fc00000);
    if (compute_grad)
      for (int64_t j = threadIdx.x; j < Vp; j += blockDim.x) x[j] = __float2bfloat16_rn(0.f);
    return;
  }
  float m = -INFINITY, s = 0.f;
  if (VEC) {
    const int64_t full = vocab / 8;  // groups of 8 wholly inside the vocabulary
    for (int64_t g = threadIdx.x; g < full; g += blockDim.x) {
      float v[8];
      load8(x + g * 8, v);
#pragma unroll
      for (int k = 0; k < 8; ++k) online_add(v[k], m, s);
    }
    for (int64_t j = full * 8 + threadIdx.x; j < vocab; j += blockDim.x) online_add(to_f(x[j]), m, s);
  } else {
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) online_add(to_f(x[j]), m, s);
  }
  const float M = block_max(m, red);
  const float S = block_sum(m == -INFINITY ? 0.f : s * __expf(m - M), red);
  const float lse = M + __logf(S);
  if (threadIdx.x == 0) losses[row] = lse - to_f(x[target]);
  if (!compute_grad) return;
  __syncthreads();  // every thread has read x[target] before it is overwritten
  if (VEC) {
    for (int64_t g = threadIdx.x; g < Vp / 8; g += blockDim.x) {
      float v[8];
      load8(x + g * 8, v);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        int64_t j = g * 8 + k;
        v[k] = j < vocab ? (__expf(v[k] - lse) - (j == target ? 1.f : 0.f)) * dloss : 0.f;
      }
      store8(x + g * 8, v);
    }
  } else {
    for (int64_t j = threadIdx.x; j < Vp; j += blockDim.x) {
      float p = j < vocab ? (__expf(to_f(x[j]) - lse) - (j == target ? 1.f : 0.f)) * dloss : 0.f;
      x[j] = __float2bfloat16_rn(p);
    }
  }
}

}  // namespace

void cross_entropy(float* losses, void* logits, const int32_t* targets, int64_t N, int64_t Vp,
                   int vocab, float dloss, bool compute_grad, cudaStream_t s) {
  if (N <= 0) return;
  auto* x = static_cast<bf16*>(logits);
  if (Vp % 8 == 0 && aligned16(logits))
    cross_entropy_kernel<true><<<unsigned(N), kThreads, 0, s>>>(losses, x, targets, Vp, vocab,
                                                                dloss, compute_grad);
  else
    cross_entropy_kernel<false><<<unsigned(N), kThreads, 0, s>>>(losses, x, targets, Vp, vocab,
                                                                 dloss, compute_grad);
  RECIPE_CUDA_CHECK_LAUNCH("cross_entropy");
}

}  // namespace recipe::kernels::cuda
