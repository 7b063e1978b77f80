// CPU memory ops: aligned zero-filled allocation with a peak high-water mark, copies, host
// transfers, and f32 <-> bf16 casts (round to nearest even, NaN/inf, exact round trips).
#include <doctest/doctest.h>

#include <cstring>

#include "kernels/cpu/cpu_backend.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cpu");

using namespace recipe::kernels;
using namespace recipe::kernels::test;

namespace {
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

TEST_CASE("cpu backend identity") {
  auto be = make_cpu_backend();
  CHECK(be->device() == Device::cpu);
  CHECK(be->act_dtype() == DType::f32);
  CHECK(be->name() == "cpu");
  CHECK(make_backend(Device::cpu)->name() == "cpu");
  CHECK_THROWS_AS(make_cpu_backend(BackendOptions{.cpu_threads = -1}), std::invalid_argument);
}

TEST_CASE("cpu alloc that the host cannot satisfy says how much it tried, as a std::bad_alloc") {
  auto be = make_cpu_backend();
  void* held = be->alloc(1 << 20);
  std::string what;
  try {
    be->alloc(size_t{1} << 62);  // 4 EiB: no host has it
  } catch (const std::bad_alloc& e) {
    what = e.what();
  }
  CHECK(what.find("out of host memory: allocating 4611686018427387904 bytes") != std::string::npos);
  CHECK(what.find("with 1048576 bytes (0.00 GiB) already allocated") != std::string::npos);
  be->free(held);
}

TEST_CASE("cpu alloc is zero-filled, 64-byte aligned, and tracks the peak of live bytes") {
  auto be = make_cpu_backend();
  CHECK(be->peak_memory_bytes() == 0);
  void* a = be->alloc(1000);
  void* b = be->alloc(3000);
  CHECK(reinterpret_cast<uintptr_t>(a) % 64 == 0);
  CHECK(reinterpret_cast<uintptr_t>(b) % 64 == 0);
  const auto* bytes = static_cast<const unsigned char*>(b);
  bool all_zero = true;
  for (int i = 0; i < 3000; ++i) all_zero = all_zero && bytes[i] == 0;
  CHECK(all_zero);
  CHECK(be->peak_memory_bytes() == 4000);
  be->free(a);
  void* c = be->alloc(500);
  CHECK(be->peak_memory_bytes() == 4000);  // 3500 live now, the peak stays
  void* d = be->alloc(1000);
  CHECK(be->peak_memory_bytes() == 4500);
  be->free(b);
  be->free(c);
  be->free(d);
  be->free(nullptr);
  CHECK_THROWS_AS(be->free(d), std::invalid_argument);  // double free is refused, not a crash
}

TEST_CASE("cpu copy, zero, to_host and from_host move raw bytes") {
  auto be = make_cpu_backend();
  auto src = randn(12, 1);
  std::vector<float> dst(12), host(12);
  be->copy(view(dst, {3, 4}), view(src, {12}));
  CHECK(dst == src);
  be->to_host(host.data(), view(dst, {12}));
  CHECK(host == src);
  std::vector<float> back(12);
  be->from_host(view(back, {12}), src.data());
  CHECK(back == src);
  be->zero(view(back, {12}));
  CHECK(back == std::vector<float>(12, 0.0f));
  std::vector<float> small(11);
  CHECK_THROWS_AS(be->copy(view(small, {11}), view(src, {12})), std::invalid_argument);
  std::vector<bf16_t> h(12);
  CHECK_THROWS_AS(be->copy(Tensor(h.data(), DType::bf16, Device::cpu, {12}), view(src, {12})), std::invalid_argument);
}

TEST_CASE("cpu cast f32 -> bf16 rounds to nearest even on chosen bit patterns") {
  auto be = make_cpu_backend();
  struct Case {
    uint32_t f32;
    uint16_t bf16;
  };
  const Case cases[] = {
      {0x3F800000u, 0x3F80},  // 1.0 exact
      {0x3F808000u, 0x3F80},  // halfway, lower is even → down
      {0x3F818000u, 0x3F82},  // halfway, lower is odd → up
      {0x3F808001u, 0x3F81},  // just above halfway → up
      {0x3F807FFFu, 0x3F80},  // just below halfway → down
      {0xBF818000u, 0xBF82},  // negative halfway, odd → away from zero
      {0x7F7FFFFFu, 0x7F80},  // max float rounds to +inf
      {0x7F800000u, 0x7F80},  // +inf stays
      {0xFF800000u, 0xFF80},  // -inf stays
      {0x00000000u, 0x0000},  // +0
      {0x80000000u, 0x8000},  // -0
  };
  std::vector<float> src;
  for (auto c : cases) src.push_back(from_bits(c.f32));
  src.push_back(from_bits(0x7FC00001u));  // NaN with a payload only in the low bits
  const int64_t n = int64_t(src.size());
  std::vector<bf16_t> dst(n);
  be->cast(Tensor(dst.data(), DType::bf16, Device::cpu, {n}), view(src, {n}));
  for (size_t i = 0; i < std::size(cases); ++i) {
    CAPTURE(i);
    CHECK(dst[i] == cases[i].bf16);
  }
  CHECK(std::isnan(bf16_to_f32(dst.back())));
}

TEST_CASE("cpu cast bf16 -> f32 -> bf16 round-trips every non-NaN pattern exactly") {
  auto be = make_cpu_backend();
  std::vector<bf16_t> all(65536), back(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = bf16_t(i);
  std::vector<float> wide(65536);
  Tensor all_t(all.data(), DType::bf16, Device::cpu, {65536});
  be->cast(view(wide, {65536}), all_t);
  be->cast(Tensor(back.data(), DType::bf16, Device::cpu, {65536}), view(wide, {65536}));
  int mismatches = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    if (std::isnan(wide[i])) {
      mismatches += !std::isnan(bf16_to_f32(back[i]));
      continue;
    }
    uint32_t bits;
    std::memcpy(&bits, &wide[i], 4);
    mismatches += (bits != (i << 16)) + (back[i] != all[i]);
  }
  CHECK(mismatches == 0);
  // Same-dtype cast is a copy; i32 ↔ f32 is not a supported conversion.
  std::vector<float> f(3, 1.5f), f2(3);
  be->cast(view(f2, {3}), view(f, {3}));
  CHECK(f2 == f);
  std::vector<int32_t> ints(3);
  CHECK_THROWS_AS(be->cast(view(ints, {3}), view(f, {3})), std::invalid_argument);
}

TEST_SUITE_END();
