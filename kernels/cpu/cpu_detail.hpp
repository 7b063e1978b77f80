// Helpers shared by the CPU op files: argument checks that name the op and the offending tensor,
// the scalar activation math (used by both the GELU op and the fused linear epilogues), and a
// static-partition parallel loop whose results do not depend on the thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kernels/tensor.hpp"

namespace recipe::kernels::cpu {

[[noreturn]] inline void fail(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string("cpu backend: ") + op + ": " + what);
}

inline void require(bool ok, const char* op, const std::string& what) {
  if (!ok) fail(op, what);
}

// A defined host tensor of the given dtype.
inline void require_tensor(const Tensor& t, const char* op, const char* arg, DType dtype) {
  if (!t.defined()) fail(op, std::string(arg) + " is undefined");
  if (t.device != Device::cpu) fail(op, std::string(arg) + " is a CUDA tensor; the CPU backend needs host tensors");
  if (t.dtype != dtype)
    fail(op, std::string(arg) + " is " + t.shape_str() + " but must be " + dtype_name(dtype) +
                 (dtype == DType::f32 ? " (the CPU backend computes in f32; cast bf16 tensors first)" : ""));
}

inline void require_numel(const Tensor& t, int64_t n, const char* op, const char* arg) {
  if (t.numel() != n)
    fail(op, std::string(arg) + " is " + t.shape_str() + " (" + std::to_string(t.numel()) +
                 " elements) but must hold " + std::to_string(n));
}

// GELU, tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
constexpr float kGeluScale = 0.7978845608028654f;  // √(2/π)
constexpr float kGeluCubic = 0.044715f;

inline float gelu(float x) {
  float u = kGeluScale * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(u));
}

inline float gelu_grad(float x) {
  float u = kGeluScale * (x + kGeluCubic * x * x * x);
  float t = std::tanh(u);
  float du = kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// dst[c] += Σ_n src[n·C + c], rows in order into a double per column: every bias gradient of the
// CPU backend (linear dbias, norm and linear dinp_sum) sums this way, so a model may take a bias
// gradient from either op and get the same bits.
inline void add_column_sums(float* dst, const float* src, int64_t N, int64_t C) {
  std::vector<double> acc(size_t(C), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) acc[size_t(c)] += src[n * C + c];
  for (int64_t c = 0; c < C; ++c) dst[c] += float(acc[size_t(c)]);
}

// Dot product with eight independent partial sums (vectorizable, and a fixed summation order).
// The attention ops (attention.cpp, kv_cache.cpp) score with it, so a query scores the same keys
// to the same bits whichever op computes it.
inline float dot(const float* a, const float* b, int n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lane[l] += a[i + l] * b[i + l];
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7])) + tail;
}

// y += a·x, in blocks of eight so that -O2 vectorizes it (no reduction: order does not matter;
// y never overlaps x: outputs and gradients are separate buffers from qkv).
inline void axpy(float* __restrict y, float a, const float* __restrict x, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) y[i + l] += a * x[i + l];
  for (; i < n; ++i) y[i] += a * x[i];
}

// RoPE of one token (rope.cpp, kv_cache.cpp): the angles of position p, p·inv_freq[i] for
// i < D/2 (the run's table, f64 [D/2], ops.hpp RopeArgs; read, never computed here), as cos and
// sign·sin in double; then `heads` contiguous heads of D values rotated ("rotate_half": element i
// pairs with i + D/2).
struct RopeAngles {
  const double* inv_freq;  // [D/2], the caller's table
  std::vector<double> cos, sin;
  RopeAngles(const double* table, int D) : inv_freq(table), cos(size_t(D / 2)), sin(size_t(D / 2)) {}
  void at(int p, float sign) {
    for (size_t i = 0; i < cos.size(); ++i) {
      const double angle = double(p) * inv_freq[i];
      cos[i] = std::cos(angle);
      sin[i] = sign * std::sin(angle);
    }
  }
  void rotate(float* tok, int heads, int D) const {
    const int half = D / 2;
    for (int h = 0; h < heads; ++h) {
      float* x = tok + int64_t(h) * D;
      for (int i = 0; i < half; ++i) {
        const double x1 = x[i], x2 = x[i + half];
        x[i] = float(x1 * cos[size_t(i)] - x2 * sin[size_t(i)]);
        x[i + half] = float(x2 * cos[size_t(i)] + x1 * sin[size_t(i)]);
      }
    }
  }
};

// Runs body(begin, end) over [0, n) split into contiguous chunks, one per thread, chunk 0 on the
// calling thread. Bodies must write disjoint outputs; then the result is the same for any thread
// count. Small loops (work below min_work) stay on the calling thread.
template <class Body>
void parallel_for(int64_t n, int threads, double work, Body body, double min_work = 1 << 18) {
  int nt = int(std::min<int64_t>(threads, n));
  if (nt <= 1 || work < min_work) {
    if (n > 0) body(int64_t(0), n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(nt - 1);
  auto chunk = [&](int i) { return n * i / nt; };
  std::vector<std::exception_ptr> errors(nt);
  for (int i = 1; i < nt; ++i)
    pool.emplace_back([&, i] {
      try {
        body(chunk(i), chunk(i + 1));
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  try {
    body(chunk(0), chunk(1));
  } catch (...) {
    errors[0] = std::current_exception();
  }
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace recipe::kernels::cpu
