// Vocab-parallel cross entropy on one tensor-parallel rank: logits [n, Vl] (bf16) are the columns
// [vocab_start, vocab_start + Vl) of the full rows, the first `valid_cols` of them real vocabulary.
// Three kernels, one block per row, f32 accumulation; the caller all-reduces between them:
//   max:    rowmax[r] = max over the valid columns (−inf when the shard has none);
//   sums:   sums[r] = Σ exp(x − rowmax[r]) over the valid columns, sums[n + r] = x[target] when the
//           target is a column of this shard (else 0);
//   finish: loss = log(Σ) + rowmax − x[target]; with compute_grad the logits are overwritten in
//           place by dloss[r]·(exp(x − lse) − onehot), zero in padding columns and ignored rows
//           (dloss: f32 [n], each row's weight in the objective).
// Rows load 8 bf16 (16 bytes) at a time when Vl is a multiple of 8 and the buffer is aligned. A
// shard that holds padding holds the end of the vocabulary, so a target past it is out of vocab:
// its sums get a NaN (as cross_entropy's loss does) and the trainer's NaN guard reports bad data.
// The CudaBackend methods (argument checks, dispatch on the backend's stream) live here too.
#include <string>

#include "kernels/cuda/cuda_backend.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/op_checks.hpp"
#include "kernels/cuda/cuda_common.cuh"

namespace recipe::kernels::cuda {
namespace {

constexpr int kThreads = 512;

// Calls f(j, value) for the valid columns j < valid of row x, each thread its own columns.
template <bool VEC, class F>
__device__ __forceinline__ void for_valid(const bf16* x, int valid, F&& f) {
  int64_t start = 0;
  if (VEC) {
    const int64_t full = valid / 8;  // groups of 8 wholly inside the valid columns
    for (int64_t g = threadIdx.x; g < full; g += blockDim.x) {
      float v[8];
      load8(x + g * 8, v);
#pragma unroll
      for (int k = 0; k < 8; ++k) f(g * 8 + k, v[k]);
    }
    start = full * 8;
  }
  for (int64_t j = start + threadIdx.x; j < valid; j += blockDim.x) f(j, to_f(x[j]));
}

template <bool VEC>
__global__ void __launch_bounds__(kThreads) vp_max_kernel(float* rowmax, const bf16* logits, int64_t Vl, int valid) {
  __shared__ float red[32];
  const bf16* x = logits + int64_t(blockIdx.x) * Vl;
  float m = -INFINITY;
  for_valid<VEC>(x, valid, [&](int64_t, float v) { m = fmaxf(m, v); });
  m = block_max(m, red);
  if (threadIdx.x == 0) rowmax[blockIdx.x] = m;
}

template <bool VEC>
__global__ void __launch_bounds__(kThreads)
    vp_sums_kernel(float* sums, const bf16* logits, const float* rowmax, const int32_t* targets, int64_t n, int64_t Vl,
                   int vocab_start, int valid) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const bf16* x = logits + row * Vl;
  const float M = rowmax[row];
  float s = 0.f;
  for_valid<VEC>(x, valid, [&](int64_t, float v) { s += __expf(v - M); });
  s = block_sum(s, red);
  if (threadIdx.x != 0) return;
  sums[row] = s;
  const int target = targets[row];
  const int64_t local = int64_t(target) - vocab_start;
  float t = 0.f;
  if (target >= 0 && local >= 0) {
    if (local < valid)
      t = to_f(x[local]);
    else if (valid < Vl)  // this shard ends the vocabulary: the target lies past it
      t = __int_as_float(0x7fc00000);
  }
  sums[n + row] = t;
}

template <bool VEC>
__global__ void __launch_bounds__(kThreads)
    vp_finish_kernel(float* losses, bf16* logits, const float* rowmax, const float* sums, const int32_t* targets,
                     int64_t n, int64_t Vl, int vocab_start, int valid, const float* dlosses, bool compute_grad) {
  const int64_t row = blockIdx.x;
  bf16* x = logits + row * Vl;
  const int target = targets[row];
  if (target < 0) {
    if (threadIdx.x == 0) losses[row] = 0.f;
    if (compute_grad)
      for (int64_t j = threadIdx.x; j < Vl; j += blockDim.x) x[j] = __float2bfloat16_rn(0.f);
    return;
  }
  const float lse = rowmax[row] + __logf(sums[row]);
  if (threadIdx.x == 0) losses[row] = lse - sums[n + row];
  if (!compute_grad) return;
  // Each thread reads and rewrites only its own columns, so no barrier is needed.
  const float dloss = dlosses[row];  // this row's weight in the objective
  const int64_t local = int64_t(target) - vocab_start;
  auto grad = [&](int64_t j, float v) {
    return j < valid ? (__expf(v - lse) - (j == local ? 1.f : 0.f)) * dloss : 0.f;
  };
  if (VEC) {
    for (int64_t g = threadIdx.x; g < Vl / 8; g += blockDim.x) {
      float v[8];
      load8(x + g * 8, v);
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = grad(g * 8 + k, v[k]);
      store8(x + g * 8, v);
    }
  } else {
    for (int64_t j = threadIdx.x; j < Vl; j += blockDim.x) x[j] = __float2bfloat16_rn(grad(j, to_f(x[j])));
  }
}

bool vectorizable(int64_t Vl, const void* logits) { return Vl % 8 == 0 && aligned16(logits); }

// logits must be [n, Vl] bf16 and 0 ≤ valid_cols ≤ Vl; returns Vl.
int64_t shard_columns(const char* op, const Tensor& logits, int64_t n, int valid_cols) {
  expect(op, "logits", logits, DType::bf16);
  const int64_t cols = logits.ndim >= 1 ? logits.dim(-1) : 0;
  if (logits.numel() != n * cols)
    bad_arg(op, "logits " + logits.shape_str() + " must be [n=" + std::to_string(n) + ", shard columns]");
  if (valid_cols < 0 || valid_cols > cols)
    bad_arg(op, "valid_cols=" + std::to_string(valid_cols) + " must be in 0.." + std::to_string(cols) +
                    " (clamp(vocab - vocab_start, 0, shard columns))");
  return cols;
}
void expect_vocab_start(const char* op, int vocab_start) {
  if (vocab_start < 0) bad_arg(op, "vocab_start=" + std::to_string(vocab_start) + " must not be negative");
}

}  // namespace

