// Elementwise kernels on bf16 activations (f32 math), casts, scaling, and the deterministic
// column sum used for bias gradients. bf16 kernels move 8 values (16 bytes) per thread when every
// pointer is 16-byte aligned, else one value per thread.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"

namespace recipe::kernels::cuda {

void* Workspace::take(size_t n, const char* what) {
  size_t start = (used + 255) & ~size_t(255);
  if (start + n > bytes)
    throw std::runtime_error(std::string("CUDA backend: ") + what + " needs " + std::to_string(n) +
                             " bytes of workspace but only " +
                             std::to_string(bytes > start ? bytes - start : 0) +
                             " are left; set RECIPE_CUDA_WORKSPACE_MB higher");
  used = start + n;
  return static_cast<char*>(ptr) + start;
}

namespace {

constexpr int kThreads = 256;

inline int grid_for(int64_t work, int threads = kThreads) {
  int64_t g = (work + threads - 1) / threads;
  return int(std::max<int64_t>(1, std::min<int64_t>(g, 65535LL * 8)));
}

// out = f(in0, in1) elementwise; in1 may be null for unary ops.
template <class F>
__global__ void map_bf16_kernel(bf16* out, const bf16* in0, const bf16* in1, int64_t n, F f,
                                bool vec) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  if (vec) {
    const int64_t nv = n / 8;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < nv; i += stride) {
      float a[8], b[8] = {0, 0, 0, 0, 0, 0, 0, 0}, r[8];
      load8(in0 + i * 8, a);
      if (in1) load8(in1 + i * 8, b);
#pragma unroll
      for (int k = 0; k < 8; ++k) r[k] = f(a[k], b[k]);
      store8(out + i * 8, r);
    }
    for (int64_t i = nv * 8 + int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
      out[i] = __float2bfloat16_rn(f(to_f(in0[i]), in1 ? to_f(in1[i]) : 0.f));
  } else {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
      out[i] = __float2bfloat16_rn(f(to_f(in0[i]), in1 ? to_f(in1[i]) : 0.f));
  }
}

struct AddOp { __device__ float operator()(float a, float b) const { return a + b; } };
struct GeluOp { __device__ float operator()(float x, float) const { return gelu_tanh(x); } };
// (dout, inp) -> dout·gelu'(inp)
struct GeluBwdOp {
  __device__ float operator()(float d, float x) const { return d * gelu_tanh_grad(x); }
};
struct ScaleOp {
  float k;
  __device__ float operator()(float x, float) const { return x * k; }
};

template <class F>
void map_bf16(void* out, const void* a, const void* b, int64_t n, F f, cudaStream_t s,
              const char* name) {
  if (n <= 0) return;
  bool vec = aligned16(out) && aligned16(a) && (!b || aligned16(b));
  int64_t work = vec ? n / 8 + 1 : n;
  map_bf16_kernel<<<grid_for(work), kThreads, 0, s>>>(
      static_cast<bf16*>(out), static_cast<const bf16*>(a), static_cast<const bf16*>(b), n, f, vec);
  RECIPE_CUDA_CHECK_LAUNCH("map_bf16");
  (void)name;
}

__global__ void cast_f32_bf16_kernel(bf16* out, const float* in, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(in[i]);
}
__global__ void cast_bf16_f32_kernel(float* out, const bf16* in, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __bfloat162float(in[i]);
}
__global__ void add_f32_kernel(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = a[i] + b[i];
}
__global__ void scale_f32_kernel(float* x, float k, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] *= k;
}

__device__ __forceinline__ float silu(float g) { return g / (1.f + __expf(-g)); }

// gate_up rows are [gate (F) | up (F)]; out rows are [F].
__global__ void swiglu_fwd_kernel(bf16* out, const bf16* gu, int64_t rows, int64_t F) {
  const int64_t n = rows * F;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i / F, c = i - r * F;
    float g = to_f(gu[r * 2 * F + c]), u = to_f(gu[r * 2 * F + F + c]);
    out[i] = __float2bfloat16_rn(silu(g) * u);
  }
}
__global__ void swiglu_bwd_kernel(bf16* dgu, const bf16* dout, const bf16* gu, int64_t rows,
                                  int64_t F) {
  const int64_t n = rows * F;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i / F, c = i - r * F;
    float g = to_f(gu[r * 2 * F + c]), u = to_f(gu[r * 2 * F + F + c]), d = to_f(dout[i]);
    float sig = 1.f / (1.f + __expf(-g));
    float sl = g * sig;
    dgu[r * 2 * F + c] = __float2bfloat16_rn(d * u * sig * (1.f + g * (1.f - sig)));
    dgu[r * 2 * F + F + c] = __float2bfloat16_rn(d * sl);
  }
}

