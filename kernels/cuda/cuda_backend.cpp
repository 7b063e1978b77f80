// CudaBackend: argument checks, memory, and dispatch to the kernels / cuBLASLt / cuDNN.
#include "kernels/cuda/cuda_backend.hpp"

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cublaslt_linear.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cudnn_attention.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/op_checks.hpp"
#include "kernels/dropout_mask.hpp"

namespace recipe::kernels {
namespace cuda {
namespace {

constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;
constexpr size_t kDefaultWorkspaceMiB = 256;
// Tickets of the one-launch column sum: one per 256-column tile (8192 tiles = 2M columns per
// launch; wider sums go in slabs).
constexpr int64_t kColumnSumTickets = 8192;

void* ptr_or_null(const Tensor& t) { return t.defined() ? t.ptr : nullptr; }

size_t workspace_bytes_or_default(size_t requested) { return requested ? requested : kDefaultWorkspaceMiB << 20; }

std::string version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

}  // namespace

CudaBackend::CudaBackend(const BackendOptions& opts) : device_(opts.device_index), deterministic_(opts.deterministic) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw std::runtime_error(
        "CUDA backend: no CUDA device is visible (check the driver and "
        "CUDA_VISIBLE_DEVICES), or use --device cpu");
  }
  if (device_ < 0 || device_ >= count)
    throw std::runtime_error("CUDA backend: device index " + std::to_string(device_) +
                             " is out of range: " + std::to_string(count) + " device(s) visible");
  RECIPE_CUDA_CHECK(cudaSetDevice(device_));
  // Run-time dispatch: the Hopper-only kernels exist in sm_90a machine code alone (which runs on
  // compute capability 9.0 only); every other GPU, and a portable_kernels run, takes the kernels
  // built for all targets (RECIPE_CUDA_ARCHITECTURES).
  int major = 0, minor = 0;
  RECIPE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_));
  RECIPE_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_));
  compute_capability_ = major * 10 + minor;
  if (compute_capability_ < 80)
    throw std::runtime_error("CUDA backend: device " + std::to_string(device_) + " has compute capability " +
                             std::to_string(major) + "." + std::to_string(minor) +
                             "; recipe's bf16 kernels need 8.0 or newer (A100, RTX 30xx, L4, H100, ...): "
                             "use another GPU or --device cpu");
  hopper_kernels_ = sm90a_built() && compute_capability_ == 90 && !opts.portable_kernels;
  if (!sm90a_built() && compute_capability_ == 90 && !opts.portable_kernels)
    notice(
        "recipe: this build has no sm_90a machine code (RECIPE_CUDA_ARCHITECTURES lacks 90a-real): the "
        "Hopper-only kernels (fused fc2 backward) do not run; rebuild with 90a-real for them");
  RECIPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  cublas_workspace_bytes_ = kCublasWorkspaceBytes;
  cublas_workspace_ = device_alloc(cublas_workspace_bytes_, "cuBLASLt workspace");
  workspace_bytes_ = workspace_bytes_or_default(opts.workspace_bytes);
  workspace_ = device_alloc(workspace_bytes_, "backend workspace");
  column_sum_tickets_ =
      static_cast<unsigned*>(device_alloc(size_t(kColumnSumTickets) * sizeof(unsigned), "column-sum tickets"));
  RECIPE_CUDA_CHECK(cudaMemsetAsync(column_sum_tickets_, 0, size_t(kColumnSumTickets) * sizeof(unsigned), stream_));
  CublasLtLinear::Options lo;
  // grad_memset: zero every gradient at the start of a step instead of letting its first write
  // overwrite (an A/B switch for the benchmark).
  memset_grads_ = opts.grad_memset;
  fused_mlp_ = opts.fused_mlp && hopper_kernels_;
  if (opts.gemm_tune_candidates < 1 || opts.gemm_tune_candidates > 256)
    bad_arg("options", "gemm_tune_candidates=" + std::to_string(opts.gemm_tune_candidates) + " must be from 1 to 256");
  lo.tune = !deterministic_ && opts.gemm_tune;
  lo.log_tuning = opts.gemm_tune_log;
  lo.notice = [this](std::string line) { notice(std::move(line)); };
  lo.tune_candidates = opts.gemm_tune_candidates;
  lo.bias_grad = opts.bias_grad_epilogue ? CublasLtLinear::BiasGrad::epilogue : CublasLtLinear::BiasGrad::column_sum;
  lo.tickets = ColumnSumTickets{column_sum_tickets_, kColumnSumTickets};
  linear_ = std::make_unique<CublasLtLinear>(stream_, cublas_workspace_, cublas_workspace_bytes_, lo);
#ifdef RECIPE_WITH_CUDNN
  // attention_tune=false keeps the heuristic's first attention plan (an A/B switch).
  const bool tune_attention = opts.attention_tune;
  if (!opts.attention_fallback) {
    try {
      attention_ = std::make_unique<CudnnAttention>(stream_, deterministic_, tune_attention);
    } catch (const std::exception& e) {
      notice(std::string("recipe: cuDNN unavailable (") + e.what() + "); attention uses the own CUDA kernels");
    }
  }
#endif
}

bool CudaBackend::sm90a_built() {
#ifdef RECIPE_CUDA_SM90A
  return true;
#else
  return false;
#endif
}

CudaBackend::~CudaBackend() {
  if (stream_) cudaStreamSynchronize(stream_);
  attention_.reset();
  linear_.reset();
  for (auto& [p, n] : allocations_) cudaFree(p);
  if (stream_) cudaStreamDestroy(stream_);
}

std::string CudaBackend::name() const {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device_) != cudaSuccess) return "cuda";
  return std::string("cuda:") + std::to_string(device_) + " (" + prop.name + ")";
}

int64_t CudaBackend::fused_epilogue_calls() const { return linear_->stats().fused; }
int64_t CudaBackend::unfused_epilogue_calls() const { return linear_->stats().unfused; }
int64_t CudaBackend::tuned_gemm_keys() const { return linear_->stats().tuned_keys; }
int64_t CudaBackend::tuned_gemm_keys_changed() const { return linear_->stats().tuned_changed; }

void* CudaBackend::device_alloc(size_t bytes, const char* what) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
  if (err != cudaSuccess) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw std::runtime_error("CUDA backend: cudaMalloc of " + std::to_string(bytes) + " bytes (" + what + ") failed: " +
                             cudaGetErrorString(err) + "; " + std::to_string(free_b >> 20) + " MiB free of " +
                             std::to_string(total_b >> 20) + " MiB. Reduce trainer.micro_batch_size or the model size");
  }
  allocations_[p] = bytes;
  current_bytes_ += bytes;
  if (current_bytes_ > peak_bytes_) peak_bytes_ = current_bytes_;
  return p;
}

void* CudaBackend::alloc(size_t bytes) {
  refuse_while_recording("alloc");
  void* p = device_alloc(bytes, "tensor");
  RECIPE_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
  RECIPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return p;
}

