// Elementwise kernels on bf16 activations (f32 math), casts, scaling, and the deterministic
// one-launch column sum used for bias gradients. bf16 kernels move 8 values (16 bytes) per thread when every
// pointer is 16-byte aligned, else one value per thread.
#include <algorithm>
#include <cstdint>
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
                             " bytes of workspace but only " + std::to_string(bytes > start ? bytes - start : 0) +
                             " are left; raise kernels.workspace_mb");
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
__global__ void map_bf16_kernel(bf16* out, const bf16* in0, const bf16* in1, int64_t n, F f, bool vec) {
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

struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct GeluOp {
  __device__ float operator()(float x, float) const { return gelu_tanh(x); }
};
// (dout, inp) -> dout·gelu'(inp)
struct GeluBwdOp {
  __device__ float operator()(float d, float x) const { return d * gelu_tanh_grad(x); }
};
struct ScaleOp {
  float k;
  __device__ float operator()(float x, float) const { return x * k; }
};

template <class F>
void map_bf16(void* out, const void* a, const void* b, int64_t n, F f, cudaStream_t s, const char* name) {
  if (n <= 0) return;
  bool vec = aligned16(out) && aligned16(a) && (!b || aligned16(b));
  int64_t work = vec ? n / 8 + 1 : n;
  map_bf16_kernel<<<grid_for(work), kThreads, 0, s>>>(static_cast<bf16*>(out), static_cast<const bf16*>(a),
                                                      static_cast<const bf16*>(b), n, f, vec);
  RECIPE_CUDA_CHECK_LAUNCH("map_bf16");
  (void)name;
}

__global__ void cast_f32_bf16_kernel(bf16* out, const float* in, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(in[i]);
}
__global__ void cast_bf16_f32_kernel(float* out, const bf16* in, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __bfloat162float(in[i]);
}
__global__ void add_f32_kernel(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = a[i] + b[i];
}
__global__ void scale_f32_kernel(float* x, float k, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] *= k;
}

// gate_up rows are [gate (F) | up (F)]; out rows are [F].
__global__ void swiglu_fwd_kernel(bf16* out, const bf16* gu, int64_t rows, int64_t F) {
  const int64_t n = rows * F;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i / F, c = i - r * F;
    float g = to_f(gu[r * 2 * F + c]), u = to_f(gu[r * 2 * F + F + c]);
    out[i] = __float2bfloat16_rn(swiglu_value(g, u));
  }
}
// The same, 8 columns per thread with 16-byte loads and stores (F % 8 == 0, 16-byte aligned
// rows): the scalar kernels reach ~1.6 TB/s at the Llama shapes, this one near the copy rate.
// The per-element arithmetic is the scalar kernels', so the results are bitwise the same.
__global__ void swiglu_fwd_vec_kernel(bf16* out, const bf16* gu, int64_t rows, int64_t F) {
  const int64_t per_row = F / 8, n = rows * per_row;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, c = (i - r * per_row) * 8;
    float g[8], u[8], o[8];
    load8(gu + r * 2 * F + c, g);
    load8(gu + r * 2 * F + F + c, u);
#pragma unroll
    for (int k = 0; k < 8; ++k) o[k] = swiglu_value(g[k], u[k]);
    store8(out + r * F + c, o);
  }
}
// SwiGLU's backward and, with act non-null, the forward's rebuild (SwigluBwdRebuildArgs), 8
// columns per vector with 16-byte loads and stores (F % 8 == 0, every pointer 16-byte aligned).
// Each thread owns kUnroll vectors, kThreads vectors apart (every warp access is one contiguous
// 512-byte run), and issues all their loads (gate, up, dout: 48 bytes a vector) before any
// arithmetic or store; no grid-stride loop, the grid covers the vectors once. Index is the vector
// index type: 32-bit where rows·F/8 fits (a 32-bit division per vector instead of a 64-bit one,
// and 64 registers at kUnroll 2: four 256-thread blocks per SM), else int64_t; element offsets are
// 64-bit either way. The per-element arithmetic is swiglu_grad's and swiglu_value's, rounded once
// as the separate kernels round, so dgate_up is bitwise the backward's and act swiglu_fwd's.
// (The former one-vector grid-stride backward ran at ~1.95 TB/s at the Llama 1B shape, against
// swiglu_fwd_vec's 3.07; bench/micro/swiglu_bwd.cu times it against this kernel at kUnroll 1, 2, 4.)
constexpr int kSwigluUnroll = 2;
template <bool kAct, class Index, int kUnroll = kSwigluUnroll>
__global__ void __launch_bounds__(kThreads)
    swiglu_bwd_vec_kernel(bf16* dgu, bf16* act, const bf16* dout, const bf16* gu, Index per_row, Index n) {
  const int64_t F = int64_t(per_row) * 8;
  const Index first = Index(blockIdx.x) * Index(kThreads * kUnroll) + Index(threadIdx.x);
  // Raw bf16 until the arithmetic: 4 registers per 8 values, so the loads in flight cost half
  // the registers f32 copies would (occupancy).
  Bf16x8 g[kUnroll], u[kUnroll], d[kUnroll];
  int64_t row[kUnroll], col[kUnroll];
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    const Index i = first + Index(k) * Index(kThreads);
    if (i >= n) continue;
    const Index r = i / per_row;
    row[k] = int64_t(r);
    col[k] = int64_t(i - r * per_row) * 8;
    g[k] = *reinterpret_cast<const Bf16x8*>(gu + row[k] * 2 * F + col[k]);
    u[k] = *reinterpret_cast<const Bf16x8*>(gu + row[k] * 2 * F + F + col[k]);
    d[k] = *reinterpret_cast<const Bf16x8*>(dout + row[k] * F + col[k]);
  }
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    if (first + Index(k) * Index(kThreads) >= n) continue;
    float dg[8], du[8], o[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float gj = to_f(g[k].v[j]), uj = to_f(u[k].v[j]);
      swiglu_grad(gj, uj, to_f(d[k].v[j]), dg[j], du[j]);
      if constexpr (kAct) o[j] = swiglu_value(gj, uj);
    }
    store8(dgu + row[k] * 2 * F + col[k], dg);
    store8(dgu + row[k] * 2 * F + F + col[k], du);
    if constexpr (kAct) store8(act + row[k] * F + col[k], o);
  }
}
// One element per thread: any F and alignment (act may be null).
__global__ void swiglu_bwd_kernel(bf16* dgu, bf16* act, const bf16* dout, const bf16* gu, int64_t rows, int64_t F) {
  const int64_t n = rows * F;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i / F, c = i - r * F;
    float g = to_f(gu[r * 2 * F + c]), u = to_f(gu[r * 2 * F + F + c]), d = to_f(dout[i]);
    float dg, du;
    swiglu_grad(g, u, d, dg, du);
    dgu[r * 2 * F + c] = __float2bfloat16_rn(dg);
    dgu[r * 2 * F + F + c] = __float2bfloat16_rn(du);
    if (act) act[i] = __float2bfloat16_rn(swiglu_value(g, u));
  }
}

