// The samples of packed rows as cuDNN's ragged (THD) attention reads them: per sample slot a length
// and element offsets into qkv, out and lse (see cuda_kernels.hpp). One block per row: each thread
// counts the sample starts (position 0) in its chunk of the row, a block scan (CUB) numbers them,
// and each start writes its slot; the slots after the row's last sample get length 0 and the
// offset of the next row's start, so every offset array stays non-decreasing. cuDNN sizes its ragged
// workspace tensors (the backward's softmax sums) from the token count and the Stats strides, so
// the ragged Stats are token-major [B·T, Hq]; lse_to_tokens / lse_from_tokens convert to and from
// the [B, Hq, T] lse of ops.hpp.
#include <cub/block/block_scan.cuh>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"

namespace recipe::kernels::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void packed_segments_kernel(const int32_t* __restrict__ pos, int T, int slots, int64_t qkv_row,
                                       int64_t out_row, int Hq, int rows, PackedSegments seg) {
  extern __shared__ int32_t starts[];  // [slots + 1]: the row's sample starts, then T
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ int count;
  const int b = blockIdx.x;
  const int32_t* p = pos + int64_t(b) * T;
  const int chunk = (T + kThreads - 1) / kThreads;
  const int t0 = min(T, int(threadIdx.x) * chunk), t1 = min(T, t0 + chunk);
  int mine = 0;
  for (int t = t0; t < t1; ++t) mine += p[t] == 0 || t == 0;
  int first = 0, total = 0;
  Scan(scan_tmp).ExclusiveSum(mine, first, total);
  for (int t = t0, k = first; t < t1; ++t)
    if (p[t] == 0 || t == 0) {
      if (k < slots) starts[k] = t;
      ++k;
    }
  if (threadIdx.x == 0) count = min(total, slots);
  __syncthreads();
  if (threadIdx.x == 0) starts[count] = T;
  __syncthreads();
  for (int j = threadIdx.x; j < slots; j += kThreads) {
    const int64_t slot = int64_t(b) * slots + j;
    const int start = j < count ? starts[j] : T;
    const int len = j < count ? starts[j + 1] - start : 0;
    seg.seq_len[slot] = len;
    const int64_t token = int64_t(b) * T + start;
    seg.qkv_offset[slot] = int32_t(token * qkv_row);
    seg.out_offset[slot] = int32_t(token * out_row);
    seg.lse_offset[slot] = int32_t(token * Hq);  // token-major lse [B·T, Hq]
  }
  if (b == rows - 1 && threadIdx.x == 0) {
    const int64_t end = int64_t(rows) * slots, tokens = int64_t(rows) * T;
    seg.qkv_offset[end] = int32_t(tokens * qkv_row);
    seg.out_offset[end] = int32_t(tokens * out_row);
    seg.lse_offset[end] = int32_t(tokens * Hq);
  }
}

// [B, Hq, T] <-> [B·T, Hq]: one thread per element, reads or writes coalesced along T.
__global__ void lse_transpose_kernel(float* __restrict__ dst, const float* __restrict__ src, int T, int Hq, int64_t n,
                                     bool to_tokens) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // index in [B, Hq, T]
  if (i >= n) return;
  const int64_t t = i % T, h = (i / T) % Hq, b = i / (int64_t(T) * Hq);
  const int64_t tok = (b * T + t) * Hq + h;
  if (to_tokens)
    dst[tok] = src[i];
  else
    dst[i] = src[tok];
}

}  // namespace

bool packed_segments_fit(int B, int T, int Hq, int Hkv, int D) {
  const int64_t tokens = int64_t(B) * T;
  return tokens * (Hq + 2 * Hkv) * D < (int64_t(1) << 31) && int64_t(B) * Hq * T < (int64_t(1) << 31);
}

void lse_to_tokens(float* tokens, const float* heads, int B, int T, int Hq, cudaStream_t s) {
  const int64_t n = int64_t(B) * Hq * T;
  lse_transpose_kernel<<<unsigned((n + kThreads - 1) / kThreads), kThreads, 0, s>>>(tokens, heads, T, Hq, n, true);
  RECIPE_CUDA_CHECK(cudaGetLastError());
}

void lse_from_tokens(float* heads, const float* tokens, int B, int T, int Hq, cudaStream_t s) {
  const int64_t n = int64_t(B) * Hq * T;
  lse_transpose_kernel<<<unsigned((n + kThreads - 1) / kThreads), kThreads, 0, s>>>(heads, tokens, T, Hq, n, false);
  RECIPE_CUDA_CHECK(cudaGetLastError());
}

void packed_segments(PackedSegments seg, const int32_t* pos, int B, int T, int slots, int Hq, int Hkv, int D,
                     cudaStream_t s) {
  const int64_t qkv_row = int64_t(Hq + 2 * Hkv) * D, out_row = int64_t(Hq) * D;
  const size_t shared = size_t(slots + 1) * sizeof(int32_t);
  packed_segments_kernel<<<B, kThreads, shared, s>>>(pos, T, slots, qkv_row, out_row, Hq, B, seg);
  RECIPE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace recipe::kernels::cuda
