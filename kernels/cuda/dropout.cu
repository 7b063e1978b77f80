// Dropout with a counter-based mask (kernels/dropout_mask.hpp): each thread hashes its element's
// global position, so the kernel drops exactly what the CPU reference (kernels/cpu/dropout.cpp)
// drops; f32 arithmetic, one rounding into out. One grid-stride loop over [rows, cols].
#include <algorithm>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/dropout_mask.hpp"

namespace recipe::kernels::cuda {

namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void dropout_kernel(T* out, const T* inp, int64_t rows, int64_t cols, DropoutMask m) {
  const int64_t n = rows * cols;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e / cols, j = e - i * cols;
    const uint64_t index = uint64_t(m.first_row + i) * uint64_t(m.row_stride) + uint64_t(m.first_col + j);
    const float v = dropout_keep(m.key, index, m.threshold) ? to_f(inp[e]) * m.keep_scale : 0.0f;
    out[e] = from_f<T>(m.accumulate ? to_f(out[e]) + v : v);
  }
}

}  // namespace

void dropout(void* out, const void* inp, bool bf16_data, int64_t rows, int64_t cols, const DropoutMask& m,
             cudaStream_t s) {
  const int64_t n = rows * cols;
  if (n <= 0) return;
  const int grid = int(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, 65535LL * 8)));
  if (bf16_data)
    dropout_kernel<<<grid, kThreads, 0, s>>>(static_cast<bf16*>(out), static_cast<const bf16*>(inp), rows, cols, m);
  else
    dropout_kernel<<<grid, kThreads, 0, s>>>(static_cast<float*>(out), static_cast<const float*>(inp), rows, cols, m);
  RECIPE_CUDA_CHECK_LAUNCH("dropout");
}

}  // namespace recipe::kernels::cuda
