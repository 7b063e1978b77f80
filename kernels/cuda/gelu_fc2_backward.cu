// fc2's backward with the GELU rebuild fused into its dinp GEMM (sm_90a: TMA + wgmma), for
// trainer.recompute levels that keep pre = fc_in's output but not act = gelu(pre):
//   dh[N,H]   = (dy[N,C] · W2[C,H]) ⊙ gelu'(pre[N,H])   bf16, f32 accumulation, rounded once
//   g[N,H]    = gelu(pre)                                bf16: fc2's weight-gradient input
//   dbias[H] (=|+=) Σ_rows dh                            f32, the rounded dh, fixed order
// One persistent kernel, one launch, replaces cuBLASLt's DGELU GEMM, the GELU rebuild and the
// column sum (bench/micro/fused_mlp_dgrad.cu measures it against them).
//
// Layouts and work split (see fused_dgrad_kernel):
//   - GEMM view: m = token (N), n = H column, k = C. A = dy [N,C] is K-major (C contiguous);
//     B = W2 [C,H] is read as it is stored, N-major (H contiguous): wgmma's transposed-B mode
//     (imm-trans-b = 1) with an MN-major 128B-swizzle descriptor, so no W2ᵀ copy is made.
//     dy, W2 and pre are read by TMA with 128-byte swizzle.
//   - Tiles of 128 tokens × 128 H columns, K blocks of 64, a 5-stage shared-memory ring.
//     Warpgroup 0 produces (one thread streams dy/W2, one loads each tile's pre); warpgroups 1
//     and 2 consume whole tiles in alternation (ping-pong), so one runs its epilogue while the
//     other runs wgmma. One CTA per SM, tiles t = blockIdx.x + j·gridDim.x.
//   - Epilogue (tile_epilogue): pre is read from shared memory with ldmatrix, which hands each
//     lane exactly the wgmma accumulator layout (no shuffles); dh is written back with stmatrix
//     over the pre it replaces and leaves by TMA store (16 x 64 boxes, one per warp and block);
//     g, which has no room in shared memory next to a 5-stage ring, goes out as 16-byte stores
//     after a lane-quad transpose.
//   - Why this shape (Nsight Compute, H100, N = 16384): the mainloop is bound by shared-memory
//     bandwidth (each m64n128k16 reads 6 KB of operands: 12 wavefronts per warp, plus 32 KB of
//     TMA writes per K block: ~160 B/clk at full MMA rate against 128 available) and by TMA
//     latency (consumers wait on full barriers: fewer than 5 stages cost ~10 us); the epilogue
//     must stay shorter than the other consumer's mainloop. The warpgroup index is broadcast
//     with __shfl_sync so that tiles, ring stages and wgmma descriptors live in uniform
//     registers (ptxas otherwise rebuilt 64-bit descriptors with R2UR around every wgmma).
//     Measured effect of these (harness history, round 7): 313 -> 261.5 us at N = 16384, tensor
//     pipe 50.7% -> 64.8% of elapsed cycles; what is left is the shared-memory ceiling above,
//     full-barrier waits (~17% of the mainloop) with L2 serving the SMs at 83% of its peak.
//   - dbias, in the same launch and bitwise repeatable (no float atomics): each tile writes its
//     128 column sums once into partial[N/128][H] (workspace), and a ticket thread of the CTA
//     (warps 2 and 3 of the producer warpgroup, otherwise idle: one per consumer) fences and
//     draws the tile's ticket for its column band, an integer atomic on band_tickets[H/128] (a
//     __device__ array, zero at module load and reset to zero by each band's last arriver: no
//     memset launch). The consumer whose tile drew the band's last ticket sums the band's N/128
//     partial rows in a fixed order, one column per thread, at its next epilogue or at exit, and
//     writes or adds dbias. The order is that of the former separate finalize kernel: dbias is
//     bitwise what it was, whichever CTA finishes a band. The ticket thread keeps the GPU-scope
//     fence (which waits for the tile's partial-row stores) and the atomic's round trip off the
//     consumers, whose epilogue is on the critical path. The tickets are shared by every launch
//     on the device, so launches must not overlap one another (the engine runs them on its one
//     stream; the same rule as column_sum_accumulate's tickets).
// The kernel is also written for 2-CTA clusters with TMA multicast (CM × CN); on the H100 they
// measured no faster (2 x 1 on top of this version: 284-293 us), so the launcher runs 1 × 1 (CN > 1 would need a dy map with BM/CN-row boxes;
// CM × CN > 1 takes the generic producer path, not the 1 × 1 fast path).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"

