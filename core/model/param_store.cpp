#include "core/model/param_store.hpp"

#include <algorithm>
#include <stdexcept>

namespace recipe::core {

using kernels::DType;
using kernels::Tensor;

ParamStore::ParamStore(kernels::Backend& backend, ParamLayout layout)
    : backend_(backend), layout_(std::move(layout)), compute_dtype_(backend.act_dtype()) {
  const size_t n = size_t(layout_.compute_numel()), trained = size_t(layout_.trainable_numel);
  if (n == 0) throw std::invalid_argument("ParamStore: the model has no parameters");
  auto get = [&](DType t, size_t count) {
    void* p = backend_.alloc(std::max<size_t>(count, 1) * kernels::dtype_size(t));
    bytes_ += count * kernels::dtype_size(t);
    return p;
  };
  try {
    // An f32 compute copy is the master buffer, frozen base included; otherwise the master holds
    // only the trainable prefix and the frozen base lives in the compute copy alone.
    master_ = get(DType::f32, compute_dtype_ == DType::f32 ? n : trained);
    compute_ = compute_dtype_ == DType::f32 ? master_ : get(compute_dtype_, n);
    grads_ = get(DType::f32, trained);
    if (layout_.fp8_numel > 0) fp8_ = get(DType::e4m3, size_t(layout_.fp8_numel));
  } catch (...) {  // out of device memory part-way: give back what was taken
    for (void* p : {master_, grads_, fp8_})
      if (p) backend_.free(p);
    if (compute_ && compute_ != master_) backend_.free(compute_);
    throw;
  }
}

ParamStore::~ParamStore() {
  for (void* p : {master_, grads_}) backend_.free(p);
  if (fp8_) backend_.free(fp8_);
  if (compute_ != master_) backend_.free(compute_);
}

Tensor ParamStore::weight(const ParamSpec& p) const {
  if (!p.fp8) return shaped(compute_, compute_dtype_, p);
  Tensor x = fp8_span(p.offset, p.numel);
  x.ndim = int(p.local_shape.size());
  for (int i = 0; i < x.ndim; ++i) x.dims[i] = p.local_shape[i];
  return x;
}

Tensor ParamStore::fp8_span(int64_t offset, int64_t n) const {
  const int64_t begin = layout_.fp8_begin;
  if (offset < begin || n < 0 || offset + n > layout_.total_numel || !fp8_)
    throw std::out_of_range("ParamStore: span outside the FP8 region");
  return Tensor(static_cast<char*>(fp8_) + size_t(offset - begin), DType::e4m3, backend_.device(), {n});
}

std::vector<float> ParamStore::fp8_values(const ParamSpec& p) const {
  if (!p.fp8) throw std::logic_error("ParamStore: " + p.name + " is not held in FP8");
  if (!fp8_source_)
    throw std::logic_error("ParamStore: " + p.name + " is held in FP8 but nothing initialized or loaded it");
  std::vector<float> v(size_t(p.numel));
  fp8_source_(p, v.data());
  if (compute_dtype_ != DType::f32)  // as compute_from_host would have stored them
    for (float& x : v) x = kernels::bf16_to_f32(kernels::f32_to_bf16(x));
  return v;
}

std::vector<float> ParamStore::frozen_to_host() const {
  const int64_t begin = layout_.frozen_begin;
  std::vector<float> out = compute_to_host(begin, layout_.compute_numel() - begin);
  out.resize(size_t(layout_.total_numel - begin), 0.f);
  for (const ParamSpec& p : layout_.params)
    if (p.fp8) {
      const std::vector<float> v = fp8_values(p);
      std::copy(v.begin(), v.end(), out.begin() + (p.offset - begin));
    }
  return out;
}

Tensor ParamStore::master(const ParamSpec& p) const {
  if (p.fp8) throw std::logic_error("ParamStore: " + p.name + " is held only in FP8 and has no f32 master");
  if (!p.trainable && !compute_is_master())
    throw std::logic_error("ParamStore: " + p.name + " is frozen and has no f32 master (read weight() instead)");
  return shaped(master_, DType::f32, p);
}

Tensor ParamStore::span(void* base, DType t, int64_t offset, int64_t n, int64_t limit) const {
  if (offset < 0 || n < 0 || offset + n > limit) throw std::out_of_range("ParamStore: span outside the flat buffer");
  return Tensor(static_cast<char*>(base) + size_t(offset) * kernels::dtype_size(t), t, backend_.device(), {n});
}

Tensor ParamStore::shaped(void* base, DType t, const ParamSpec& p) const {
  Tensor x = span(base, t, p.offset, p.numel, base == compute_ ? layout_.compute_numel() : layout_.trainable_numel);
  x.ndim = int(p.local_shape.size());
  for (int i = 0; i < x.ndim; ++i) x.dims[i] = p.local_shape[i];
  return x;
}

void ParamStore::zero_grads() { backend_.zero(grads()); }

void ParamStore::begin_grad_writes() {
  std::vector<kernels::Tensor> g;
  g.reserve(layout_.params.size());
  for (const ParamSpec& p : layout_.params)
    if (p.trainable) g.push_back(grad_span(p.offset, p.numel));
  backend_.begin_grad_writes(g);
}

void ParamStore::end_grad_writes() { backend_.end_grad_writes(); }

void ParamStore::sync_compute() {
  if (!compute_is_master() && layout_.trainable_numel > 0)
    backend_.cast(compute_span(0, layout_.trainable_numel), master());
}

void ParamStore::compute_from_host(int64_t offset, int64_t n, const float* host) {
  const Tensor dst = compute_span(offset, n);
  if (compute_dtype_ == DType::f32) return backend_.from_host(dst, host);
  std::vector<kernels::bf16_t> half(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) half[size_t(i)] = kernels::f32_to_bf16(host[i]);
  backend_.from_host(dst, half.data());
}

std::vector<float> ParamStore::compute_to_host(int64_t offset, int64_t n) const {
  std::vector<float> out(static_cast<size_t>(n));
  const Tensor src = compute_span(offset, n);
  if (n == 0) return out;
  if (compute_dtype_ == DType::f32) {
    backend_.to_host(out.data(), src);
    return out;
  }
  std::vector<kernels::bf16_t> half(static_cast<size_t>(n));
  backend_.to_host(half.data(), src);
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = kernels::bf16_to_f32(half[size_t(i)]);
  return out;
}

}  // namespace recipe::core