void CudaBackend::vocab_parallel_ce_max(Tensor rowmax, Tensor logits, int valid_cols) {
  const char* op = "vocab_parallel_ce_max";
  expect(op, "rowmax", rowmax, DType::f32);
  const int64_t n = rowmax.numel();
  const int64_t Vl = shard_columns(op, logits, n, valid_cols);
  if (n <= 0) return;
  auto* x = static_cast<const bf16*>(logits.ptr);
  if (vectorizable(Vl, x))
    vp_max_kernel<true><<<unsigned(n), kThreads, 0, stream_>>>(rowmax.as<float>(), x, Vl, valid_cols);
  else
    vp_max_kernel<false><<<unsigned(n), kThreads, 0, stream_>>>(rowmax.as<float>(), x, Vl, valid_cols);
  RECIPE_CUDA_CHECK_LAUNCH("vocab_parallel_ce_max");
}

void CudaBackend::vocab_parallel_ce_sums(const VocabParallelCeSumsArgs& args) {
  const Tensor sums = args.sums, logits = args.logits, rowmax = args.rowmax, targets = args.targets;
  const int vocab_start = args.vocab_start, valid_cols = args.valid_cols;
  const char* op = "vocab_parallel_ce_sums";
  expect(op, "targets", targets, DType::i32);
  const int64_t n = targets.numel();
  const int64_t Vl = shard_columns(op, logits, n, valid_cols);
  expect(op, "rowmax", rowmax, DType::f32);
  expect_numel(op, "rowmax", rowmax, n);
  expect(op, "sums", sums, DType::f32);
  expect_numel(op, "sums", sums, 2 * n);
  expect_vocab_start(op, vocab_start);
  if (n <= 0) return;
  auto* x = static_cast<const bf16*>(logits.ptr);
  if (vectorizable(Vl, x))
    vp_sums_kernel<true><<<unsigned(n), kThreads, 0, stream_>>>(sums.as<float>(), x, rowmax.as<float>(),
                                                                targets.as<int32_t>(), n, Vl, vocab_start, valid_cols);
  else
    vp_sums_kernel<false><<<unsigned(n), kThreads, 0, stream_>>>(sums.as<float>(), x, rowmax.as<float>(),
                                                                 targets.as<int32_t>(), n, Vl, vocab_start, valid_cols);
  RECIPE_CUDA_CHECK_LAUNCH("vocab_parallel_ce_sums");
}

void CudaBackend::vocab_parallel_ce_finish(const VocabParallelCeFinishArgs& args) {
  const Tensor losses = args.losses, logits = args.logits, rowmax = args.rowmax, sums = args.sums,
               targets = args.targets;
  const int vocab_start = args.vocab_start, valid_cols = args.valid_cols;
  const bool compute_grad = args.compute_grad;
  const char* op = "vocab_parallel_ce_finish";
  expect(op, "targets", targets, DType::i32);
  const int64_t n = targets.numel();
  const int64_t Vl = shard_columns(op, logits, n, valid_cols);
  expect(op, "losses", losses, DType::f32);
  expect_numel(op, "losses", losses, n);
  expect(op, "rowmax", rowmax, DType::f32);
  expect_numel(op, "rowmax", rowmax, n);
  expect(op, "sums", sums, DType::f32);
  expect_numel(op, "sums", sums, 2 * n);
  expect_vocab_start(op, vocab_start);
  if (compute_grad) {
    expect(op, "dloss", args.dloss, DType::f32);
    expect_numel(op, "dloss", args.dloss, n);
  }
  const float* dloss = compute_grad ? args.dloss.as<float>() : nullptr;
  if (n <= 0) return;
  auto* x = static_cast<bf16*>(logits.ptr);
  if (vectorizable(Vl, x))
    vp_finish_kernel<true><<<unsigned(n), kThreads, 0, stream_>>>(losses.as<float>(), x, rowmax.as<float>(),
                                                                  sums.as<float>(), targets.as<int32_t>(), n, Vl,
                                                                  vocab_start, valid_cols, dloss, compute_grad);
  else
    vp_finish_kernel<false><<<unsigned(n), kThreads, 0, stream_>>>(losses.as<float>(), x, rowmax.as<float>(),
                                                                   sums.as<float>(), targets.as<int32_t>(), n, Vl,
                                                                   vocab_start, valid_cols, dloss, compute_grad);
  RECIPE_CUDA_CHECK_LAUNCH("vocab_parallel_ce_finish");
}

}  // namespace recipe::kernels::cuda