namespace recipe::kernels::cuda {

using bf16 = __nv_bfloat16;

namespace {

// ------------------------------------------------------------------------------------------
// Fused kernel configuration
// ------------------------------------------------------------------------------------------
constexpr int BM = 128;  // tokens per tile (two m64 wgmma halves)
constexpr int BN = 128;  // H columns per tile (wgmma n = 128)
constexpr int BK = 64;   // 64 bf16 = 128 B rows: exactly one 128B-swizzle atom wide
constexpr int STAGES = 5;
constexpr int A_BYTES = BM * BK * 2;              // 16 KB
constexpr int B_BOX_BYTES = 64 * BK * 2;          // 8 KB: [64 K rows][64 H cols], 128 B rows
constexpr int B_BYTES = (BN / 64) * B_BOX_BYTES;  // 16 KB: the B tile is BN / 64 such boxes
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int PRE_BYTES = BM * BN * 2;  // one consumer's pre tile, 32 KB
constexpr int DH_BOX_ROWS = 16;         // dh TMA-store box: 16 rows x 64 columns (one warp's block)
static_assert(DH_BOX_ROWS == 16 && BM == 128 && BN == 128, "tile_epilogue's warp blocks");
// smem: ring 160 KB + 2 pre/dh tiles 64 KB (= 224 KB of the 227 KB a block may have), then
// 2·STAGES + 10 mbarriers and one 8-byte slot per consumer for its dbias ticket
constexpr int SMEM_BYTES = 1024 /*align slack*/ + STAGES * STAGE_BYTES + 2 * PRE_BYTES + (2 * STAGES + 10) * 8 + 2 * 8;
constexpr int THREADS = 384;
// dbias tickets: one per 128-column band, so H ≤ 128 · kMaxBands (the fits check says so).
constexpr int kMaxBands = 2048;

// Zero when the module is loaded; every band's last arriver sets its ticket back to 0, so no
// launch needs a memset (see the header: launches must not overlap one another).
__device__ unsigned band_tickets[kMaxBands];

// The device helpers use sm_90a-only instructions (wgmma, setmaxnreg): they exist in the host
// pass and the sm_90a pass; the portable compute_90 PTX gets a kernel that traps.
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive_u32(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) { mbar_arrive_u32(smem_u32(bar)); }
__device__ __forceinline__ void mbar_wait_u32(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred P1;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@!P1 bra WAIT_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) { mbar_wait_u32(smem_u32(bar), parity); }

// 2D TMA load of box {64 (inner, K), rows} at coordinates (k, row); completes on bar.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int k, int row, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(k), "r"(row), "r"(smem_u32(bar))
      : "memory");
}

// 2D TMA store (bulk async-group) of the smem box at src to coordinates (col, row).
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, int col, int row) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_u32(src)), "r"(col), "r"(row)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void ldsm_x4(uint32_t a, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}
__device__ __forceinline__ void stsm_x4(uint32_t a, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
}

__device__ __forceinline__ void tma_load_2d_u32(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx_u32(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// Multicast variant: the same box lands at the same CTA-relative smem offset in every CTA of
// cta_mask, and complete_tx is signalled on the mbarrier at the same offset in each of them.
__device__ __forceinline__ void tma_load_2d_mc(void* dst, const CUtensorMap* map, int k, int row, uint64_t* bar,
                                               uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(k), "r"(row), "r"(smem_u32(bar)), "h"(cta_mask)
      : "memory");
}
// Arrive on the mbarrier at the same offset in CTA `cta` of this cluster. Default semantics
// (.release.cta): it only has to order this warp's completed wgmma reads of the stage before the
// peer's next TMA write into it. Do NOT write .release.cluster here: ptxas then emits
// MEMBAR.ALL.CTA + MEMBAR.ALL.GPU before each arrive (measured 1.8x slower mainloop).
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t cta) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_u32(bar)), "r"(cta));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;" ::
          : "memory");
}

// wgmma shared-memory descriptors (PTX ISA "matrix descriptor"): start address >> 4 (bits
// 0-13), leading byte offset >> 4 (16-29), stride byte offset >> 4 (32-45), layout type 1 =
// 128B swizzle (62-63). Both operands are written by TMA with 128B swizzle: 128-byte rows, the
// 16-byte chunk c of row r stored at chunk c ^ (r % 8), atoms of 8 rows = 1024 B.
//
// Both builders take the address field (shared address >> 4); LBO and the high word are
// constants. The K16 steps add to the address field only and never carry out of it (shared
// memory < 256 KB), so the mainloop steps descriptors with 32-bit adds on that field.
//
// K-major (A = dy): a row is 64 K values of one token; atoms of 8 rows stacked along M
// (SBO = 1024), LBO unused for swizzled K-major (1). Stepping K by 16 inside the atom = +32 B.
__device__ __forceinline__ uint64_t desc_k(uint32_t addr4) {
  return (uint64_t((1024 >> 4) | (1u << 30)) << 32) | uint64_t(addr4 | (1u << 16));
}
// MN-major (B = W2 as stored): a row is 64 H values (128 B) of one k; the canonical MN-major
// SW128 layout is ((64 n, m chunks), (8 k, k groups)) with the 64-n chunks LBO apart and the
// 8-row k groups SBO apart (CUTLASS make_gmma_desc<Major::MN>: LBO = stride of the MN chunk,
// SBO = stride of the 8-k group). Our B tile is BN/64 TMA boxes of [64 k][64 n] back to back:
// LBO = one box (8 KB), SBO = 8 rows (1024 B). Stepping K by 16 = 16 rows = +2048 B, a whole
// number of atoms, so the swizzle phase is unchanged.
__device__ __forceinline__ uint64_t desc_mn(uint32_t addr4) {
  return (uint64_t((1024 >> 4) | (1u << 30)) << 32) | uint64_t(addr4 | ((B_BOX_BYTES >> 4) << 16));
}

__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}

// D[64x128] += A[64x16] · B[16x128], A K-major, B N-major (imm-trans-b = 1) in shared memory.
// Accumulator layout (per warp w of the warpgroup, lane l, q = l%4, r = l/4):
//   d[4j+0], d[4j+1] -> row 16w + r,     cols 8j + 2q, 8j + 2q + 1
//   d[4j+2], d[4j+3] -> row 16w + r + 8, same cols               (j = 0..15)
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t da, uint64_t db) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
      "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, "
      "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 1;\n"  // scale-a, scale-b, trans-a (K-major), trans-b (N-major)
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(1));
#endif
}

