// Helpers for the CUDA-vs-CPU op tests: one CPU and one CUDA backend per process, tensors holding
// the same values on both (bf16-rounded for activations, so both backends see identical inputs),
// read-back to f32 and the relative error ‖a−b‖/‖b‖. Every test is skipped where no GPU is
// visible (CI), through doctest::skip(!has_gpu()).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "family/rope.hpp"
#include "kernels/ops.hpp"

namespace recipe::kernels::testing {

inline bool has_gpu() {
  static const bool gpu = built_with_cuda() && query_gpus().count > 0;
  return gpu;
}

// RECIPE_TEST_PORTABLE_KERNELS=1 (the ctest `kernels/cuda/portable` sets it) runs every CUDA backend
// of these tests with BackendOptions::portable_kernels: the whole suite then proves the kernels a
// non-Hopper GPU runs, on an H100. Only the tests read it; the product takes kernels.portable from
// the recipe.
inline bool portable_test_mode() {
  static const bool on = [] {
    const char* v = std::getenv("RECIPE_TEST_PORTABLE_KERNELS");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}
// The options every CUDA backend of the tests starts from.
inline BackendOptions cuda_options() {
  BackendOptions o;
  o.portable_kernels = portable_test_mode();
  return o;
}

inline Backend& cpu_backend() {
  static std::unique_ptr<Backend> b = make_cpu_backend();
  return *b;
}
inline Backend& gpu_backend() {
  static std::unique_ptr<Backend> b = make_cuda_backend(cuda_options());
  return *b;
}

enum class Kind { act, f32, i32 };

// A tensor with the same contents on the CPU (c) and on the GPU (g); freed with the scope.
struct Dual {
  Tensor c, g;
  Backend* cb = nullptr;
  Backend* gb = nullptr;
  Dual() = default;
  Dual(const Dual&) = delete;
  Dual& operator=(const Dual&) = delete;
  Dual(Dual&& o) noexcept { *this = std::move(o); }
  Dual& operator=(Dual&& o) noexcept {
    std::swap(c, o.c), std::swap(g, o.g), std::swap(cb, o.cb), std::swap(gb, o.gb);
    return *this;
  }
  ~Dual() {
    if (cb && c.defined()) cb->free(c.ptr);
    if (gb && g.defined()) gb->free(g.ptr);
  }
};

inline float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

inline Tensor alloc_on(Backend& b, DType t, std::initializer_list<int64_t> shape) {
  Tensor x(nullptr, t, b.device(), shape);
  x.ptr = b.alloc(x.bytes());
  return x;
}

// `values` (as floats; token ids for i32) land on both backends. act tensors are bf16 on the GPU
// and f32 on the CPU, with the values rounded to bf16 for both.
inline Dual make_dual(Kind kind, std::initializer_list<int64_t> shape, const std::vector<float>& values,
                      Backend& cpu = cpu_backend(), Backend& gpu = gpu_backend()) {
  Dual d;
  d.cb = &cpu;
  d.gb = &gpu;
  DType ct = kind == Kind::i32 ? DType::i32 : DType::f32;
  DType gt = kind == Kind::i32 ? DType::i32 : kind == Kind::act ? gpu.act_dtype() : DType::f32;
  d.c = alloc_on(cpu, ct, shape);
  d.g = alloc_on(gpu, gt, shape);
  REQUIRE(size_t(d.c.numel()) == values.size());
  if (kind == Kind::i32) {
    std::vector<int32_t> v(values.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t(values[i]);
    cpu.from_host(d.c, v.data());
    gpu.from_host(d.g, v.data());
  } else if (kind == Kind::act && gt == DType::bf16) {
    std::vector<float> r(values.size());
    std::vector<bf16_t> h(values.size());
    for (size_t i = 0; i < r.size(); ++i) {
      h[i] = f32_to_bf16(values[i]);
      r[i] = bf16_to_f32(h[i]);
    }
    cpu.from_host(d.c, r.data());
    gpu.from_host(d.g, h.data());
  } else {
    cpu.from_host(d.c, values.data());
    gpu.from_host(d.g, values.data());
  }
  return d;
}

// RopeArgs::inv_freq on both backends, f64 [D/2]: `values` as given (a test's own table), or the
// table a run makes for base θ and head dim D (family/rope.hpp).
inline Dual rope_freqs(const std::vector<double>& values, Backend& cpu = cpu_backend(), Backend& gpu = gpu_backend()) {
  Dual d;
  d.cb = &cpu;
  d.gb = &gpu;
  d.c = alloc_on(cpu, DType::f64, {int64_t(values.size())});
  d.g = alloc_on(gpu, DType::f64, {int64_t(values.size())});
  cpu.from_host(d.c, values.data());
  gpu.from_host(d.g, values.data());
  return d;
}
inline Dual rope_freqs(float theta, int D, Backend& cpu = cpu_backend(), Backend& gpu = gpu_backend()) {
  return rope_freqs(recipe::core::rope_inv_freq({.theta = theta}, D), cpu, gpu);
}

inline std::vector<float> read(Backend& b, const Tensor& t) {
  std::vector<float> out(size_t(t.numel()));
  if (t.dtype == DType::f32) {
    b.to_host(out.data(), t);
  } else if (t.dtype == DType::bf16) {
    std::vector<bf16_t> h(out.size());
    b.to_host(h.data(), t);
    for (size_t i = 0; i < h.size(); ++i) out[i] = bf16_to_f32(h[i]);
  } else {
    std::vector<int32_t> h(out.size());
    b.to_host(h.data(), t);
    for (size_t i = 0; i < h.size(); ++i) out[i] = float(h[i]);
  }
  return out;
}
inline std::vector<uint8_t> read_bytes(Backend& b, const Tensor& t) {
  std::vector<uint8_t> out(t.bytes());
  b.to_host(out.data(), t);
  return out;
}

// ‖gpu − cpu‖ / ‖cpu‖ over the two copies of a Dual (NaN anywhere gives +inf).
inline double rel_err(const Dual& d) {
  std::vector<float> a = read(*d.gb, d.g), b = read(*d.cb, d.c);
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

struct Rng {
  std::mt19937 gen;
  explicit Rng(uint32_t seed) : gen(seed) {}
  std::vector<float> normal(size_t n, float stddev = 1.f, float mean = 0.f) {
    std::normal_distribution<float> d(mean, stddev);
    std::vector<float> v(n);
    for (auto& x : v) x = d(gen);
    return v;
  }
  std::vector<float> uniform_int(size_t n, int lo, int hi) {  // [lo, hi]
    std::uniform_int_distribution<int> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = float(d(gen));
    return v;
  }
};

// bf16 results: rounding alone gives ~2-4e-3; 1e-2 leaves room for accumulation-order differences.
constexpr double kBf16Tol = 1e-2;

#define CHECK_CLOSE(dual, tol)                             \
  do {                                                     \
    double e_ = ::recipe::kernels::testing::rel_err(dual); \
    INFO(#dual << " relative error " << e_);               \
    CHECK(e_ < (tol));                                     \
  } while (0)

}  // namespace recipe::kernels::testing
