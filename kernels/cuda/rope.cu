// RoPE in place on the packed qkv buffer [B, T, (Hq + 2·Hkv)·D]: q and k heads rotate pairs
// (i, i + D/2) by angle t·θ^(-2i/D) ("rotate_half"); v heads are untouched. The angle is
// computed in double: with --use_fast_math single-precision sin/cos lose accuracy for the large
// arguments long sequences produce. Backward rotates the gradient by the negative angle (the
// transpose of a rotation).
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"

namespace recipe::kernels::cuda {
namespace {

__global__ void rope_kernel(bf16* qkv, int B, int T, int Hq, int Hkv, int D, double log_theta, bool backward) {
  const int half = D / 2, heads = Hq + Hkv, row = (Hq + 2 * Hkv) * D;
  const int64_t total = int64_t(B) * T * heads * half;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    int i = int(idx % half);
    int64_t rest = idx / half;
    int h = int(rest % heads);
    int64_t bt = rest / heads;  // b·T + t
    int t = int(bt % T);
    double angle = double(t) * exp(-log_theta * (2.0 * i) / double(D));
    double sn, cs;
    sincos(angle, &sn, &cs);
    float c = float(cs), s = backward ? -float(sn) : float(sn);
    bf16* p = qkv + bt * row + int64_t(h) * D;  // q heads then k heads are contiguous
    float x1 = to_f(p[i]), x2 = to_f(p[i + half]);
    p[i] = __float2bfloat16_rn(x1 * c - x2 * s);
    p[i + half] = __float2bfloat16_rn(x2 * c + x1 * s);
  }
}

}  // namespace

void rope_bf16(void* qkv, int B, int T, int Hq, int Hkv, int D, float theta, bool backward, cudaStream_t s) {
  int64_t total = int64_t(B) * T * (Hq + Hkv) * (D / 2);
  if (total <= 0) return;
  int64_t blocks = (total + 255) / 256;
  if (blocks > 1 << 20) blocks = 1 << 20;
  rope_kernel<<<unsigned(blocks), 256, 0, s>>>(static_cast<bf16*>(qkv), B, T, Hq, Hkv, D, log(double(theta)), backward);
  RECIPE_CUDA_CHECK_LAUNCH("rope");
}

}  // namespace recipe::kernels::cuda