__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// tanh-GELU and its derivative without tanh's cancellation at negative x:
//   1 + tanh(u) = 2s, s = 1 / (1 + e), e = exp(-2u)   ->  gelu = x·s
//   1 - tanh²(u) = 4 s (1 - s)                        ->  gelu' = s (1 + 2 x (1 - s) u')
// (e·s = 1 - s). For very negative x, e overflows to inf and s = 0 exactly: gelu = gelu' = 0,
// with no clamp and no inf·0. Two MUFU ops (ex2, rcp) and 9 FP32 ops per element.
__device__ __forceinline__ void gelu_and_grad(float x, float& g, float& dg) {
  constexpr float k0 = 0.7978845608028654f, k1 = 0.044715f, log2e = 1.4426950408889634f;
  constexpr float c1 = -2.f * k0 * log2e, c2 = c1 * k1;
  const float x2 = x * x;
  const float e = ex2_approx(x * fmaf(x2, c2, c1));
  const float s = rcp_approx(1.f + e);
  g = x * s;
  const float xdu2 = x * fmaf(x2, 6.f * k0 * k1, 2.f * k0);  // 2·x·u'(x)
  dg = fmaf(s * (1.f - s), xdu2, s);
}

// 4x4 transpose of 32-bit words inside each lane quad: lane q word k <- lane k word q.
// Converts the wgmma accumulator layout (lane q holds cols 8j+2q,+1 of blocks j0..j0+3) into
// the row-contiguous layout (lane q holds the 8 cols of block j0+q: one 16-byte store).
__device__ __forceinline__ void quad_transpose(uint32_t (&w)[4], int lane) {
  const bool hi = lane & 2;
  uint32_t s0 = hi ? w[0] : w[2], s1 = hi ? w[1] : w[3];
  uint32_t r0 = __shfl_xor_sync(0xffffffffu, s0, 2), r1 = __shfl_xor_sync(0xffffffffu, s1, 2);
  if (hi) {
    w[0] = r0;
    w[1] = r1;
  } else {
    w[2] = r0;
    w[3] = r1;
  }
  const bool odd = lane & 1;
  s0 = odd ? w[0] : w[1];
  s1 = odd ? w[2] : w[3];
  r0 = __shfl_xor_sync(0xffffffffu, s0, 1);
  r1 = __shfl_xor_sync(0xffffffffu, s1, 1);
  if (odd) {
    w[0] = r0;
    w[2] = r1;
  } else {
    w[1] = r0;
    w[3] = r1;
  }
}

__device__ __forceinline__ uint32_t bf2_as_u32(__nv_bfloat162 v) { return *reinterpret_cast<uint32_t*>(&v); }
__device__ __forceinline__ __nv_bfloat162 u32_as_bf2(uint32_t v) { return *reinterpret_cast<__nv_bfloat162*>(&v); }

// dbias[h] (=|+=) Σ_rb partial[rb][h] for this thread's column h, rows in a fixed order: four
// interleaved chains (row r goes to chain r % 4), combined as (s0 + s1) + (s2 + s3) — the order
// of the former separate finalize kernel, so dbias is bitwise what it was. Loads are issued 16
// at a time (4 per chain) so that the last arriver's tail is a few L2 round trips, not 128; the
// adds stay in row order within each chain. __ldcg: the rows were written by other SMs.
__device__ __forceinline__ void dbias_finalize_column(const float* __restrict__ partial, float* __restrict__ dbias,
                                                      int rows, int H, int h, bool overwrite) {
  const float* p = partial + h;
  float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
  int r = 0;
  for (; r + 16 <= rows; r += 16) {
    float v[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = __ldcg(p + size_t(r + i) * H);
#pragma unroll
    for (int i = 0; i < 16; i += 4) {
      s0 += v[i];
      s1 += v[i + 1];
      s2 += v[i + 2];
      s3 += v[i + 3];
    }
  }
  for (; r + 4 <= rows; r += 4) {
    s0 += __ldcg(p + size_t(r) * H);
    s1 += __ldcg(p + size_t(r + 1) * H);
    s2 += __ldcg(p + size_t(r + 2) * H);
    s3 += __ldcg(p + size_t(r + 3) * H);
  }
  for (; r < rows; ++r) s0 += __ldcg(p + size_t(r) * H);
  const float s = (s0 + s1) + (s2 + s3);
  dbias[h] = overwrite ? s : dbias[h] + s;
}

// Reduce-scatter 8 column sums over the 8 lanes sharing q (lane bits 2..4): after three
// halving steps lane (q, r) holds the warp's 16-row sum of value index r.
__device__ __forceinline__ float warp_colsum(const float (&cs)[8], int lane) {
  const bool b4 = lane & 16, b3 = lane & 8, b2 = lane & 4;
  float t4[4], t3[2];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float send = b4 ? cs[i] : cs[i + 4];
    const float keep = b4 ? cs[i + 4] : cs[i];
    t4[i] = keep + __shfl_xor_sync(0xffffffffu, send, 16);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float send = b3 ? t4[i] : t4[i + 2];
    const float keep = b3 ? t4[i + 2] : t4[i];
    t3[i] = keep + __shfl_xor_sync(0xffffffffu, send, 8);
  }
  const float send = b2 ? t3[0] : t3[1];
  const float keep = b2 ? t3[1] : t3[0];
  return keep + __shfl_xor_sync(0xffffffffu, send, 4);
}