template <bool kAct, class Index>
void launch_swiglu_bwd_vec(bf16* dgu, bf16* act, const bf16* dout, const bf16* gu, int64_t rows, int64_t F,
                           cudaStream_t s) {
  const int64_t n = rows * (F / 8), per_block = int64_t(kThreads) * kSwigluUnroll;
  const int64_t blocks = (n + per_block - 1) / per_block;
  swiglu_bwd_vec_kernel<kAct, Index><<<unsigned(blocks), kThreads, 0, s>>>(dgu, act, dout, gu, Index(F / 8), Index(n));
}

// Column sums dst[c] += Σ_r src[r, c] in ONE launch, reading src once with 16-byte loads.
// Grid (x = column tile, y = row chunk); block (col lanes x row lanes) = 256 threads. Thread
// (tx, ty) owns kVec consecutive columns of the tile and the rows r0+ty, r0+ty+row_lanes, ... of
// its chunk (four loads in flight); the block folds its row lanes in shared memory (lane order
// fixed) and writes one partial row per chunk: partial[chunk][c]. The last block of a column tile
// to finish (an atomic ticket per tile, reset by that block) adds the tile's partial rows, split
// over the row lanes in a fixed assignment and folded in a fixed order, and adds that to dst.
// Which block is last varies from run to run; the summation order does not, so the result is
// bitwise repeatable. Tiles are narrow (64 columns of 8 lanes x 16 B, i.e. 128 B per row segment)
// so that even C = 1024 gives enough blocks, and there are few chunks so that the last block's
// share (chunks x 64 floats) is small.
template <int kVec>
struct ColumnSumShape;
template <>
struct ColumnSumShape<8> {
  static constexpr int col_lanes = 8, row_lanes = 32;
};
template <>
struct ColumnSumShape<1> {
  static constexpr int col_lanes = 32, row_lanes = 8;
};
constexpr int kColumnSumThreads = 256;
constexpr int kColumnSumUnroll = 4;

template <int kVec>
__device__ __forceinline__ void load_cols(const bf16* p, float (&v)[kVec]) {
  if constexpr (kVec == 8) {
    load8(p, v);
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i) v[i] = to_f(p[i]);
  }
}

// Folds fold[row_lane][col] over the row lanes (fixed order) for each column of the tile; thread
// t handles columns t, t + 256, ...; calls out(col, sum) for columns inside the matrix.
template <int kRows, int kTile, class Out>
__device__ __forceinline__ void fold_rows(float (&fold)[kRows][kTile], int t, Out out) {
  for (int col = t; col < kTile; col += kColumnSumThreads) {
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < kRows; ++k) sum += fold[k][col];
    out(col, sum);
  }
}

