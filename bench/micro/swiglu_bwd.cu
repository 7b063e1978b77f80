// Harness for the SwiGLU backward kernels of kernels/cuda/elementwise.cu (it includes that file, so
// it times exactly the engine's code and reaches its internal kernels), on one GPU:
//
//   dgate_up [N, 2F] = swiglu_bwd(dact [N, F], gate_up [N, 2F])      5·N·F·2 bytes moved
//   act      [N, F]  = swiglu(gate_up)  (trainer.recompute gelu/norm) 3·N·F·2 bytes alone
//
// Rows: the former path of the lazy recompute levels (swiglu_fwd_vec rebuild + the former
// one-vector grid-stride backward, kept below as the baseline), the engine's swiglu_bwd_bf16
// without and with act (what the backend runs), and swiglu_bwd_vec_kernel at kUnroll 1, 2, 4
// (the choice kSwigluUnroll makes). Each row: median µs of 20 launches and bytes moved / time.
// Checks (exit 0 only if all pass): every variant's dgate_up and act bitwise equal to the former
// kernels' (outputs poisoned before each variant).
//
// Build / run (one H100, repository root; the engine's nvcc flags, so the arithmetic is the same):
//   nvcc -O3 -std=c++17 --expt-relaxed-constexpr --use_fast_math -gencode=arch=compute_90a,code=sm_90a \
//        -I. bench/micro/swiglu_bwd.cu -o swiglu_bwd && ./swiglu_bwd [N F]   (default 8192 8192: Llama 1B, mb 4)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <type_traits>
#include <vector>

#include "kernels/cuda/elementwise.cu"
#include "bench/micro/bench_check.h"

namespace {

using recipe::kernels::cuda::bf16;
using recipe::kernels::cuda::load8;
using recipe::kernels::cuda::store8;
using recipe::kernels::cuda::swiglu_grad;
namespace rk = recipe::kernels::cuda;

// The backward as the engine ran it before swiglu_bwd_rebuild: one 16-byte vector per thread per
// grid-stride iteration (~1.95 TB/s at the Llama 1B shape in the issue-16 profile).
__global__ void former_swiglu_bwd_vec_kernel(bf16* dgu, const bf16* dout, const bf16* gu, int64_t rows, int64_t F) {
  const int64_t per_row = F / 8, n = rows * per_row;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, c = (i - r * per_row) * 8;
    float g[8], u[8], d[8], dg[8], du[8];
    load8(gu + r * 2 * F + c, g);
    load8(gu + r * 2 * F + F + c, u);
    load8(dout + r * F + c, d);
#pragma unroll
    for (int k = 0; k < 8; ++k) swiglu_grad(g[k], u[k], d[k], dg[k], du[k]);
    store8(dgu + r * 2 * F + c, dg);
    store8(dgu + r * 2 * F + F + c, du);
  }
}

__global__ void fill_kernel(bf16* p, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16_rn((float(h & 0xffffff) / 16777216.f - 0.5f) * scale);
  }
}

float median_us(const std::function<void()>& launch) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) launch();
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    CK(cudaEventRecord(a));
    launch();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float t = 0;
    CK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1000.f;
}