// Epilogue of one 128x128 tile for one consumer warpgroup (its accumulators acc0 = rows 0-63,
// acc1 = rows 64-127). Warp w owns rows 16w..16w+15 and 64+16w..64+16w+15 and works in four
// blocks (column half hf, row half m) of 16 rows x 64 columns; lane (r, q) = (lane/4, lane%4).
// pre_s: this consumer's pre tile, TMA-loaded a whole mainloop earlier by the pre producer, as
// two 64-column halves of [128 rows][128 B] with 128B swizzle: row R's 16-byte chunk ch sits at
// hf*16K + R*128 + ((ch ^ (R % 8)) * 16).
//   - ldmatrix.x4 reads four 8x8 bf16 matrices (the four 8-column blocks of one 32-column group
//     jg, 8 rows): lane (r, q) receives row r, columns 2q, 2q+1 of each, which is exactly the
//     accumulator layout of acc[4j + 2h], acc[4j + 2h + 1] (j = 4jg + block, h = row half of 8).
//     Lane l supplies the address of row l % 8 of matrix l / 8: conflict-free under the swizzle.
//   - dh goes back with stmatrix to the same addresses (in place: the warp has just read them),
//     then lane 0 TMA-stores the warp's 16x64 block (fence.proxy.async first: the copy engine
//     reads what the generic proxy wrote). Full 128-byte lines, no shuffles.
//   - g goes out directly: a lane-quad transpose gives each lane 8 contiguous columns, one
//     16-byte store (there is no shared memory left to stage it next to a 5-stage ring).
//   - Column sums of the rounded dh per jg in the order (m,h) = (0,0), (0,1), (1,0), (1,1),
//     reduce-scattered within the warp, then summed over the 4 warps in fixed order through
//     shared memory (each warp's own read-out block, once its TMA stores have read it).
__device__ __forceinline__ void tile_epilogue(float (&acc0)[64], float (&acc1)[64], uint8_t* pre_s, uint64_t* pre_empty,
                                              const CUtensorMap* tm_dh, bf16* __restrict__ g,
                                              float* __restrict__ partial, bool with_dbias, uint64_t* part_ready,
                                              int rb, int cb, int H, int wg_bar) {
  const int tid = threadIdx.x & 127, w = tid >> 5, lane = tid & 31, q = lane & 3, r = lane >> 2;
  const uint32_t pre_a = smem_u32(pre_s);
  float colv[4];  // this lane's warp-level column sum for each column group jg
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float cs[2][8];  // column sums of jg = 2hf + jgl: index 2*jj + e -> col 32jg + 8jj + 2q + e
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      cs[0][i] = 0.f;
      cs[1][i] = 0.f;
    }
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      float(&acc)[64] = m ? acc1 : acc0;
#pragma unroll
      for (int jgl = 0; jgl < 2; ++jgl) {
        const int jg = 2 * hf + jgl;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          // this lane's ldmatrix/stmatrix row: row (lane & 7) of matrix lane >> 3, i.e. chunk
          // 4 jgl + (lane >> 3) of tile row 64m + 16w + 8h + (lane & 7), swizzled by row % 8
          const uint32_t sw = uint32_t((4 * jgl + (lane >> 3)) ^ (lane & 7)) << 4;
          const uint32_t pa = pre_a + hf * (BM * 128) + (64 * m + 16 * w + 8 * h + (lane & 7)) * 128 + sw;
          uint32_t p[4], dw[4], gw[4];
          ldsm_x4(pa, p);
#pragma unroll
          for (int jj = 0; jj < 4; ++jj) {
            const int j = 4 * jg + jj;
            const float2 x = __bfloat1622float2(u32_as_bf2(p[jj]));
            float g0, g1, d0, d1;
            gelu_and_grad(x.x, g0, d0);
            gelu_and_grad(x.y, g1, d1);
            const __nv_bfloat162 db = __floats2bfloat162_rn(acc[4 * j + 2 * h] * d0, acc[4 * j + 2 * h + 1] * d1);
            dw[jj] = bf2_as_u32(db);
            gw[jj] = bf2_as_u32(__floats2bfloat162_rn(g0, g1));
            const float2 dr = __bfloat1622float2(db);  // dbias sums the rounded values
            cs[jgl][2 * jj] += dr.x;
            cs[jgl][2 * jj + 1] += dr.y;
          }
          stsm_x4(pa, dw);
          quad_transpose(gw, lane);  // lane q: the 8 columns of block 4 jg + q
          *reinterpret_cast<uint4*>(g + (size_t(rb) * BM + 64 * m + 16 * w + 8 * h + r) * H + size_t(cb) * BN +
                                    32 * jg + 8 * q) = make_uint4(gw[0], gw[1], gw[2], gw[3]);
        }
      }
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      __syncwarp();
      if (lane == 0) {  // the warp's 16 x 64 block of dh
        tma_store_2d(tm_dh, pre_s + hf * (BM * 128) + (64 * m + 16 * w) * 128, cb * BN + 64 * hf,
                     rb * BM + 64 * m + 16 * w);
        bulk_commit();
      }
    }
    colv[2 * hf] = warp_colsum(cs[0], lane);
    colv[2 * hf + 1] = warp_colsum(cs[1], lane);
  }
  // Cross-warp sum in fixed warp order. Warp w stages its 128 column sums (512 B) in its own
  // block (rows 16w.. of the first column half) once its TMA stores have read the block.
  if (lane == 0) bulk_wait_read<0>();
  __syncwarp();
  float* red = reinterpret_cast<float*>(pre_s);
  constexpr int RS = 16 * 128 / 4;  // floats between two warps' rows of red (one 2 KB block)