template <int kVec>
__global__ void __launch_bounds__(kColumnSumThreads)
    column_sum_kernel(float* dst, float* partial, unsigned* tickets, const bf16* src, int64_t rows, int64_t cols,
                      int64_t ld, int64_t rows_per_chunk, bool overwrite) {
  constexpr int kColLanes = ColumnSumShape<kVec>::col_lanes;
  constexpr int kRowLanes = ColumnSumShape<kVec>::row_lanes;
  constexpr int kTile = kColLanes * kVec;
  __shared__ float fold[kRowLanes][kTile];
  __shared__ bool is_last;
  const int tx = threadIdx.x, ty = threadIdx.y, t = ty * kColLanes + tx;
  const int64_t tile0 = int64_t(blockIdx.x) * kTile;
  const int64_t c = tile0 + int64_t(tx) * kVec;
  // kVec == 8 is used only when cols % 8 == 0, so a vector starting inside the row is whole.
  const bool active = c < cols;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = min(rows, r0 + rows_per_chunk);

  float acc[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) acc[i] = 0.f;
  if (active) {
    int64_t r = r0 + ty;
    constexpr int kStep = kColumnSumUnroll * kRowLanes;
    for (; r + (kColumnSumUnroll - 1) * kRowLanes < r1; r += kStep) {
      float v[kColumnSumUnroll][kVec];
#pragma unroll
      for (int u = 0; u < kColumnSumUnroll; ++u) load_cols<kVec>(src + (r + u * kRowLanes) * ld + c, v[u]);
#pragma unroll
      for (int u = 0; u < kColumnSumUnroll; ++u)
#pragma unroll
        for (int i = 0; i < kVec; ++i) acc[i] += v[u][i];
    }
    for (; r < r1; r += kRowLanes) {
      float v[kVec];
      load_cols<kVec>(src + r * ld + c, v);
#pragma unroll
      for (int i = 0; i < kVec; ++i) acc[i] += v[i];
    }
  }
#pragma unroll
  for (int i = 0; i < kVec; ++i) fold[ty][tx * kVec + i] = acc[i];
  __syncthreads();
  float* prow = partial + int64_t(blockIdx.y) * ld + tile0;
  fold_rows(fold, t, [&](int col, float sum) {
    if (tile0 + col < cols) prow[col] = sum;
  });

  // Publish the partial row, then take a ticket: the block drawing the last one finalizes.
  __threadfence();
  __syncthreads();
  if (t == 0) is_last = atomicAdd(&tickets[blockIdx.x], 1u) == gridDim.y - 1;
  __syncthreads();
  if (!is_last) return;
  __threadfence();

  const int chunks = int(gridDim.y);
#pragma unroll
  for (int i = 0; i < kVec; ++i) acc[i] = 0.f;
  if (active)
    for (int k = ty; k < chunks; k += kRowLanes) {
      const float* p = partial + int64_t(k) * ld + c;
#pragma unroll
      for (int i = 0; i < kVec; ++i) acc[i] += __ldcg(p + i);  // L2: written by other SMs
    }
#pragma unroll
  for (int i = 0; i < kVec; ++i) fold[ty][tx * kVec + i] = acc[i];  // first fold done (synced)
  __syncthreads();
  fold_rows(fold, t, [&](int col, float sum) {
    if (tile0 + col < cols) dst[tile0 + col] = overwrite ? sum : dst[tile0 + col] + sum;
  });
  if (t == 0) tickets[blockIdx.x] = 0;  // ready for the next launch on this stream
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
  if (F % 8 == 0 && aligned16(out) && aligned16(gate_up)) {
    swiglu_fwd_vec_kernel<<<grid_for(rows * F / 8), kThreads, 0, s>>>(static_cast<bf16*>(out),
                                                                      static_cast<const bf16*>(gate_up), rows, F);
    RECIPE_CUDA_CHECK_LAUNCH("swiglu_fwd");
    return;
  }
  swiglu_fwd_kernel<<<grid_for(rows * F), kThreads, 0, s>>>(static_cast<bf16*>(out), static_cast<const bf16*>(gate_up),
                                                            rows, F);
  RECIPE_CUDA_CHECK_LAUNCH("swiglu_fwd");
}
void swiglu_bwd_bf16(void* dgate_up, void* act, const void* dout, const void* gate_up, int64_t rows, int64_t F,
                     cudaStream_t s) {
  if (rows * F <= 0) return;
  bf16* dgu = static_cast<bf16*>(dgate_up);
  bf16* a = static_cast<bf16*>(act);
  const bf16* d = static_cast<const bf16*>(dout);
  const bf16* gu = static_cast<const bf16*>(gate_up);
  if (F % 8 == 0 && aligned16(dgate_up) && aligned16(dout) && aligned16(gate_up) && (!act || aligned16(act))) {
    // The 32-bit index also covers the last block's overshoot (< kThreads·kSwigluUnroll vectors).
    const bool narrow = rows * (F / 8) + int64_t(kThreads) * kSwigluUnroll <= int64_t(UINT32_MAX);
    if (act && narrow)
      launch_swiglu_bwd_vec<true, uint32_t>(dgu, a, d, gu, rows, F, s);
    else if (act)
      launch_swiglu_bwd_vec<true, int64_t>(dgu, a, d, gu, rows, F, s);
    else if (narrow)
      launch_swiglu_bwd_vec<false, uint32_t>(dgu, a, d, gu, rows, F, s);
    else
      launch_swiglu_bwd_vec<false, int64_t>(dgu, a, d, gu, rows, F, s);
    RECIPE_CUDA_CHECK_LAUNCH("swiglu_bwd");
    return;
  }
  swiglu_bwd_kernel<<<grid_for(rows * F), kThreads, 0, s>>>(dgu, a, d, gu, rows, F);
  RECIPE_CUDA_CHECK_LAUNCH("swiglu_bwd");
}

