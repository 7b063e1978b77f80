// Host memory of the CPU backend: 64-byte aligned, zero-filled allocations with a high-water mark,
// raw copies, and f32 <-> bf16 casts (round to nearest even, via tensor.hpp).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/cpu_detail.hpp"

namespace recipe::kernels {

namespace {
constexpr size_t kAlignment = 64;  // a cache line, and enough for any SIMD load

// A host allocation that failed, with its size and what this backend already holds, so a CPU run
// that outgrows the host says what it tried (the worker prefixes its rank). Still a std::bad_alloc.
class HostAllocFailed : public std::bad_alloc {
 public:
  HostAllocFailed(size_t bytes, size_t live)
      : message_("out of host memory: allocating " + gib_text(bytes) + " with " + gib_text(live) +
                 " already allocated by this process's CPU backend") {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  static std::string gib_text(size_t bytes) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%zu bytes (%.2f GiB)", bytes, static_cast<double>(bytes) / (1ull << 30));
    return buf;
  }
  std::string message_;
};

void require_host(const Tensor& t, const char* op, const char* arg) {
  if (!t.defined() && t.numel() > 0) cpu::fail(op, std::string(arg) + " is undefined");
  if (t.device != Device::cpu)
    cpu::fail(op, std::string(arg) + " is a CUDA tensor; the CPU backend needs host tensors");
}
}  // namespace

void* CpuBackend::alloc(size_t bytes) {
  // aligned_alloc needs a size that is a multiple of the alignment; 0 bytes still gets a unique
  // pointer so that free() stays symmetric.
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  void* p = rounded < bytes ? nullptr : std::aligned_alloc(kAlignment, rounded);  // rounded < bytes: overflow
  if (!p) {
    std::lock_guard lock(mem_mutex_);
    throw HostAllocFailed(bytes, live_bytes_);
  }
  std::memset(p, 0, rounded);
  std::lock_guard lock(mem_mutex_);
  live_[p] = bytes;
  live_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  return p;
}

void CpuBackend::free(void* p) {
  if (!p) return;
  {
    std::lock_guard lock(mem_mutex_);
    auto it = live_.find(p);
    if (it == live_.end()) cpu::fail("free", "pointer was not allocated by this backend (or was already freed)");
    live_bytes_ -= it->second;
    live_.erase(it);
  }
  std::free(p);
}

size_t CpuBackend::peak_memory_bytes() const {
  std::lock_guard lock(mem_mutex_);
  return peak_bytes_;
}

void CpuBackend::copy(Tensor dst, Tensor src) {
  require_host(dst, "copy", "dst");
  require_host(src, "copy", "src");
  cpu::require(dst.dtype == src.dtype, "copy",
               "dtypes differ (dst " + dst.shape_str() + ", src " + src.shape_str() + "); use cast");
  cpu::require_numel(dst, src.numel(), "copy", "dst");
  if (dst.bytes()) std::memmove(dst.ptr, src.ptr, dst.bytes());
}

void CpuBackend::to_host(void* dst, Tensor src) {
  require_host(src, "to_host", "src");
  if (src.bytes()) std::memcpy(dst, src.ptr, src.bytes());
}

void CpuBackend::from_host(Tensor dst, const void* src) {
  require_host(dst, "from_host", "dst");
  if (dst.bytes()) std::memcpy(dst.ptr, src, dst.bytes());
}

void CpuBackend::zero(Tensor t) {
  require_host(t, "zero", "t");
  if (t.bytes()) std::memset(t.ptr, 0, t.bytes());
}

void CpuBackend::cast(Tensor dst, Tensor src) {
  require_host(dst, "cast", "dst");
  require_host(src, "cast", "src");
  cpu::require_numel(dst, src.numel(), "cast", "dst");
  const int64_t n = src.numel();
  if (dst.dtype == src.dtype) {
    if (dst.bytes()) std::memmove(dst.ptr, src.ptr, dst.bytes());
  } else if (dst.dtype == DType::bf16 && src.dtype == DType::f32) {
    const float* s = src.as<float>();
    bf16_t* d = dst.as<bf16_t>();
    for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(s[i]);
  } else if (dst.dtype == DType::f32 && src.dtype == DType::bf16) {
    const bf16_t* s = src.as<bf16_t>();
    float* d = dst.as<float>();
    for (int64_t i = 0; i < n; ++i) d[i] = bf16_to_f32(s[i]);
  } else {
    cpu::fail("cast", std::string("unsupported conversion ") + dtype_name(src.dtype) + " -> " + dtype_name(dst.dtype) +
                          " (only f32 <-> bf16 and same-dtype copies)");
  }
}

}  // namespace recipe::kernels