#pragma unroll
  for (int jg = 0; jg < 4; ++jg) red[w * RS + 32 * jg + 8 * (r >> 1) + 2 * q + (r & 1)] = colv[jg];
  asm volatile("bar.sync %0, 128;" ::"r"(wg_bar) : "memory");
  const float s = (red[tid] + red[RS + tid]) + (red[2 * RS + tid] + red[3 * RS + tid]);
  if (with_dbias) {
    partial[size_t(rb) * H + size_t(cb) * BN + tid] = s;
    mbar_arrive(part_ready);  // the ticket thread publishes it (fence) and takes the ticket
  }
  // The next TMA load (async proxy) overwrites the pre buffer that this thread wrote.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  mbar_arrive(pre_empty);
}

// Consumer side of the dbias tickets, for its previous tile (band pend_cb, its i-th tile): wait
// until the ticket thread has drawn that tile's ticket (normally long done: it had a whole
// mainloop), and if it was the band's last, sum the band with all 128 threads.
__device__ __forceinline__ void dbias_check_pending(const float* __restrict__ partial, float* __restrict__ dbias,
                                                    bool overwrite, uint64_t* ticket_done,
                                                    const volatile int* last_flag, int pend_cb, int i, int row_blocks,
                                                    int H) {
  mbar_wait(ticket_done, uint32_t(i) & 1);
  if (*last_flag) {  // every tile of band pend_cb has published its partial row
    __threadfence();
    dbias_finalize_column(partial, dbias, row_blocks, H, pend_cb * BN + (threadIdx.x & 127), overwrite);
  }
}

#endif  // host or sm_90a