void CudaBackend::free(void* p) {
  if (!p) return;
  refuse_while_recording("free");
  auto it = allocations_.find(p);
  if (it == allocations_.end())
    throw std::invalid_argument("CUDA backend free: pointer was not allocated by this backend");
  RECIPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  RECIPE_CUDA_CHECK(cudaFree(p));
  rope_table_written(p, it->second);
  current_bytes_ -= it->second;
  allocations_.erase(it);
}

void CudaBackend::rope_table_written(const void* p, size_t bytes) {
  const auto key = reinterpret_cast<uintptr_t>(rope_table_.inv_freq), begin = reinterpret_cast<uintptr_t>(p);
  if (key && key >= begin && key < begin + bytes) rope_table_.inv_freq = nullptr;
}

void CudaBackend::copy(Tensor dst, Tensor src) {
  if (dst.dtype != src.dtype || dst.numel() != src.numel())
    bad_arg("copy",
            "dst " + dst.shape_str() + " and src " + src.shape_str() + " must have the same dtype and element count");
  if (dst.ptr == src.ptr || !dst.numel()) return;
  RECIPE_CUDA_CHECK(cudaMemcpyAsync(dst.ptr, src.ptr, src.bytes(), cudaMemcpyDefault, stream_));
}

void CudaBackend::to_host(void* dst, Tensor src) {
  refuse_while_recording("to_host");
  if (!src.numel()) return;
  RECIPE_CUDA_CHECK(cudaMemcpyAsync(dst, src.ptr, src.bytes(), cudaMemcpyDefault, stream_));
  RECIPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::from_host(Tensor dst, const void* src) {
  refuse_while_recording("from_host");
  if (!dst.numel()) return;
  RECIPE_CUDA_CHECK(cudaMemcpyAsync(dst.ptr, src, dst.bytes(), cudaMemcpyDefault, stream_));
  RECIPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  rope_table_written(dst.ptr, dst.bytes());
}

void CudaBackend::zero(Tensor t) {
  if (!t.numel()) return;
  RECIPE_CUDA_CHECK(cudaMemsetAsync(t.ptr, 0, t.bytes(), stream_));
}

void CudaBackend::begin_grad_writes(const std::vector<Tensor>& grads) {
  if (memset_grads_) {
    Backend::begin_grad_writes(grads);
    return;
  }
  grad_writes_.begin(grads);
}

void CudaBackend::end_grad_writes() { grad_writes_.end(); }

void CudaBackend::cast(Tensor dst, Tensor src) {
  if (dst.numel() != src.numel())
    bad_arg("cast", "dst " + dst.shape_str() + " and src " + src.shape_str() + " must have the same element count");
  if (dst.dtype == src.dtype) return copy(dst, src);
  if (dst.dtype == DType::bf16 && src.dtype == DType::f32)
    return cast_f32_to_bf16(dst.ptr, src.as<float>(), src.numel(), stream_);
  if (dst.dtype == DType::f32 && src.dtype == DType::bf16)
    return cast_bf16_to_f32(dst.as<float>(), src.ptr, src.numel(), stream_);
  bad_arg("cast", std::string("unsupported cast ") + dtype_name(src.dtype) + " -> " + dtype_name(dst.dtype));
}

void CudaBackend::synchronize() {
  refuse_while_recording("synchronize");
  RECIPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

// ---- linear ----

void CudaBackend::linear_fwd(const LinearFwdArgs& args) {
  const Tensor out = args.out, inp = args.inp, weight = args.weight, bias = args.bias, pre_gelu = args.pre_gelu;
  const char* op = "linear_fwd";
  expect(op, "weight", weight, DType::bf16);
  expect(op, "inp", inp, DType::bf16);
  expect(op, "out", out, DType::bf16);
  expect_opt(op, "bias", bias, DType::bf16);
  expect_opt(op, "pre_gelu", pre_gelu, DType::bf16);
  const int64_t OC = weight.dim(0), IC = weight.dim(1), N = inp.numel() / IC;
  expect_numel(op, "inp", inp, N * IC);
  expect_numel(op, "out", out, N * OC);
  if (bias.defined()) expect_numel(op, "bias", bias, OC);
  if (pre_gelu.defined()) expect_numel(op, "pre_gelu", pre_gelu, N * OC);
  if (args.accumulate && (bias.defined() || pre_gelu.defined()))
    bad_arg(op, "accumulate takes neither bias nor pre_gelu");
  linear_->forward(out.ptr, inp.ptr, weight.ptr, ptr_or_null(bias), ptr_or_null(pre_gelu), N, IC, OC, args.accumulate);
}

void CudaBackend::linear_bwd(const LinearBwdArgs& args) {
  const Tensor dinp = args.dinp, dweight = args.dweight, dbias = args.dbias, dout = args.dout, inp = args.inp,
               weight = args.weight, dinp_gelu_aux = args.dinp_gelu_aux, dinp_sum = args.dinp_sum;
  const char* op = "linear_bwd";
  expect(op, "dout", dout, DType::bf16);
  const Tensor& shape_src = weight.defined() ? weight : dweight;
  if (!shape_src.defined()) bad_arg(op, "weight and dweight are both undefined");
  const int64_t OC = shape_src.dim(0), IC = shape_src.dim(1), N = dout.numel() / OC;
  expect_numel(op, "dout", dout, N * OC);
  if (dinp.defined()) {
    expect(op, "dinp", dinp, DType::bf16);
    expect(op, "weight", weight, DType::bf16);
    expect_numel(op, "dinp", dinp, N * IC);
    expect_opt(op, "dinp_gelu_aux", dinp_gelu_aux, DType::bf16);
    if (dinp_gelu_aux.defined()) expect_numel(op, "dinp_gelu_aux", dinp_gelu_aux, N * IC);
    expect_opt(op, "dinp_sum", dinp_sum, DType::f32);
    if (dinp_sum.defined()) expect_numel(op, "dinp_sum", dinp_sum, IC);
    if (args.dinp_accumulate && (dinp_gelu_aux.defined() || dinp_sum.defined()))
      bad_arg(op, "dinp_accumulate takes neither dinp_gelu_aux nor dinp_sum");
    const bool os =
        N > 0 && dinp_sum.defined() && grad_writes_.whole_write(dinp_sum) == GradWriteTracker::Write::overwrite;
    linear_->backward_input(dinp.ptr, dout.ptr, weight.ptr, ptr_or_null(dinp_gelu_aux), N, IC, OC,
                            static_cast<float*>(ptr_or_null(dinp_sum)), os, workspace(), args.dinp_accumulate);
  } else if (dinp_sum.defined()) {
    bad_arg(op, "dinp_sum needs dinp (it is the column sum of dinp)");
  }
  expect_opt(op, "dweight", dweight, DType::f32);
  expect_opt(op, "dbias", dbias, DType::f32);
  if (dbias.defined()) expect_numel(op, "dbias", dbias, OC);
  if (dweight.defined()) {
    expect(op, "inp", inp, DType::bf16);
    expect_numel(op, "inp", inp, N * IC);
    expect_numel(op, "dweight", dweight, OC * IC);
  }
  if ((dweight.defined() || dbias.defined()) && N > 0) {
    const bool ow = dweight.defined() && grad_writes_.whole_write(dweight) == GradWriteTracker::Write::overwrite;
    const bool ob = dbias.defined() && grad_writes_.whole_write(dbias) == GradWriteTracker::Write::overwrite;
    linear_->backward_weight(static_cast<float*>(ptr_or_null(dweight)), static_cast<float*>(ptr_or_null(dbias)),
                             dout.ptr, ptr_or_null(inp), N, IC, OC, workspace(), ow, ob);
  }
}

// The fused path writes dinp, act and dinp_sum in one kernel (gelu_fc2_backward.cu), then the
// weight gradient reads the rebuilt act; otherwise the default's gelu_fwd + linear_bwd.
void CudaBackend::gelu_rebuild_linear_bwd(const GeluRebuildLinearBwdArgs& args) {
  const Tensor dinp = args.dinp, act = args.act, dweight = args.dweight, dbias = args.dbias, dout = args.dout,
               weight = args.weight, pre = args.pre, dinp_sum = args.dinp_sum;
  const char* op = "gelu_rebuild_linear_bwd";
  if (dinp.defined() && weight.defined() && act.defined() && pre.defined() && dout.dtype == DType::bf16 &&
      weight.dtype == DType::bf16 && dinp.dtype == DType::bf16 && act.dtype == DType::bf16 &&
      pre.dtype == DType::bf16) {
    const int64_t OC = weight.dim(0), IC = weight.dim(1), N = dout.numel() / OC;
    expect_numel(op, "dout", dout, N * OC);
    expect_numel(op, "dinp", dinp, N * IC);
    expect_numel(op, "act", act, N * IC);
    expect_numel(op, "pre", pre, N * IC);
    expect_opt(op, "dinp_sum", dinp_sum, DType::f32);
    if (dinp_sum.defined()) expect_numel(op, "dinp_sum", dinp_sum, IC);
    if (fused_mlp_ &&
        cuda::gelu_fc2_dgrad_fused_fits(dinp.ptr, act.ptr, dout.ptr, weight.ptr, pre.ptr, N, OC, IC, workspace())) {
      const bool os = dinp_sum.defined() && grad_writes_.whole_write(dinp_sum) == GradWriteTracker::Write::overwrite;
      cuda::gelu_fc2_dgrad_fused(dinp.ptr, act.ptr, static_cast<float*>(ptr_or_null(dinp_sum)), os, dout.ptr,
                                 weight.ptr, pre.ptr, N, OC, IC, workspace(), stream_);
      ++fused_mlp_backward_calls_;
      linear_bwd({.dweight = dweight, .dbias = dbias, .dout = dout, .inp = act, .weight = weight});
      return;
    }
  }
  Backend::gelu_rebuild_linear_bwd(args);
}

// ---- embeddings ----

void CudaBackend::embedding_fwd(const EmbeddingFwdArgs& args) {
  const Tensor out = args.out, tokens = args.tokens, wte = args.wte, wpe = args.wpe;
  const int T = args.T, vocab_start = args.vocab_start;
  const char* op = "embedding_fwd";
  expect(op, "tokens", tokens, DType::i32);
  expect(op, "wte", wte, DType::bf16);
  expect(op, "out", out, DType::bf16);
  expect_opt(op, "wpe", wpe, DType::bf16);
  const int64_t N = tokens.numel(), C = wte.dim(1);
  expect_numel(op, "out", out, N * C);
  if (T <= 0 || N % T) bad_arg(op, "T=" + std::to_string(T) + " must divide " + std::to_string(N) + " tokens");
  if (wpe.defined() && wpe.dim(0) < T) bad_arg(op, "wpe " + wpe.shape_str() + " has fewer than T rows");
  const int32_t* pos = positions_of(op, args.positions, 1, T);  // i32 [T]
  cuda::embedding_fwd(out.ptr, tokens.as<int32_t>(), wte.ptr, wte.dim(0), ptr_or_null(wpe),
                      wpe.defined() ? wpe.dim(0) : 0, pos, N, C, T, vocab_start, stream_);
}

void CudaBackend::embedding_bwd(const EmbeddingBwdArgs& args) {
  const Tensor dwte = args.dwte, dwpe = args.dwpe, dout = args.dout, tokens = args.tokens;
  const int T = args.T, vocab_start = args.vocab_start;
  const char* op = "embedding_bwd";
  expect(op, "tokens", tokens, DType::i32);
  expect(op, "dout", dout, DType::bf16);
  expect_opt(op, "dwte", dwte, DType::f32);
  expect_opt(op, "dwpe", dwpe, DType::f32);
  const int64_t N = tokens.numel(), C = dout.numel() / (N ? N : 1);
  expect_numel(op, "dout", dout, N * C);
  if (T <= 0 || N % T) bad_arg(op, "T=" + std::to_string(T) + " must divide " + std::to_string(N) + " tokens");
  if (dwte.defined() && dwte.numel() % C) bad_arg(op, "dwte " + dwte.shape_str() + " row size differs from dout");
  if (dwpe.defined() && dwpe.numel() < int64_t(T) * C)
    bad_arg(op, "dwpe " + dwpe.shape_str() + " has fewer than T rows");
  const int32_t* pos = positions_of(op, args.positions, 1, T);  // i32 [T]
  // Scatters (dwte: only the rows of the batch's tokens; dwpe: only the T rows the positions name):
  // a fresh gradient is zeroed first.
  grad_writes_.partial_write(dwte);
  grad_writes_.partial_write(dwpe);
  cuda::embedding_bwd(static_cast<float*>(ptr_or_null(dwte)), dwte.defined() ? dwte.numel() / C : 0,
                      static_cast<float*>(ptr_or_null(dwpe)), dwpe.defined() ? dwpe.numel() / C : 0, pos, dout.ptr,
                      tokens.as<int32_t>(), N, C, T, vocab_start, workspace(), stream_);
}

// ---- norms ----

void CudaBackend::layernorm_fwd(const LayerNormFwdArgs& args) {
  const Tensor out = args.out, mean = args.mean, rstd = args.rstd, inp = args.inp, weight = args.weight,
               bias = args.bias;
  const float eps = args.eps;
  const char* op = "layernorm_fwd";
  expect(op, "inp", inp, DType::bf16);
  expect(op, "out", out, DType::bf16);
  expect(op, "weight", weight, DType::bf16);
  expect_opt(op, "bias", bias, DType::bf16);
  expect_opt(op, "mean", mean, DType::f32);
  expect_opt(op, "rstd", rstd, DType::f32);
  const int64_t C = weight.numel(), N = inp.numel() / C;
  expect_numel(op, "out", out, N * C);
  cuda::layernorm_fwd(out.ptr, static_cast<float*>(ptr_or_null(mean)), static_cast<float*>(ptr_or_null(rstd)), inp.ptr,
                      nullptr, nullptr, weight.ptr, ptr_or_null(bias), N, C, eps, false, stream_);
}

// The overwrite flags of a norm backward's f32 outputs (none for an empty batch: nothing is written).
cuda::NormGradOverwrite CudaBackend::norm_grad_writes(int64_t N, Tensor dweight, Tensor dbias, Tensor dinp_sum) {
  cuda::NormGradOverwrite ow;
  if (N <= 0) return ow;
  auto first = [&](const Tensor& t) {
    return t.defined() && grad_writes_.whole_write(t) == GradWriteTracker::Write::overwrite;
  };
  ow.dweight = first(dweight);
  ow.dbias = first(dbias);
  ow.dinp_sum = first(dinp_sum);
  return ow;
}

void CudaBackend::layernorm_bwd(const LayerNormBwdArgs& args) {
  const Tensor dinp = args.dinp, dweight = args.dweight, dbias = args.dbias, dout = args.dout, inp = args.inp,
               weight = args.weight, mean = args.mean, rstd = args.rstd, dinp_sum = args.dinp_sum;
  const char* op = "layernorm_bwd";
  expect(op, "dout", dout, DType::bf16);
  expect(op, "inp", inp, DType::bf16);
  expect(op, "weight", weight, DType::bf16);
  expect(op, "mean", mean, DType::f32);
  expect(op, "rstd", rstd, DType::f32);
  expect_opt(op, "dinp", dinp, DType::bf16);
  expect_opt(op, "dweight", dweight, DType::f32);
  expect_opt(op, "dbias", dbias, DType::f32);
  expect_opt(op, "dinp_sum", dinp_sum, DType::f32);
  const int64_t C = weight.numel(), N = inp.numel() / C;
  if (dbias.defined()) expect_numel(op, "dbias", dbias, C);
  if (dweight.defined()) expect_numel(op, "dweight", dweight, C);
  if (dinp_sum.defined()) {
    expect_numel(op, "dinp_sum", dinp_sum, C);
    if (!dinp.defined()) bad_arg(op, "dinp_sum needs dinp (it is the column sum of dinp)");
  }
  const cuda::NormGradOverwrite ow = norm_grad_writes(N, dweight, dbias, dinp_sum);
  cuda::layernorm_bwd(ptr_or_null(dinp), static_cast<float*>(ptr_or_null(dweight)),
                      static_cast<float*>(ptr_or_null(dbias)), static_cast<float*>(ptr_or_null(dinp_sum)), dout.ptr,
                      inp.ptr, weight.ptr, mean.as<float>(), rstd.as<float>(), N, C, false, ow, workspace(), stream_);
}

void CudaBackend::rmsnorm_fwd(const RmsNormFwdArgs& args) {
  const Tensor out = args.out, rstd = args.rstd, inp = args.inp, weight = args.weight;
  const float eps = args.eps;
  const char* op = "rmsnorm_fwd";
  expect(op, "inp", inp, DType::bf16);
  expect(op, "out", out, DType::bf16);
  expect(op, "weight", weight, DType::bf16);
  expect_opt(op, "rstd", rstd, DType::f32);
  const int64_t C = weight.numel(), N = inp.numel() / C;
  expect_numel(op, "out", out, N * C);
  cuda::layernorm_fwd(out.ptr, nullptr, static_cast<float*>(ptr_or_null(rstd)), inp.ptr, nullptr, nullptr, weight.ptr,
                      nullptr, N, C, eps, true, stream_);
}

void CudaBackend::rmsnorm_bwd(const RmsNormBwdArgs& args) {
  const Tensor dinp = args.dinp, dweight = args.dweight, dout = args.dout, inp = args.inp, weight = args.weight,
               rstd = args.rstd;
  const char* op = "rmsnorm_bwd";
  expect(op, "dout", dout, DType::bf16);
  expect(op, "inp", inp, DType::bf16);
  expect(op, "weight", weight, DType::bf16);
  expect(op, "rstd", rstd, DType::f32);
  expect_opt(op, "dinp", dinp, DType::bf16);
  expect_opt(op, "dweight", dweight, DType::f32);
  const int64_t C = weight.numel(), N = inp.numel() / C;
  if (dweight.defined()) expect_numel(op, "dweight", dweight, C);
  const cuda::NormGradOverwrite ow = norm_grad_writes(N, dweight, Tensor(), Tensor());
  cuda::layernorm_bwd(ptr_or_null(dinp), static_cast<float*>(ptr_or_null(dweight)), nullptr, nullptr, dout.ptr, inp.ptr,
                      weight.ptr, nullptr, rstd.as<float>(), N, C, true, ow, workspace(), stream_);
}

// qk-norm's shape checks, shared by both directions: the head counts, D within the kernels' reach,
// the weights [D] and packed rows of (Hq + 2·Hkv)·D.
static int64_t qk_norm_rows(const char* op, const Tensor& inp, const Tensor& q_weight, const Tensor& k_weight, int Hq,
                            int Hkv, int D) {
  expect(op, "inp", inp, DType::bf16);
  expect(op, "q_weight", q_weight, DType::bf16);
  expect(op, "k_weight", k_weight, DType::bf16);
  if (Hq < 1 || Hkv < 1 || Hq % Hkv != 0 || D < 1 || D > cuda::kQkNormMaxHeadDim)
    bad_arg(op, "Hq=" + std::to_string(Hq) + ", Hkv=" + std::to_string(Hkv) + ", D=" + std::to_string(D) +
                    ": needs Hkv dividing Hq and 1 ≤ D ≤ " + std::to_string(cuda::kQkNormMaxHeadDim));
  expect_numel(op, "q_weight", q_weight, D);
  expect_numel(op, "k_weight", k_weight, D);
  const int64_t W = int64_t(Hq + 2 * Hkv) * D;
  if (inp.numel() % W != 0)
    bad_arg(op, "inp " + inp.shape_str() + " is not a whole number of packed qkv rows of " + std::to_string(W));
  return inp.numel() / W;
}

void CudaBackend::qk_norm_fwd(const QkNormFwdArgs& a) {
  const char* op = "qk_norm_fwd";
  const int64_t rows = qk_norm_rows(op, a.inp, a.q_weight, a.k_weight, a.Hq, a.Hkv, a.D);
  expect(op, "out", a.out, DType::bf16);
  expect_numel(op, "out", a.out, a.inp.numel());
  cuda::qk_norm_fwd(a.out.ptr, a.inp.ptr, a.q_weight.ptr, a.k_weight.ptr, rows, a.Hq, a.Hkv, a.D, a.eps, stream_);
}

void CudaBackend::qk_norm_bwd(const QkNormBwdArgs& a) {
  const char* op = "qk_norm_bwd";
  const int64_t rows = qk_norm_rows(op, a.inp, a.q_weight, a.k_weight, a.Hq, a.Hkv, a.D);
  expect(op, "dout", a.dout, DType::bf16);
  expect_numel(op, "dout", a.dout, a.inp.numel());
  expect_opt(op, "dinp", a.dinp, DType::bf16);
  if (a.dinp.defined()) expect_numel(op, "dinp", a.dinp, a.inp.numel());
  expect_opt(op, "dq_weight", a.dq_weight, DType::f32);
  expect_opt(op, "dk_weight", a.dk_weight, DType::f32);
  if (a.dq_weight.defined()) expect_numel(op, "dq_weight", a.dq_weight, a.D);
  if (a.dk_weight.defined()) expect_numel(op, "dk_weight", a.dk_weight, a.D);
  auto first = [&](const Tensor& t) {
    return rows > 0 && t.defined() && grad_writes_.whole_write(t) == GradWriteTracker::Write::overwrite;
  };
  const bool ow_q = first(a.dq_weight), ow_k = first(a.dk_weight);
  cuda::qk_norm_bwd(ptr_or_null(a.dinp), static_cast<float*>(ptr_or_null(a.dq_weight)),
                    static_cast<float*>(ptr_or_null(a.dk_weight)), a.dout.ptr, a.inp.ptr, a.q_weight.ptr,
                    a.k_weight.ptr, rows, a.Hq, a.Hkv, a.D, a.eps, ow_q, ow_k, workspace(), stream_);
}

void CudaBackend::residual_norm_fwd(const ResidualNormFwdArgs& args) {
  const Tensor residual = args.residual, out = args.out, mean = args.mean, rstd = args.rstd, a = args.a, b = args.b,
               weight = args.weight, bias = args.bias;
  const float eps = args.eps;
  const bool rms = args.rms;
  const char* op = "residual_norm_fwd";
  expect(op, "residual", residual, DType::bf16);
  expect(op, "a", a, DType::bf16);
  expect(op, "b", b, DType::bf16);
  expect(op, "out", out, DType::bf16);
  expect(op, "weight", weight, DType::bf16);
  expect_opt(op, "bias", bias, DType::bf16);
  expect_opt(op, "mean", mean, DType::f32);
  expect_opt(op, "rstd", rstd, DType::f32);
  const int64_t C = weight.numel(), N = residual.numel() / C;
  expect_numel(op, "a", a, N * C);
  expect_numel(op, "b", b, N * C);
  expect_numel(op, "out", out, N * C);
  cuda::layernorm_fwd(out.ptr, rms ? nullptr : static_cast<float*>(ptr_or_null(mean)),
                      static_cast<float*>(ptr_or_null(rstd)), residual.ptr, a.ptr, b.ptr, weight.ptr,
                      rms ? nullptr : ptr_or_null(bias), N, C, eps, rms, stream_);
}

// ---- elementwise ----

void CudaBackend::add(Tensor out, Tensor a, Tensor b) {
  if (a.numel() != b.numel() || out.numel() != a.numel() || a.dtype != b.dtype || out.dtype != a.dtype)
    bad_arg("add", "out " + out.shape_str() + ", a " + a.shape_str() + ", b " + b.shape_str() +
                       " must match in dtype and element count");
  if (a.dtype == DType::bf16) return add_bf16(out.ptr, a.ptr, b.ptr, a.numel(), stream_);
  if (a.dtype == DType::f32) return add_f32(out.as<float>(), a.as<float>(), b.as<float>(), a.numel(), stream_);
  bad_arg("add", "i32 tensors are not supported");
}

void CudaBackend::gelu_fwd(Tensor out, Tensor inp) {
  expect("gelu_fwd", "inp", inp, DType::bf16);
  expect("gelu_fwd", "out", out, DType::bf16);
  expect_numel("gelu_fwd", "out", out, inp.numel());
  gelu_fwd_bf16(out.ptr, inp.ptr, inp.numel(), stream_);
}

void CudaBackend::gelu_bwd(Tensor dinp, Tensor dout, Tensor inp) {
  expect("gelu_bwd", "inp", inp, DType::bf16);
  expect("gelu_bwd", "dout", dout, DType::bf16);
  expect("gelu_bwd", "dinp", dinp, DType::bf16);
  expect_numel("gelu_bwd", "dout", dout, inp.numel());
  expect_numel("gelu_bwd", "dinp", dinp, inp.numel());
  gelu_bwd_bf16(dinp.ptr, dout.ptr, inp.ptr, inp.numel(), stream_);
}

void CudaBackend::swiglu_fwd(Tensor out, Tensor gate_up) {
  expect("swiglu_fwd", "out", out, DType::bf16);
  expect("swiglu_fwd", "gate_up", gate_up, DType::bf16);
  const int64_t F = out.dim(-1), rows = out.numel() / F;
  expect_numel("swiglu_fwd", "gate_up", gate_up, rows * 2 * F);
  swiglu_fwd_bf16(out.ptr, gate_up.ptr, rows, F, stream_);
}

void CudaBackend::swiglu_bwd(Tensor dgate_up, Tensor dout, Tensor gate_up) {
  expect("swiglu_bwd", "dout", dout, DType::bf16);
  expect("swiglu_bwd", "gate_up", gate_up, DType::bf16);
  expect("swiglu_bwd", "dgate_up", dgate_up, DType::bf16);
  const int64_t F = dout.dim(-1), rows = dout.numel() / F;
  expect_numel("swiglu_bwd", "gate_up", gate_up, rows * 2 * F);
  expect_numel("swiglu_bwd", "dgate_up", dgate_up, rows * 2 * F);
  swiglu_bwd_bf16(dgate_up.ptr, nullptr, dout.ptr, gate_up.ptr, rows, F, stream_);
}

void CudaBackend::swiglu_bwd_rebuild(const SwigluBwdRebuildArgs& a) {
  const char* op = "swiglu_bwd_rebuild";
  expect(op, "dout", a.dout, DType::bf16);
  expect(op, "gate_up", a.gate_up, DType::bf16);
  expect(op, "dgate_up", a.dgate_up, DType::bf16);
  expect_opt(op, "act", a.act, DType::bf16);
  const int64_t F = a.dout.dim(-1), rows = a.dout.numel() / F;
  expect_numel(op, "gate_up", a.gate_up, rows * 2 * F);
  expect_numel(op, "dgate_up", a.dgate_up, rows * 2 * F);
  if (a.act.defined()) expect_numel(op, "act", a.act, rows * F);
  swiglu_bwd_bf16(a.dgate_up.ptr, ptr_or_null(a.act), a.dout.ptr, a.gate_up.ptr, rows, F, stream_);
}

// The angle table is made from the run's inv_freq table on the first call outside recording (the
// trainer's first step runs eagerly before it is captured) and kept for the run; a shape without
// one runs the scalar kernel. Per-sample positions (< T) index the same table. The (cos, sin) table
// is keyed by the inv_freq tensor's address: ops.hpp lets a backend keep values derived from it
// until it is freed or rewritten by from_host, and both forget the key (rope_table_written).
void CudaBackend::rope(const RopeArgs& a, bool backward) {
  const char* op = backward ? "rope_bwd" : "rope_fwd";
  const int B = a.shape.B, T = a.shape.T, Hq = a.shape.Hq, Hkv = a.shape.Hkv, D = a.shape.D;
  void* qkv = a.qkv.ptr;
  expect(op, backward ? "dqkv" : "qkv", a.qkv, DType::bf16);
  expect_numel(op, backward ? "dqkv" : "qkv", a.qkv, int64_t(B) * T * (Hq + 2 * Hkv) * D);
  if (D % 2) bad_arg(op, "head dim " + std::to_string(D) + " must be even");
  const int32_t* pos = nullptr;
  if (a.positions.defined()) {
    expect(op, "positions", a.positions, DType::i32);
    expect_numel(op, "positions", a.positions, int64_t(B) * T);
    pos = a.positions.as<int32_t>();
  }
  expect(op, "inv_freq", a.inv_freq, DType::f64);
  expect_numel(op, "inv_freq", a.inv_freq, D / 2);
  const double* inv_freq = a.inv_freq.as<double>();
  // The table's rows are the positions it holds: T, or the caller's bound on positions past T
  // (context parallelism's whole-sample positions). Any position beyond the table (a bound too
  // small, or a table built for a shorter run) is computed by the kernel itself, never read
  // past the table's end.
  const int rows = std::max(T, a.max_positions);
  const bool from_this = rope_table_.ptr && rope_table_.D == D && rope_table_.inv_freq == inv_freq;
  if (!(from_this && rope_table_.rows >= rows) && !recording_ && rope_table_fits(qkv, D)) {
    if (rope_table_.ptr) free(rope_table_.ptr);
    rope_table_ = {device_alloc(rope_table_bytes(rows, D), "RoPE angle table"), rows, D, inv_freq};
    rope_table(rope_table_.ptr, rows, D, inv_freq, stream_);
  }
  if (rope_table_.ptr && rope_table_.D == D && rope_table_.inv_freq == inv_freq && rope_table_fits(qkv, D))
    rope_bf16_table(qkv, rope_table_.ptr, rope_table_.rows, inv_freq, pos, B, T, Hq, Hkv, D, backward, stream_);
  else
    rope_bf16(qkv, pos, B, T, Hq, Hkv, D, inv_freq, backward, stream_);
}

void CudaBackend::rope_fwd(const RopeArgs& a) { rope(a, false); }

void CudaBackend::rope_bwd(const RopeArgs& a) { rope(a, true); }

void CudaBackend::dropout(const DropoutArgs& a) {
  const char* op = "dropout";
  if (!a.inp.defined() || a.inp.ndim != 2) bad_arg(op, "inp must be a defined [rows, cols] tensor");
  if (a.inp.dtype != DType::f32 && a.inp.dtype != DType::bf16) bad_arg(op, "inp must be f32 or bf16");
  expect(op, "inp", a.inp, a.inp.dtype);
  expect(op, "out", a.out, a.inp.dtype);
  expect_numel(op, "out", a.out, a.inp.numel());
  if (!(a.p >= 0.0f && a.p < 1.0f)) bad_arg(op, "p=" + std::to_string(a.p) + " must be in [0, 1)");
  const int64_t rows = a.inp.dim(0), cols = a.inp.dim(1);
  if (a.first_row < 0 || a.first_col < 0 || a.row_stride < a.first_col + cols)
    bad_arg(op, "the block's columns do not fit a row of " + std::to_string(a.row_stride));
  const DropoutMask m{.key = a.key,
                      .first_row = a.first_row,
                      .row_stride = a.row_stride,
                      .first_col = a.first_col,
                      .threshold = dropout_threshold(a.p),
                      .keep_scale = 1.0f / (1.0f - a.p),
                      .accumulate = a.accumulate};
  cuda::dropout(a.out.ptr, a.inp.ptr, a.inp.dtype == DType::bf16, rows, cols, m, stream_);
}

// ---- attention ----

void CudaBackend::note_attention_fallback(const std::string& shape, const std::string& why) {
  if (reported_fallbacks_.insert(shape).second)
    notice("recipe: cuDNN attention rejected " + shape + " (" + why + "); using the own CUDA attention kernels for it");
}

const int32_t* CudaBackend::positions_of(const char* op, const Tensor& positions, int B, int T) {
  if (!positions.defined()) return nullptr;
  expect(op, "positions", positions, DType::i32);
  expect_numel(op, "positions", positions, int64_t(B) * T);
  return positions.as<int32_t>();
}

// Packed samples run cuDNN's ragged attention when the shape says how many samples a row may hold
// (AttentionShape::max_samples) and the offsets fit int32; otherwise the own kernels, said once
// with the cause, as every slow path is.
void CudaBackend::note_packed_attention(const std::string& why) {
  if (reported_fallbacks_.insert("packed").second)
    notice("recipe: packed samples (data.kind=sft, data.pack=true) run the own CUDA attention kernels, not cuDNN (" +
           why + "; about 4-7x slower attention); data.pack=false keeps cuDNN");
}

// The sample slots of packed rows, computed into the front of ws (which the cuDNN call then
// shares): [B·slots] lengths and three [B·slots + 1] offset arrays.
PackedSegments CudaBackend::packed_segments_in(Workspace& ws, const int32_t* pos, const AttentionShape& a) {
  const size_t n = size_t(a.B) * size_t(a.max_samples) + 1;
  auto* p = static_cast<int32_t*>(ws.take(4 * n * sizeof(int32_t), "packed attention segments"));
  const PackedSegments seg{.seq_len = p, .qkv_offset = p + n, .out_offset = p + 2 * n, .lse_offset = p + 3 * n};
  packed_segments(seg, pos, a.B, a.T, a.max_samples, a.Hq, a.Hkv, a.D, stream_);
  return seg;
}

// Why packed samples of this shape cannot take cuDNN's ragged attention ("" when they can).
std::string CudaBackend::ragged_refusal(const AttentionShape& a) const {
  if (a.max_samples <= 0) return "no bound on samples per row (data.max_samples_per_pack)";
  if (a.max_samples > 4096) return "more than 4096 samples per row (data.max_samples_per_pack)";
  if (!packed_segments_fit(a.B, a.T, a.Hq, a.Hkv, a.D)) return "element offsets beyond int32";
  return "";
}

// The segments plus the token-major lse the ragged graphs read or write (and alignment).
static size_t packed_segments_bytes(const AttentionShape& a) {
  return a.max_samples > 0 ? 4 * (size_t(a.B) * size_t(a.max_samples) + 1) * sizeof(int32_t) +
                                 size_t(a.B) * size_t(a.T) * size_t(a.Hq) * sizeof(float) + 512
                           : 0;
}

void CudaBackend::grow_workspace(size_t need, const std::string& what) {
  if (need <= workspace_bytes_) return;
  const size_t grown = (need + (size_t(1) << 20) - 1) >> 20 << 20;
  notice("recipe: " + what + " needs " + std::to_string(need >> 20) + " MiB of workspace, more than the plan's " +
         std::to_string(workspace_bytes_ >> 20) + " MiB (kernels.workspace_mb); the backend workspace grows to " +
         std::to_string(grown >> 20) + " MiB");
  synchronize();
  free(workspace_);
  workspace_ = nullptr;
  workspace_ = device_alloc(grown, "backend workspace");
  workspace_bytes_ = grown;
}

AttentionPlan CudaBackend::prepare_attention(const AttentionShape& shape) {
  refuse_while_recording("prepare_attention");
#ifdef RECIPE_WITH_CUDNN
  if (attention_) {
    const auto [B, T, Hq, Hkv, D, max_samples] = shape;
    std::string dims = "B=" + std::to_string(B) + " T=" + std::to_string(T) + " Hq=" + std::to_string(Hq) +
                       " Hkv=" + std::to_string(Hkv) + " D=" + std::to_string(D);
    int slots = 0;
    if (max_samples > 0) {  // packed samples: ragged graphs
      const std::string why = ragged_refusal(shape);
      if (!why.empty()) {
        note_packed_attention(why);
        return {.path = "own", .workspace_bytes = 0};
      }
      slots = max_samples;
      dims += " packed, " + std::to_string(slots) + " samples per row";
    }
    int64_t need = 0;
    for (const bool backward : {false, true}) {
      const int64_t w = attention_->workspace_needed(B, T, Hq, Hkv, D, backward, slots);
      if (w < 0) {
        // attention_fwd/bwd will find the same rejection; say it now, once, with the cost and the key.
        note_attention_fallback(std::string(backward ? "bwd " : "fwd ") + dims,
                                attention_->last_rejection() + "; about 7x slower");
        return {.path = "own", .workspace_bytes = 0};
      }
      need = std::max(need, w);
    }
    need += int64_t(packed_segments_bytes(shape));
    // The plan's kernels.workspace_bytes is an estimate made without a GPU; cuDNN's plans for the
    // run's real shape are the measure. Grow rather than fall back to the slow kernels.
    grow_workspace(size_t(need), "cuDNN attention (" + dims + ")");
    return {.path = "cudnn", .workspace_bytes = need};
  }
#endif
  return {.path = "own", .workspace_bytes = 0};
}

KernelPaths CudaBackend::kernel_paths() const {
  const bool cudnn = cudnn_calls_ > 0, own = fallback_calls_ > 0;
  return {.attention = cudnn && own ? "cudnn+own" : cudnn ? "cudnn" : own ? "own" : "", .gemm = "cublaslt"};
}

void CudaBackend::attention_fwd(const AttentionFwdArgs& args) {
  const Tensor out = args.out, lse = args.lse, qkv = args.qkv;
  const int B = args.shape.B, T = args.shape.T, Hq = args.shape.Hq, Hkv = args.shape.Hkv, D = args.shape.D;
  const char* op = "attention_fwd";
  expect(op, "qkv", qkv, DType::bf16);
  expect(op, "out", out, DType::bf16);
  expect(op, "lse", lse, DType::f32);
  expect_numel(op, "qkv", qkv, int64_t(B) * T * (Hq + 2 * Hkv) * D);
  expect_numel(op, "out", out, int64_t(B) * T * Hq * D);
  expect_numel(op, "lse", lse, int64_t(B) * Hq * T);
  if (Hkv <= 0 || Hq % Hkv)
    bad_arg(op, "Hq=" + std::to_string(Hq) + " must be a multiple of Hkv=" + std::to_string(Hkv));
  const int32_t* pos = positions_of(op, args.positions, B, T);
#ifdef RECIPE_WITH_CUDNN
  const std::string ragged_why = pos ? ragged_refusal(args.shape) : "";
  if (attention_ && pos && !ragged_why.empty()) note_packed_attention(ragged_why);
  if (attention_ && ragged_why.empty()) {
    Workspace ws = workspace();
    const PackedSegments seg = pos ? packed_segments_in(ws, pos, args.shape) : PackedSegments{};
    float* lse_tokens = pos ? static_cast<float*>(ws.take(size_t(lse.numel()) * sizeof(float), "ragged lse")) : nullptr;
    if (attention_->forward(out.ptr, pos ? lse_tokens : lse.as<float>(), qkv.ptr, B, T, Hq, Hkv, D, ws,
                            pos ? &seg : nullptr, args.shape.max_samples)) {
      if (pos) lse_from_tokens(lse.as<float>(), lse_tokens, B, T, Hq, stream_);
      ++cudnn_calls_;
      return;
    }
    note_attention_fallback("fwd B=" + std::to_string(B) + " T=" + std::to_string(T) + " Hq=" + std::to_string(Hq) +
                                " Hkv=" + std::to_string(Hkv) + " D=" + std::to_string(D),
                            attention_->last_rejection());
  }
#endif
  ++fallback_calls_;
  attention_fwd_fallback(out.ptr, lse.as<float>(), qkv.ptr, pos, B, T, Hq, Hkv, D, stream_);
}

void CudaBackend::attention_bwd(const AttentionBwdArgs& args) {
  const Tensor dqkv = args.dqkv, dout = args.dout, qkv = args.qkv, out = args.out, lse = args.lse;
  const int B = args.shape.B, T = args.shape.T, Hq = args.shape.Hq, Hkv = args.shape.Hkv, D = args.shape.D;
  const char* op = "attention_bwd";
  expect(op, "dqkv", dqkv, DType::bf16);
  expect(op, "dout", dout, DType::bf16);
  expect(op, "qkv", qkv, DType::bf16);
  expect(op, "out", out, DType::bf16);
  expect(op, "lse", lse, DType::f32);
  const int64_t nqkv = int64_t(B) * T * (Hq + 2 * Hkv) * D, nout = int64_t(B) * T * Hq * D;
  expect_numel(op, "qkv", qkv, nqkv);
  expect_numel(op, "dqkv", dqkv, nqkv);
  expect_numel(op, "out", out, nout);
  expect_numel(op, "dout", dout, nout);
  expect_numel(op, "lse", lse, int64_t(B) * Hq * T);
  if (Hkv <= 0 || Hq % Hkv)
    bad_arg(op, "Hq=" + std::to_string(Hq) + " must be a multiple of Hkv=" + std::to_string(Hkv));
  const int32_t* pos = positions_of(op, args.positions, B, T);
#ifdef RECIPE_WITH_CUDNN
  const std::string ragged_why = pos ? ragged_refusal(args.shape) : "";
  if (attention_ && pos && !ragged_why.empty()) note_packed_attention(ragged_why);
  if (attention_ && ragged_why.empty()) {
    Workspace ws = workspace();
    const PackedSegments seg = pos ? packed_segments_in(ws, pos, args.shape) : PackedSegments{};
    float* lse_tokens = pos ? static_cast<float*>(ws.take(size_t(lse.numel()) * sizeof(float), "ragged lse")) : nullptr;
    if (pos) lse_to_tokens(lse_tokens, lse.as<float>(), B, T, Hq, stream_);
    if (attention_->backward(dqkv.ptr, dout.ptr, qkv.ptr, out.ptr, pos ? lse_tokens : lse.as<float>(), B, T, Hq, Hkv, D,
                             ws, pos ? &seg : nullptr, args.shape.max_samples)) {
      ++cudnn_calls_;
      return;
    }
    note_attention_fallback("bwd B=" + std::to_string(B) + " T=" + std::to_string(T) + " Hq=" + std::to_string(Hq) +
                                " Hkv=" + std::to_string(Hkv) + " D=" + std::to_string(D),
                            attention_->last_rejection());
  }
#endif
  ++fallback_calls_;
  attention_bwd_fallback(dqkv.ptr, dout.ptr, qkv.ptr, out.ptr, lse.as<float>(), pos, B, T, Hq, Hkv, D, workspace(),
                         stream_);
}

// ---- loss ----

void CudaBackend::cross_entropy(Tensor losses, Tensor logits, Tensor targets, int vocab, Tensor dloss,
                                bool compute_grad) {
  const char* op = "cross_entropy";
  expect(op, "logits", logits, DType::bf16);
  expect(op, "losses", losses, DType::f32);
  expect(op, "targets", targets, DType::i32);
  const int64_t N = targets.numel(), Vp = logits.dim(-1);
  expect_numel(op, "logits", logits, N * Vp);
  expect_numel(op, "losses", losses, N);
  if (vocab <= 0 || vocab > Vp) bad_arg(op, "vocab=" + std::to_string(vocab) + " must be in 1.." + std::to_string(Vp));
  if (compute_grad) {
    expect(op, "dloss", dloss, DType::f32);
    expect_numel(op, "dloss", dloss, N);
  }
  cuda::cross_entropy(losses.as<float>(), logits.ptr, targets.as<int32_t>(), N, Vp, vocab,
                      compute_grad ? dloss.as<float>() : nullptr, compute_grad, stream_);
}

// ---- optimizer ----

void CudaBackend::adamw(Tensor master, Tensor grad, Tensor m, Tensor v, Tensor compute_copy, const AdamWArgs& a) {
  const char* op = "adamw";
  expect(op, "master", master, DType::f32);
  expect(op, "grad", grad, DType::f32);
  expect(op, "m", m, DType::f32);
  expect(op, "v", v, DType::f32);
  const int64_t n = master.numel();
  expect_numel(op, "grad", grad, n);
  expect_numel(op, "m", m, n);
  expect_numel(op, "v", v, n);
  if (a.step < 1) bad_arg(op, "step must be ≥ 1 (bias correction), got " + std::to_string(a.step));
  void* copy_bf16 = nullptr;
  if (compute_copy.defined()) {
    expect_numel(op, "compute_copy", compute_copy, n);
    if (compute_copy.dtype == DType::bf16)
      copy_bf16 = compute_copy.ptr;
    else if (compute_copy.dtype != DType::f32)
      bad_arg(op, "compute_copy must be bf16 or f32");
  }
  cuda::adamw(master.as<float>(), grad.as<float>(), m.as<float>(), v.as<float>(), copy_bf16, n, a.lr, a.beta1, a.beta2,
              a.eps, a.weight_decay, a.step, a.grad_scale, a.grad_scale_device, a.schedule_device, stream_);
  if (compute_copy.defined() && compute_copy.dtype == DType::f32) copy(compute_copy, master);
}

double CudaBackend::sum_squares(Tensor x) {
  expect("sum_squares", "x", x, DType::f32);
  refuse_while_recording("sum_squares");
  return cuda::sum_squares(x.as<float>(), x.numel(), workspace(), stream_);
}

void CudaBackend::grad_norm_clip(Tensor out, Tensor grads, float clip, Tensor losses, double loss_sum_limit) {
  const char* op = "grad_norm_clip";
  expect(op, "out", out, DType::f32);
  expect_numel(op, "out", out, 2);
  expect(op, "grads", grads, DType::f32);
  if (losses.defined()) expect(op, "losses", losses, DType::f32);
  cuda::grad_norm_clip(out.as<float>(), grads.as<float>(), grads.numel(),
                       losses.defined() ? losses.as<float>() : nullptr, losses.defined() ? losses.numel() : 0, clip,
                       loss_sum_limit, workspace(), stream_);
}

void CudaBackend::norm_loss_sums(Tensor sums, const std::vector<Tensor>& grads, Tensor losses) {
  const char* op = "norm_loss_sums";
  expect(op, "sums", sums, DType::f64);
  expect_numel(op, "sums", sums, 2);
  std::vector<const float*> xs;
  std::vector<int64_t> ns;
  for (const Tensor& g : grads) {
    expect(op, "grads", g, DType::f32);
    xs.push_back(g.as<float>());
    ns.push_back(g.numel());
  }
  if (losses.defined()) expect(op, "losses", losses, DType::f32);
  cuda::norm_loss_sums(sums.as<double>(), xs.data(), ns.data(), int(xs.size()),
                       losses.defined() ? losses.as<float>() : nullptr, losses.defined() ? losses.numel() : 0,
                       workspace(), stream_);
}

void CudaBackend::clip_from_sums(Tensor out, Tensor sums, float clip, double loss_sum_limit) {
  const char* op = "clip_from_sums";
  expect(op, "out", out, DType::f32);
  expect_numel(op, "out", out, 2);
  expect(op, "sums", sums, DType::f64);
  expect_numel(op, "sums", sums, 2);
  cuda::clip_from_sums(out.as<float>(), sums.as<double>(), clip, loss_sum_limit, stream_);
}

void CudaBackend::scale(Tensor x, float s) {
  if (x.dtype == DType::f32) return scale_f32(x.as<float>(), s, x.numel(), stream_);
  if (x.dtype == DType::bf16) return scale_bf16(x.ptr, s, x.numel(), stream_);
  bad_arg("scale", "x " + x.shape_str() + " must be f32 or bf16");
}

}  // namespace cuda

// ---- factory and device query (the CPU-only build defines these in backend.cpp) ----

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& opts) {
  return std::make_unique<cuda::CudaBackend>(opts);
}

GpuInfo query_gpus() {
  GpuInfo info;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver / no device: not an error for the caller
    return info;
  }
  info.count = count;
  int rt = 0, drv = 0;
  if (cudaRuntimeGetVersion(&rt) == cudaSuccess) info.runtime_version = cuda::version_string(rt);
  if (cudaDriverGetVersion(&drv) == cudaSuccess) info.driver_version = cuda::version_string(drv);
  if (count > 0) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
      info.name = prop.name;
      info.memory_bytes = prop.totalGlobalMem;
      info.sm_major = prop.major;
      info.sm_minor = prop.minor;
    }
  }
  return info;
}

}  // namespace recipe::kernels