// Column sums in two passes: pass 1, block (x = 32-column tile, y = row chunk) sums its rows per
// column in a fixed order and writes one partial row; pass 2 adds the partial rows in order.
constexpr int kColTile = 32, kRowLanes = 8;
__global__ void column_partial_kernel(float* partial, const bf16* src, int64_t rows, int64_t C,
                                      int64_t rows_per_chunk) {
  __shared__ float acc[kRowLanes][kColTile];
  const int64_t c = int64_t(blockIdx.x) * kColTile + threadIdx.x;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = min(rows, r0 + rows_per_chunk);
  float sum = 0.f;
  if (c < C)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) sum += to_f(src[r * C + c]);
  acc[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float t = 0.f;
#pragma unroll
    for (int k = 0; k < kRowLanes; ++k) t += acc[k][threadIdx.x];
    partial[int64_t(blockIdx.y) * C + c] = t;
  }
}
__global__ void column_finalize_kernel(float* dst, const float* partial, int chunks, int64_t C) {
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < C;
       c += int64_t(gridDim.x) * blockDim.x) {
    float t = 0.f;
    for (int k = 0; k < chunks; ++k) t += partial[int64_t(k) * C + c];
    dst[c] += t;
  }
}

}  // namespace

void cast_f32_to_bf16(void* out, const float* in, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  cast_f32_bf16_kernel<<<grid_for(n), kThreads, 0, s>>>(static_cast<bf16*>(out), in, n);
  RECIPE_CUDA_CHECK_LAUNCH("cast_f32_to_bf16");
}
void cast_bf16_to_f32(float* out, const void* in, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  cast_bf16_f32_kernel<<<grid_for(n), kThreads, 0, s>>>(out, static_cast<const bf16*>(in), n);
  RECIPE_CUDA_CHECK_LAUNCH("cast_bf16_to_f32");
}
void add_bf16(void* out, const void* a, const void* b, int64_t n, cudaStream_t s) {
  map_bf16(out, a, b, n, AddOp{}, s, "add_bf16");
}
void add_f32(float* out, const float* a, const float* b, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  add_f32_kernel<<<grid_for(n), kThreads, 0, s>>>(out, a, b, n);
  RECIPE_CUDA_CHECK_LAUNCH("add_f32");
}
void scale_f32(float* x, float k, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  scale_f32_kernel<<<grid_for(n), kThreads, 0, s>>>(x, k, n);
  RECIPE_CUDA_CHECK_LAUNCH("scale_f32");
}
void scale_bf16(void* x, float k, int64_t n, cudaStream_t s) {
  map_bf16(x, x, nullptr, n, ScaleOp{k}, s, "scale_bf16");
}
void gelu_fwd_bf16(void* out, const void* inp, int64_t n, cudaStream_t s) {
  map_bf16(out, inp, nullptr, n, GeluOp{}, s, "gelu_fwd");
}
void gelu_bwd_bf16(void* dinp, const void* dout, const void* inp, int64_t n, cudaStream_t s) {
  map_bf16(dinp, dout, inp, n, GeluBwdOp{}, s, "gelu_bwd");
}
void swiglu_fwd_bf16(void* out, const void* gate_up, int64_t rows, int64_t F, cudaStream_t s) {
  if (rows * F <= 0) return;
  swiglu_fwd_kernel<<<grid_for(rows * F), kThreads, 0, s>>>(
      static_cast<bf16*>(out), static_cast<const bf16*>(gate_up), rows, F);
  RECIPE_CUDA_CHECK_LAUNCH("swiglu_fwd");
}
void swiglu_bwd_bf16(void* dgate_up, const void* dout, const void* gate_up, int64_t rows,
                     int64_t F, cudaStream_t s) {
  if (rows * F <= 0) return;
  swiglu_bwd_kernel<<<grid_for(rows * F), kThreads, 0, s>>>(
      static_cast<bf16*>(dgate_up), static_cast<const bf16*>(dout),
      static_cast<const bf16*>(gate_up), rows, F);
  RECIPE_CUDA_CHECK_LAUNCH("swiglu_bwd");
}

void column_sum_accumulate(float* dst, const void* src, int64_t rows, int64_t C, Workspace ws,
                           cudaStream_t s) {
  if (rows <= 0 || C <= 0) return;
  // Enough row chunks to fill the GPU, bounded by what the workspace holds.
  int64_t col_tiles = (C + kColTile - 1) / kColTile;
  int64_t chunks = std::max<int64_t>(1, std::min<int64_t>((rows + 63) / 64, 1024 / col_tiles + 1));
  chunks = std::min<int64_t>(chunks, int64_t((ws.bytes - ws.used) / (size_t(C) * 4 + 256)));
  chunks = std::max<int64_t>(chunks, 1);
  int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
  float* partial = static_cast<float*>(ws.take(size_t(chunks) * C * 4, "bias gradient"));
  dim3 grid{unsigned(col_tiles), unsigned(chunks)}, block{kColTile, kRowLanes};
  column_partial_kernel<<<grid, block, 0, s>>>(partial, static_cast<const bf16*>(src), rows, C,
                                               rows_per_chunk);
  RECIPE_CUDA_CHECK_LAUNCH("column_partial");
  column_finalize_kernel<<<grid_for(C), kThreads, 0, s>>>(dst, partial, int(chunks), C);
  RECIPE_CUDA_CHECK_LAUNCH("column_finalize");
}

}  // namespace recipe::kernels::cuda