// Clusters: CM x CN CTAs (1-D cluster of CM*CN, rank = mr + CM*nr). The cluster owns a
// CM x CN block of tiles: CTA (mr, nr) computes tile (CM*grb + mr, CN*gcb + nr). The CN CTAs with
// equal mr share the A (dy) tile, the CM CTAs with equal nr share the B (W2) tile; each CTA
// TMA-loads a 1/CN slice of A (BM/CN rows) and 1/CM of B's 64-column boxes with
// .multicast::cluster to all sharers, so L2->SM reads per tile drop from 32 KB per K block to
// 16/CN + 16/CM KB. Every ring stage of a CTA is written by itself and its CN-1 A-sharers and
// CM-1 B-sharers, so its empty barrier counts 4 consumer warps x (CN + CM - 1) arrivals, and each
// consumer warp releases a stage to exactly those CTAs (remote arrive through mapa).
// The remote arrive uses the default .release.cta semantics: .release.cluster compiles to
// MEMBAR.ALL.GPU before every arrive, which is what made the first 2-CTA version 1.8x slower.
//
// dh is written through tm_dh (TMA stores from shared memory), g through the pointer.
// dbias == nullptr: no partials, no tickets (partial may be null too).
template <int CM, int CN>
__global__ void __launch_bounds__(THREADS, 1)
    fused_dgrad_kernel(const __grid_constant__ CUtensorMap tm_dy, const __grid_constant__ CUtensorMap tm_w2,
                       const __grid_constant__ CUtensorMap tm_pre, const __grid_constant__ CUtensorMap tm_dh,
                       bf16* __restrict__ g, float* __restrict__ partial, float* __restrict__ dbias,
                       bool overwrite_dbias, int N, int C, int H) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int CL = CM * CN;
  constexpr int B_BOXES = BN / 64;
  static_assert(B_BOXES % CM == 0, "each B-sharing CTA multicasts whole 64-column boxes");
  extern __shared__ uint8_t smem_raw[];
  // Ring stage s: A tile [128 tokens][64 K] at +0 (K-major), then the B tile at +16 KB as
  // B_BOXES boxes of [64 K rows][64 H cols] (N-major, box b = H columns 64b..64b+63 at +8 KB·b);
  // every row 128 B with the TMA 128B swizzle (16-byte chunk c of row r at chunk c ^ (r % 8)).
  // Then pre_buf[2] (one 32 KB pre tile per consumer, same layout as two [128][64] boxes; the
  // epilogue overwrites it with dh for the TMA stores), the mbarriers, the ticket flags.
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* pre_buf = smem + STAGES * STAGE_BYTES;
  uint64_t* full = reinterpret_cast<uint64_t*>(pre_buf + 2 * PRE_BYTES);
  uint64_t* empty = full + STAGES;
  // order[c]: consumer c may start the mainloop of its next tile once the other consumer has
  // passed its full-barrier waits for the tile before it. Besides keeping the two mainloops
  // back to back (ping-pong), this guarantees that every full[s] phase older than the one a
  // consumer waits on has completed, so parity waits cannot alias two phases apart.
  uint64_t* order = empty + STAGES;
  uint64_t* pre_full = order + 2;   // pre tile of consumer c landed
  uint64_t* pre_empty = order + 4;  // consumer c is done with its pre/dh tile (128 arrivals)
  // dbias tickets, per consumer c: part_ready[c] = its tile's partial row is stored (128
  // arrivals); ticket_done[c] = the ticket thread drew that tile's ticket and wrote last_flag[c]
  // (nonzero: it was the band's last, the consumer sums the band at its next epilogue or exit).
  uint64_t* part_ready = order + 6;
  uint64_t* ticket_done = order + 8;
  int* last_flag = reinterpret_cast<int*>(order + 10);  // 2 slots of 8 B
  const bool with_dbias = dbias != nullptr;

  // __shfl_sync makes the warpgroup index (and what derives from it: tile, stage, descriptors)
  // provably warp-uniform, so the compiler keeps them in uniform registers (with threadIdx.x /
  // 128 it rebuilt every 64-bit wgmma descriptor in vector registers + R2UR: ~120 instructions
  // per K block instead of ~50, and a slower mainloop).
  const int wg = __shfl_sync(0xffffffffu, int(threadIdx.x / 128), 0);
  const int row_blocks = N / BM, col_blocks = H / BN, kblocks = C / BK;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);                   // producer's arrive.expect_tx; TMA bytes complete the phase
      mbar_init(&empty[s], 4 * (CM + CN - 1));  // one arrive per consumer warp of each writer CTA
    }
    for (int c = 0; c < 2; ++c) {
      mbar_init(&order[c], 1);
      mbar_init(&pre_full[c], 1);
      mbar_init(&pre_empty[c], 128);
      mbar_init(&part_ready[c], 128);
      mbar_init(&ticket_done[c], 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // Peer CTAs multicast into our ring and arrive on our empty barriers: all barriers of the
  // cluster must be initialised before anyone starts, and nobody may exit while a peer still can.
  if (CL > 1)
    cluster_sync();
  else
    __syncthreads();
  const uint32_t crank = CL > 1 ? cluster_ctarank() : 0;
  const int mr = int(crank) % CM, nr = int(crank) / CM;
  const int cluster_id = blockIdx.x / CL, num_clusters = gridDim.x / CL;
  const int groups_per_row = col_blocks / CN, num_groups = (row_blocks / CM) * groups_per_row;
  // j-th tile of this CTA: cluster tile group p = cluster_id + j * num_clusters
  auto tile_of = [&](int j, int& rb, int& cb) {
    const int p = cluster_id + j * num_clusters;
    rb = (p / groups_per_row) * CM + mr;
    cb = (p % groups_per_row) * CN + nr;
    return p < num_groups;
  };
  // multicast masks: the CTAs sharing our A tile (same mr) / our B tile (same nr)
  uint16_t mask_a = 0, mask_b = 0;
#pragma unroll
  for (int n = 0; n < CN; ++n) mask_a |= uint16_t(1u << (mr + CM * n));
#pragma unroll
  for (int m = 0; m < CM; ++m) mask_b |= uint16_t(1u << (m + CM * nr));

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) {  // ring producer: A/B K blocks of every tile, in tile order
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&tm_dy)) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&tm_w2)) : "memory");
      int rb, cb;
      if (CL == 1) {
        // One thread issues every TMA of the ring, so its loop is kept short: shared-window
        // addresses computed once, stage and phase advanced by counters, no divisions.
        const uint32_t sb = smem_u32(smem), fb = smem_u32(full), eb = smem_u32(empty);
        uint32_t st = 0, ph = 0;
        bool wrapped = false;  // the ring has been filled once: wait for the consumers' release
        for (int j = 0; tile_of(j, rb, cb); ++j) {
          const int arow = rb * BM, bcol = cb * BN;
          for (int kb = 0; kb < kblocks; ++kb) {
            if (wrapped) mbar_wait_u32(eb + 8 * st, ph ^ 1);
            const uint32_t dst = sb + st * STAGE_BYTES, bar = fb + 8 * st;
            mbar_arrive_expect_tx_u32(bar, STAGE_BYTES);
            tma_load_2d_u32(dst, &tm_dy, kb * BK, arow, bar);
            tma_load_2d_u32(dst + A_BYTES, &tm_w2, bcol, kb * BK, bar);
            tma_load_2d_u32(dst + A_BYTES + B_BOX_BYTES, &tm_w2, bcol + 64, kb * BK, bar);
            if (++st == STAGES) {
              st = 0;
              ph ^= 1;
              wrapped = true;
            }
          }
        }
      } else {  // clusters: multicast slices of A and B (see above the kernel)
        uint32_t seq = 0;
        for (int j = 0; tile_of(j, rb, cb); ++j) {
          for (int kb = 0; kb < kblocks; ++kb, ++seq) {
            const uint32_t s = seq % STAGES, n = seq / STAGES;
            if (n > 0) mbar_wait(&empty[s], (n - 1) & 1);
            uint8_t* st = smem + s * STAGE_BYTES;
            mbar_arrive_expect_tx(&full[s], STAGE_BYTES);  // whole A + B tile, whoever loads it
            if (CN > 1)                                    // our BM/CN-row slice of the A tile, to every CTA sharing it
              tma_load_2d_mc(st + nr * (A_BYTES / CN), &tm_dy, kb * BK, rb * BM + nr * (BM / CN), &full[s], mask_a);
            else
              tma_load_2d(st, &tm_dy, kb * BK, rb * BM, &full[s]);
              // B: W2 rows kb·64.. (K), H columns cb·128 + 64b.. : box b of the tile
#pragma unroll
            for (int b = mr * (B_BOXES / CM); b < (mr + 1) * (B_BOXES / CM); ++b) {
              if (CM > 1)  // our 1/CM of the boxes, to every CTA sharing the B tile
                tma_load_2d_mc(st + A_BYTES + b * B_BOX_BYTES, &tm_w2, cb * BN + 64 * b, kb * BK, &full[s], mask_b);
              else
                tma_load_2d(st + A_BYTES + b * B_BOX_BYTES, &tm_w2, cb * BN + 64 * b, kb * BK, &full[s]);
            }
          }
        }
      }
    } else if (threadIdx.x == 32) {  // pre producer: loads tile j's pre as soon as consumer
                                     // j % 2 has finished the epilogue of tile j - 2
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&tm_pre)) : "memory");
      int rb, cb;
      for (int j = 0; tile_of(j, rb, cb); ++j) {
        const int c = j & 1, i = j >> 1;
        if (i > 0) mbar_wait(&pre_empty[c], (i - 1) & 1);
        uint8_t* dst = pre_buf + c * PRE_BYTES;
        mbar_arrive_expect_tx(&pre_full[c], PRE_BYTES);
        tma_load_2d(dst, &tm_pre, cb * BN, rb * BM, &pre_full[c]);
        tma_load_2d(dst + BM * 128, &tm_pre, cb * BN + 64, rb * BM, &pre_full[c]);
      }
    } else if (with_dbias && (threadIdx.x == 64 || threadIdx.x == 96)) {
      // Ticket thread of consumer c (otherwise idle warps): takes the band ticket of each of
      // c's tiles once its partial row is stored, so that the GPU-scope fence and the atomic's
      // round trip stay off the consumers' path.
      const int c = (threadIdx.x - 64) / 32;
      volatile int* flag = last_flag + 2 * c;
      int rb, cb;
      for (int j = c, i = 0; tile_of(j, rb, cb); j += 2, ++i) {
        mbar_wait(&part_ready[c], uint32_t(i) & 1);  // acquire the 128 partial stores (CTA)
        __threadfence();                             // ... and publish them at GPU scope
        const bool last = atomicAdd(&band_tickets[cb], 1u) == unsigned(row_blocks - 1);
        if (last) {
          __threadfence();       // acquire side: every other tile's row is visible
          band_tickets[cb] = 0;  // all of this launch's tickets of band cb are drawn
        }
        *flag = last;
        mbar_arrive(&ticket_done[c]);
        // part_ready phase i + 1 cannot complete before consumer c has waited on ticket_done
        // phase i (start of its next epilogue), and it reads flag before that: no overrun.
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int c = wg - 1;  // consumer index: takes this CTA's tiles j = c, c+2, ...
    const int lane = threadIdx.x & 31;
    const uint32_t smem_base = smem_u32(smem), full_u32 = smem_u32(full), empty_u32 = smem_u32(empty);
    // a consumer warp releases ring stage s to every CTA that writes into it (see above)
    auto release = [&](uint32_t s) {
      if (lane != 0) return;
      if (CL == 1) {
        mbar_arrive_u32(empty_u32 + 8 * s);
        return;
      }
      mbar_arrive(&empty[s]);
#pragma unroll
      for (int n = 0; n < CN; ++n)
        if (n != nr) mbar_arrive_cluster(&empty[s], uint32_t(mr + CM * n));
#pragma unroll
      for (int m = 0; m < CM; ++m)
        if (m != mr) mbar_arrive_cluster(&empty[s], uint32_t(m + CM * nr));
    };
    float acc0[64], acc1[64];
    int rb, cb;
    int pend_cb = -1;  // band of this consumer's previous tile, whose ticket result is pending
    int i = 0;         // this consumer's tile count
    for (int j = c; tile_of(j, rb, cb); j += 2, ++i) {
#pragma unroll
      for (int x = 0; x < 64; ++x) {
        acc0[x] = 0.f;
        acc1[x] = 0.f;
      }
      if (j > 0) mbar_wait(&order[c], uint32_t(c == 0 ? i - 1 : i) & 1);
      // ring position of this tile's first K block; then stage and phase advance by counters
      const uint32_t seq0 = uint32_t(j) * kblocks;
      uint32_t st = seq0 % STAGES, ph = (seq0 / STAGES) & 1, st_prev = 0;
      for (int kb = 0; kb < kblocks; ++kb) {
        mbar_wait_u32(full_u32 + 8 * st, ph);
        const uint32_t a4 = ((smem_base + st * STAGE_BYTES) & 0x3FFFF) >> 4;  // address field
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < BK / 16; ++k) {
          // K16 step: A +32 B (+2 in the >>4 address field), B +16 rows = +2048 B (+128);
          // acc1's A rows start 64 rows (8 KB, +512) after acc0's
          const uint64_t db = desc_mn(a4 + A_BYTES / 16 + 128 * k);
          wgmma_m64n128k16(acc0, desc_k(a4 + 2 * k), db);
          wgmma_m64n128k16(acc1, desc_k(a4 + (64 * 128) / 16 + 2 * k), db);
        }
        wgmma_commit();
        if (kb == kblocks - 1 && (threadIdx.x & 127) == 0) mbar_arrive(&order[1 - c]);
        if (kb > 0) {
          // The previous K block's wgmmas are done: release its stage. (Waiting one block
          // later, wait_group 2, made ptxas insert its own waits around the wgmmas: slower.)
          wgmma_wait<1>();
          release(st_prev);
        }
        st_prev = st;
        if (++st == STAGES) {
          st = 0;
          ph ^= 1;
        }
      }
      wgmma_wait<0>();
      release(st_prev);
      if (with_dbias && pend_cb >= 0)
        dbias_check_pending(partial, dbias, overwrite_dbias, &ticket_done[c], last_flag + 2 * c, pend_cb, i - 1,
                            row_blocks, H);
      mbar_wait(&pre_full[c], uint32_t(i) & 1);
      tile_epilogue(acc0, acc1, pre_buf + c * PRE_BYTES, &pre_empty[c], &tm_dh, g, partial, with_dbias, &part_ready[c],
                    rb, cb, H, 1 + c);
      pend_cb = cb;
    }
    if (with_dbias && pend_cb >= 0)  // the last tile's ticket
      dbias_check_pending(partial, dbias, overwrite_dbias, &ticket_done[c], last_flag + 2 * c, pend_cb, i - 1,
                          row_blocks, H);
    if (lane == 0) bulk_wait<0>();  // this warp's dh TMA stores are complete before exit
  }
  if (CL > 1) {
    __syncwarp();
    cluster_sync();
  }
