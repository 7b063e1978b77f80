// Token + position embedding forward and a deterministic backward.
// dwte: the (token, row) pairs are sorted by token with a stable radix sort (CUB), so each
// token's rows sit together in increasing row order; one block per run of equal tokens then sums
// that run's dout rows in that order and adds the sum to the token's dwte row. No float atomics:
// bitwise repeatable whatever the scheduling. dwpe: one thread per (t, c) sums over the batch in
// order and adds into row p(t) (positions[t], or t; ops.hpp). A position outside the table (bad
// input the host cannot see) reads a zero row and adds nothing, as a token outside the shard does.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"

namespace recipe::kernels::cuda {
namespace {

// The position-table row of sample row t: positions[t] or t; −1 when outside the table.
__device__ __forceinline__ int64_t position_row(const int32_t* positions, int t, int64_t wpe_rows) {
  const int64_t p = positions ? int64_t(positions[t]) : int64_t(t);
  return p >= 0 && p < wpe_rows ? p : -1;
}

__global__ void embedding_fwd_kernel(bf16* out, const int32_t* tokens, const bf16* wte, int64_t wte_rows,
                                     const bf16* wpe, int64_t wpe_rows, const int32_t* positions, int64_t N, int64_t C,
                                     int T, int vocab_start) {
  const int64_t total = N * C;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t n = i / C, c = i - n * C;
    int64_t row = int64_t(tokens[n]) - vocab_start;
    float v = (row >= 0 && row < wte_rows) ? to_f(wte[row * C + c]) : 0.f;
    if (wpe) {
      const int64_t p = position_row(positions, int(n % T), wpe_rows);
      if (p >= 0) v += to_f(wpe[p * C + c]);
    }
    out[i] = __float2bfloat16_rn(v);
  }
}

__global__ void iota_kernel(int32_t* v, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    v[i] = int32_t(i);
}

// Block i handles the run of equal tokens that starts at sorted position i (other blocks exit).
__global__ void dwte_runs_kernel(float* dwte, int64_t wte_rows, const bf16* dout, const int32_t* sorted_tok,
                                 const int32_t* sorted_row, int64_t N, int64_t C, int vocab_start) {
  const int64_t start = blockIdx.x;
  const int32_t tok = sorted_tok[start];
  if (start > 0 && sorted_tok[start - 1] == tok) return;
  const int64_t row = int64_t(tok) - vocab_start;
  if (row < 0 || row >= wte_rows) return;
  int64_t end = start + 1;
  while (end < N && sorted_tok[end] == tok) ++end;
  for (int64_t c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x; c < C; c += int64_t(gridDim.y) * blockDim.x) {
    float acc = 0.f;
    for (int64_t k = start; k < end; ++k) acc += to_f(dout[int64_t(sorted_row[k]) * C + c]);
    dwte[row * C + c] += acc;
  }
}

__global__ void dwpe_kernel(float* dwpe, int64_t wpe_rows, const int32_t* positions, const bf16* dout, int64_t N,
                            int64_t C, int T) {
  const int64_t total = int64_t(T) * C, batches = N / T;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / C, p = position_row(positions, int(t), wpe_rows);
    if (p < 0) continue;
    float acc = 0.f;
    for (int64_t b = 0; b < batches; ++b) acc += to_f(dout[b * total + i]);
    dwpe[p * C + (i - t * C)] += acc;
  }
}

unsigned blocks_for(int64_t work) {
  int64_t b = (work + 255) / 256;
  return unsigned(b < 1 ? 1 : (b > (1 << 20) ? (1 << 20) : b));
}

}  // namespace

void embedding_fwd(void* out, const int32_t* tokens, const void* wte, int64_t wte_rows, const void* wpe,
                   int64_t wpe_rows, const int32_t* positions, int64_t N, int64_t C, int T, int vocab_start,
                   cudaStream_t s) {
  if (N * C <= 0) return;
  embedding_fwd_kernel<<<blocks_for(N * C), 256, 0, s>>>(static_cast<bf16*>(out), tokens, static_cast<const bf16*>(wte),
                                                         wte_rows, static_cast<const bf16*>(wpe), wpe_rows, positions,
                                                         N, C, T, vocab_start);
  RECIPE_CUDA_CHECK_LAUNCH("embedding_fwd");
}

void embedding_bwd(float* dwte, int64_t wte_rows, float* dwpe, int64_t wpe_rows, const int32_t* positions,
                   const void* dout, const int32_t* tokens, int64_t N, int64_t C, int T, int vocab_start, Workspace ws,
                   cudaStream_t s) {
  if (N <= 0) return;
  auto* d = static_cast<const bf16*>(dout);
  if (dwte) {
    auto* sorted_tok = static_cast<int32_t*>(ws.take(size_t(N) * 4, "embedding backward"));
    auto* rows_in = static_cast<int32_t*>(ws.take(size_t(N) * 4, "embedding backward"));
    auto* sorted_row = static_cast<int32_t*>(ws.take(size_t(N) * 4, "embedding backward"));
    size_t temp_bytes = 0;
    RECIPE_CUDA_CHECK(
        cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, tokens, sorted_tok, rows_in, sorted_row, N, 0, 32, s));
    void* temp = ws.take(temp_bytes, "embedding backward (radix sort)");
    iota_kernel<<<blocks_for(N), 256, 0, s>>>(rows_in, N);
    RECIPE_CUDA_CHECK_LAUNCH("iota");
    RECIPE_CUDA_CHECK(
        cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tokens, sorted_tok, rows_in, sorted_row, N, 0, 32, s));
    unsigned threads = C >= 256 ? 256 : 32 * unsigned((C + 31) / 32);
    unsigned col_blocks = unsigned((C + threads * 4 - 1) / (threads * 4));  // ≥4 columns/thread
    dim3 grid{unsigned(N), col_blocks};
    dwte_runs_kernel<<<grid, threads, 0, s>>>(dwte, wte_rows, d, sorted_tok, sorted_row, N, C, vocab_start);
    RECIPE_CUDA_CHECK_LAUNCH("dwte_runs");
  }
  if (dwpe) {
    dwpe_kernel<<<blocks_for(int64_t(T) * C), 256, 0, s>>>(dwpe, wpe_rows, positions, d, N, C, T);
    RECIPE_CUDA_CHECK_LAUNCH("dwpe");
  }
}

}  // namespace recipe::kernels::cuda