std::vector<uint16_t> host(const bf16* p, int64_t n) {
  std::vector<uint16_t> h(static_cast<size_t>(n));
  CK(cudaMemcpy(h.data(), p, size_t(n) * 2, cudaMemcpyDeviceToHost));
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t N = argc > 2 ? std::atoll(argv[1]) : 8192, F = argc > 2 ? std::atoll(argv[2]) : 8192;
  if (N <= 0 || F <= 0 || F % 8 || N * (F / 8) + 1024 > int64_t(UINT32_MAX)) {
    std::fprintf(stderr,
                 "N=%lld F=%lld: the rows time the vector kernels with a 32-bit index (F %% 8 == 0, N·F/8 < 2^32)\n",
                 (long long)N, (long long)F);
    return 2;
  }
  bf16 *gu, *dact, *dgu, *act;
  CK(cudaMalloc(&gu, size_t(N * 2 * F) * 2));
  CK(cudaMalloc(&dact, size_t(N * F) * 2));
  CK(cudaMalloc(&dgu, size_t(N * 2 * F) * 2));
  CK(cudaMalloc(&act, size_t(N * F) * 2));
  fill_kernel<<<4096, 256>>>(gu, N * 2 * F, 1, 8.f);
  fill_kernel<<<4096, 256>>>(dact, N * F, 2, 2.f);
  CK(cudaDeviceSynchronize());

  const int threads = 256;
  const int64_t vectors = N * (F / 8);
  const auto former_grid = int(std::max<int64_t>(1, std::min<int64_t>((vectors + threads - 1) / threads, 65535LL * 8)));
  // The baseline outputs.
  former_swiglu_bwd_vec_kernel<<<former_grid, threads>>>(dgu, dact, gu, N, F);
  rk::swiglu_fwd_bf16(act, gu, N, F, nullptr);
  CK(cudaDeviceSynchronize());
  const std::vector<uint16_t> want_dgu = host(dgu, N * 2 * F), want_act = host(act, N * F);

  const double gb_bwd = 5.0 * N * F * 2 / 1e9, gb_fwd = 3.0 * N * F * 2 / 1e9, gb_fused = 6.0 * N * F * 2 / 1e9;
  std::printf("N=%lld F=%lld\n%-44s %10s %8s %s\n", (long long)N, (long long)F, "variant", "us", "TB/s", "bitwise");
  bool ok = true;
  auto row = [&](const char* name, double gb, bool with_act, const std::function<void()>& launch) {
    CK(cudaMemset(dgu, 0xff, size_t(N * 2 * F) * 2));  // poison: NaN bf16
    if (with_act) CK(cudaMemset(act, 0xff, size_t(N * F) * 2));
    const float us = median_us(launch);
    const bool same = host(dgu, N * 2 * F) == want_dgu && (!with_act || host(act, N * F) == want_act);
    ok = ok && same;
    std::printf("%-44s %10.1f %8.2f %s\n", name, us, gb / (us * 1e-6) / 1e3, same ? "yes" : "NO");
  };
  row("former: swiglu_bwd_vec (one vector/thread)", gb_bwd, false,
      [&] { former_swiglu_bwd_vec_kernel<<<former_grid, threads>>>(dgu, dact, gu, N, F); });
  row("former: swiglu_fwd_vec rebuild + bwd_vec", gb_bwd + gb_fwd, true, [&] {
    rk::swiglu_fwd_bf16(act, gu, N, F, nullptr);
    former_swiglu_bwd_vec_kernel<<<former_grid, threads>>>(dgu, dact, gu, N, F);
  });
  row("engine: swiglu_bwd_bf16 (act null)", gb_bwd, false,
      [&] { rk::swiglu_bwd_bf16(dgu, nullptr, dact, gu, N, F, nullptr); });
  row("engine: swiglu_bwd_bf16 with act (rebuild)", gb_fused, true,
      [&] { rk::swiglu_bwd_bf16(dgu, act, dact, gu, N, F, nullptr); });
  auto unrolled = [&](auto act_tag, auto unroll_tag, const char* name) {
    constexpr bool kAct = decltype(act_tag)::value;
    constexpr int kUnroll = decltype(unroll_tag)::value;
    const int64_t blocks = (vectors + int64_t(threads) * kUnroll - 1) / (int64_t(threads) * kUnroll);
    row(name, kAct ? gb_fused : gb_bwd, kAct, [&] {
      rk::swiglu_bwd_vec_kernel<kAct, uint32_t, kUnroll>
          <<<unsigned(blocks), threads>>>(dgu, kAct ? act : nullptr, dact, gu, uint32_t(F / 8), uint32_t(vectors));
    });
  };
  using std::integral_constant;
  unrolled(std::false_type{}, integral_constant<int, 1>{}, "bwd_vec kUnroll 1");
  unrolled(std::false_type{}, integral_constant<int, 2>{}, "bwd_vec kUnroll 2");
  unrolled(std::false_type{}, integral_constant<int, 4>{}, "bwd_vec kUnroll 4");
  unrolled(std::true_type{}, integral_constant<int, 1>{}, "bwd_vec + act kUnroll 1");
  unrolled(std::true_type{}, integral_constant<int, 2>{}, "bwd_vec + act kUnroll 2");
  unrolled(std::true_type{}, integral_constant<int, 4>{}, "bwd_vec + act kUnroll 4");
  std::printf("%s\n", ok ? "all variants bitwise equal to the former kernels" : "MISMATCH");
  CK(cudaFree(gu));
  CK(cudaFree(dact));
  CK(cudaFree(dgu));
  CK(cudaFree(act));
  return ok ? 0 : 1;
}