#else
  (void)band_tickets;
  __trap();  // built without sm_90a machine code: the launcher never starts it
#endif
}
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    cudaGetLastError();
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// Row-major bf16 [rows, cols], boxes of 64 columns (128 B) × box_rows rows, 128-byte swizzle:
// dy [N,C] in boxes of 64 C × 128 tokens, W2 [C,H] in boxes of 64 H × 64 C, pre [N,H] in boxes
// of 64 H × 128 tokens (loads); dh [N,H] in boxes of 64 H × 16 tokens (stores).
bool make_map(CUtensorMap& m, const void* ptr, uint64_t rows, uint64_t cols, uint32_t box_rows) {
  cuuint64_t dims[2] = {cols, rows};
  cuuint64_t strides[1] = {cols * 2};
  cuuint32_t box[2] = {64, box_rows};
  cuuint32_t estr[2] = {1, 1};
  return tensor_map_encoder()(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(ptr), dims, strides, box, estr,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// sm_90a machine code runs only on compute capability 9.0; also the opt-in shared memory.
int usable_sms() {
  static int sms = [] {
    int dev = 0, major = 0, minor = 0, count = 0, smem = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    if (major != 9 || minor != 0 || smem < SMEM_BYTES || !tensor_map_encoder()) return 0;
    if (cudaFuncSetAttribute(fused_dgrad_kernel<1, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES) !=
        cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return count;
  }();
  return sms;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

bool gelu_fc2_dgrad_fused_fits(const void* dh, const void* g, const void* dy, const void* w2, const void* pre,
                               int64_t N, int64_t C, int64_t H, Workspace ws) {
  if (N <= 0 || N % BM || H % BN || C % BK || H / BN > kMaxBands) return false;
  if (N > (int64_t(1) << 30) || C > (int64_t(1) << 30) || H > (int64_t(1) << 30)) return false;
  if (!aligned16(dh) || !aligned16(g) || !aligned16(dy) || !aligned16(w2) || !aligned16(pre)) return false;
  if (usable_sms() == 0) return false;
  const size_t part_bytes = size_t(N / BM) * size_t(H) * 4;  // dbias partials (taken always)
  return ((ws.used + 255) & ~size_t(255)) + part_bytes <= ws.bytes;
}

void gelu_fc2_dgrad_fused(void* dh, void* g, float* dbias, bool overwrite_dbias, const void* dy, const void* w2,
                          const void* pre, int64_t N, int64_t C, int64_t H, Workspace ws, cudaStream_t s) {
  if (!gelu_fc2_dgrad_fused_fits(dh, g, dy, w2, pre, N, C, H, ws))
    throw std::logic_error("gelu_fc2_dgrad_fused: called for a shape that does not fit");
  const int sms = usable_sms();
  const size_t part_bytes = size_t(N / BM) * size_t(H) * 4;
  auto* partial = static_cast<float*>(ws.take(part_bytes, "fused fc2 backward: dbias partials"));
  CUtensorMap tm_dy, tm_w2, tm_pre, tm_dh;
  if (!make_map(tm_dy, dy, uint64_t(N), uint64_t(C), BM) || !make_map(tm_w2, w2, uint64_t(C), uint64_t(H), BK) ||
      !make_map(tm_pre, pre, uint64_t(N), uint64_t(H), BM) ||
      !make_map(tm_dh, dh, uint64_t(N), uint64_t(H), DH_BOX_ROWS))
    throw std::runtime_error("gelu_fc2_dgrad_fused: cuTensorMapEncodeTiled rejected a tensor map");
  const int64_t tiles = (N / BM) * (H / BN);
  const unsigned grid = unsigned(tiles < sms ? tiles : sms);
  // One launch: GEMM, GELU rebuild and dbias (finalized by each band's last tile).
  fused_dgrad_kernel<1, 1><<<grid, THREADS, SMEM_BYTES, s>>>(tm_dy, tm_w2, tm_pre, tm_dh, static_cast<bf16*>(g),
                                                             partial, dbias, overwrite_dbias, int(N), int(C), int(H));
  RECIPE_CUDA_CHECK_LAUNCH("fused fc2 backward");
}

}  // namespace recipe::kernels::cuda