void column_sum_accumulate(float* dst, const void* src, int64_t rows, int64_t C, ColumnSumTickets tickets, Workspace ws,
                           cudaStream_t s, bool overwrite) {
  if (C <= 0) return;
  if (rows <= 0) {  // an empty sum: "=" still has to write its zeros
    if (overwrite) RECIPE_CUDA_CHECK(cudaMemsetAsync(dst, 0, size_t(C) * sizeof(float), s));
    return;
  }
  if (!tickets.ptr || tickets.count <= 0) throw std::invalid_argument("column_sum_accumulate: no ticket buffer");
  const bool vec = C % 8 == 0 && aligned16(src);
  const int64_t tile = vec ? ColumnSumShape<8>::col_lanes * 8 : ColumnSumShape<1>::col_lanes;
  const int64_t row_lanes = vec ? ColumnSumShape<8>::row_lanes : ColumnSumShape<1>::row_lanes;
  const int64_t col_tiles = (C + tile - 1) / tile;
  // About four 256-thread blocks per SM over the whole grid, and at least one unrolled batch of
  // rows per thread: enough loads in flight, few partial rows for the last block to add.
  int sms = 132;
  int dev = 0;
  if (cudaGetDevice(&dev) == cudaSuccess) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const int64_t target_blocks = int64_t(sms) * 4;
  const int64_t min_rows = row_lanes * kColumnSumUnroll;
  int64_t chunks = std::max<int64_t>(1, (target_blocks + col_tiles - 1) / col_tiles);
  chunks = std::min<int64_t>(chunks, std::max<int64_t>(1, rows / min_rows));
  chunks = std::min<int64_t>(chunks, 65535);
  const size_t left = ws.bytes > ws.used + 256 ? ws.bytes - ws.used - 256 : 0;
  chunks = std::max<int64_t>(1, std::min<int64_t>(chunks, int64_t(left / (size_t(C) * 4))));
  int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  rows_per_chunk = (rows_per_chunk + row_lanes - 1) / row_lanes * row_lanes;
  chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
  float* partial = static_cast<float*>(ws.take(size_t(chunks) * C * 4, "bias gradient"));
  // One ticket per column tile; wider matrices go in slabs of tickets.count tiles.
  const dim3 block = vec ? dim3(ColumnSumShape<8>::col_lanes, ColumnSumShape<8>::row_lanes)
                         : dim3(ColumnSumShape<1>::col_lanes, ColumnSumShape<1>::row_lanes);
  for (int64_t t0 = 0; t0 < col_tiles; t0 += tickets.count) {
    const int64_t nt = std::min<int64_t>(tickets.count, col_tiles - t0);
    const int64_t c0 = t0 * tile, cols = std::min<int64_t>(C - c0, nt * tile);
    // A slab is the column range [c0, c0+cols) of every row: same row stride C, offset base.
    const dim3 grid{unsigned(nt), unsigned(chunks)};
    const bf16* base = static_cast<const bf16*>(src) + c0;
    if (vec)
      column_sum_kernel<8>
          <<<grid, block, 0, s>>>(dst + c0, partial + c0, tickets.ptr, base, rows, cols, C, rows_per_chunk, overwrite);
    else
      column_sum_kernel<1>
          <<<grid, block, 0, s>>>(dst + c0, partial + c0, tickets.ptr, base, rows, cols, C, rows_per_chunk, overwrite);
    RECIPE_CUDA_CHECK_LAUNCH("column_sum");
  }
}

}  // namespace recipe::kernels::cuda
