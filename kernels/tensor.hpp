// A non-owning view of device or host memory: pointer, dtype, device and a row-major shape.
// Ownership lives in core/ (buffers planned from the Plan and allocated once); kernels only see views.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace recipe::kernels {

// e4m3 / e5m2: one byte per element, OCP FP8 (kernels/cpu/fp8_format.hpp has the encodings); the
// FP8 ops (ops.hpp) pair such a tensor with an f32 inverse scale. f64: a few scalars (the world
// sums of the gradient norm and the loss).
enum class DType : uint8_t { f32, bf16, i32, e4m3, e5m2, f64 };
enum class Device : uint8_t { cpu, cuda };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::bf16:
      return 2;
    case DType::e4m3:
    case DType::e5m2:
      return 1;
    case DType::f64:
      return 8;
    default:
      return 4;
  }
}
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::bf16:
      return "bf16";
    case DType::i32:
      return "i32";
    case DType::e4m3:
      return "e4m3";
    case DType::e5m2:
      return "e5m2";
    case DType::f64:
      return "f64";
  }
  return "?";
}
inline bool is_fp8(DType t) { return t == DType::e4m3 || t == DType::e5m2; }

// bf16 storage: the upper 16 bits of an IEEE fp32, rounded to nearest even.
using bf16_t = uint16_t;
inline float bf16_to_f32(bf16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline bf16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16_t(u >> 16);
}

struct Tensor {
  void* ptr = nullptr;
  DType dtype = DType::f32;
  Device device = Device::cpu;
  std::array<int64_t, 4> dims{0, 0, 0, 0};
  int ndim = 0;

  Tensor() = default;
  Tensor(void* p, DType t, Device d, std::initializer_list<int64_t> shape) : ptr(p), dtype(t), device(d) {
    if (shape.size() > 4) throw std::invalid_argument("Tensor: at most 4 dims");
    for (int64_t s : shape) dims[ndim++] = s;
  }
  int64_t numel() const {
    int64_t n = ndim ? 1 : 0;
    for (int i = 0; i < ndim; ++i) n *= dims[i];
    return n;
  }
  size_t bytes() const { return size_t(numel()) * dtype_size(dtype); }
  int64_t dim(int i) const { return dims[i < 0 ? ndim + i : i]; }
  bool defined() const { return ptr != nullptr; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
  // Same memory, another shape with the same element count.
  Tensor view(std::initializer_list<int64_t> shape) const {
    Tensor t(ptr, dtype, device, shape);
    if (t.numel() != numel()) throw std::invalid_argument("Tensor::view: element count differs");
    return t;
  }
  // Rows [begin, begin+count) of the leading dimension.
  Tensor rows(int64_t begin, int64_t count) const {
    Tensor t = *this;
    int64_t row = numel() / dims[0];
    t.ptr = static_cast<char*>(ptr) + size_t(begin * row) * dtype_size(dtype);
    t.dims[0] = count;
    return t;
  }
  std::string shape_str() const;
};

inline std::string Tensor::shape_str() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]:" + dtype_name(dtype);
}

}  // namespace recipe::kernels
