// AdamW over the flat f32 master weights (one launch covers every parameter: the "multi-tensor"
// form, since parameters, grads and moments live in flat buffers), writing the bf16 compute copy
// in the same pass; and the deterministic Σx² used for the global gradient norm.
#include <cmath>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"

namespace recipe::kernels::cuda {
namespace {

__global__ void adamw_kernel(float* master, const float* grad, float* m, float* v,
                             bf16* compute_copy, int64_t n, float lr, float beta1, float beta2,
                             float eps, float wd, float inv_bc1, float inv_bc2, float grad_scale,
                             const float* grad_scale_device, const float* schedule_device) {
  if (schedule_device) {  // {lr, 1/bc1, 1/bc2} written by the host before a recorded step runs
    lr = schedule_device[0];
    inv_bc1 = schedule_device[1];
    inv_bc2 = schedule_device[2];
  }
  if (grad_scale_device) {
    grad_scale = *grad_scale_device;
    if (!isfinite(grad_scale)) return;  // the divergence guard fired on the device: no update
  }
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float g = grad[i] * grad_scale;
    float mi = beta1 * m[i] + (1.f - beta1) * g;
    float vi = beta2 * v[i] + (1.f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float w = master[i];
    float mhat = mi * inv_bc1, vhat = vi * inv_bc2;
    w -= lr * (mhat / (sqrtf(vhat) + eps) + wd * w);
    master[i] = w;
    if (compute_copy) compute_copy[i] = __float2bfloat16_rn(w);
  }
}

constexpr int kSumBlocks = 1024, kSumThreads = 256;

__global__ void sum_squares_partial_kernel(double* partial, const float* x, int64_t n) {
  __shared__ double red[32];
  double acc = 0.0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    double xi = x[i];
    acc += xi * xi;
  }
  acc = block_sum(acc, red);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}
// One block: the norm from the partial sums, the guard over the per-token losses, the clip factor.
// Fixed thread→element mapping and a fixed reduction tree: deterministic.
__global__ void grad_norm_clip_final_kernel(float* out, const double* partial, int count,
                                            const float* losses, int64_t n_losses, float clip,
                                            double loss_sum_limit) {
  __shared__ double red[32];
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
  acc = block_sum(acc, red);
  __syncthreads();
  double lsum = 0.0;
  for (int64_t i = threadIdx.x; i < n_losses; i += blockDim.x) lsum += double(losses[i]);
  lsum = block_sum(lsum, red);
  if (threadIdx.x == 0) {
    double norm = sqrt(acc);
    bool skip = !isfinite(norm) || (losses && (!isfinite(lsum) || lsum > loss_sum_limit));
    double scale = clip > 0.f ? fmin(1.0, double(clip) / (norm + 1e-6)) : 1.0;
    out[0] = float(norm);
    out[1] = skip ? __int_as_float(0x7fc00000) : float(scale);
  }
}

__global__ void sum_squares_final_kernel(double* out, const double* partial, int count) {
  __shared__ double red[32];
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
  acc = block_sum(acc, red);
  if (threadIdx.x == 0) *out = acc;
}

}  // namespace

void adamw(float* master, const float* grad, float* m, float* v, void* compute_copy_bf16,
           int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay, int step,
           float grad_scale, const float* grad_scale_device, const float* schedule_device,
           cudaStream_t s) {
  if (n <= 0) return;
  // The same expressions as kernels::adamw_schedule (the host side of schedule_device).
  float inv_bc1 = float(1.0 / (1.0 - std::pow(double(beta1), step)));
  float inv_bc2 = float(1.0 / (1.0 - std::pow(double(beta2), step)));
  int64_t blocks = (n + 255) / 256;
  if (blocks > 132 * 64) blocks = 132 * 64;
  adamw_kernel<<<unsigned(blocks), 256, 0, s>>>(master, grad, m, v,
                                                static_cast<bf16*>(compute_copy_bf16), n, lr,
                                                beta1, beta2, eps, weight_decay, inv_bc1, inv_bc2,
                                                grad_scale, grad_scale_device, schedule_device);
  RECIPE_CUDA_CHECK_LAUNCH("adamw");
}

double sum_squares(const float* x, int64_t n, Workspace ws, cudaStream_t s) {
  if (n <= 0) return 0.0;
  int blocks = int((n + kSumThreads - 1) / kSumThreads);
  if (blocks > kSumBlocks) blocks = kSumBlocks;
  auto* partial = static_cast<double*>(ws.take(sizeof(double) * (blocks + 1), "sum_squares"));
  sum_squares_partial_kernel<<<blocks, kSumThreads, 0, s>>>(partial, x, n);
  RECIPE_CUDA_CHECK_LAUNCH("sum_squares_partial");
  sum_squares_final_kernel<<<1, kSumThreads, 0, s>>>(partial + blocks, partial, blocks);
  RECIPE_CUDA_CHECK_LAUNCH("sum_squares_final");
  double result = 0.0;
  RECIPE_CUDA_CHECK(cudaMemcpyAsync(&result, partial + blocks, sizeof(double),
                                    cudaMemcpyDeviceToHost, s));
  RECIPE_CUDA_CHECK(cudaStreamSynchronize(s));
  return result;
}

void grad_norm_clip(float* out, const float* x, int64_t n, const float* losses, int64_t n_losses,
                    float clip, double loss_sum_limit, Workspace ws, cudaStream_t s) {
  int blocks = int((n + kSumThreads - 1) / kSumThreads);
  if (blocks > kSumBlocks) blocks = kSumBlocks;
  if (blocks < 1) blocks = 1;
  auto* partial = static_cast<double*>(ws.take(sizeof(double) * blocks, "grad_norm_clip"));
  sum_squares_partial_kernel<<<blocks, kSumThreads, 0, s>>>(partial, x, n);
  RECIPE_CUDA_CHECK_LAUNCH("grad_norm_clip_partial");
  grad_norm_clip_final_kernel<<<1, kSumThreads, 0, s>>>(out, partial, blocks, losses,
                                                        losses ? n_losses : 0, clip, loss_sum_limit);
  RECIPE_CUDA_CHECK_LAUNCH("grad_norm_clip_final");
}

}  // namespace recipe::kernels::cuda
