// CPU causal attention on packed qkv: forward (out and lse) against an explicit T×T softmax in
// double, gradients by central differences for MHA and GQA (Hkv = Hq/2 and 1, T not a power of
// two), and bitwise determinism (repeat calls and different thread counts). With per-sample
// positions (packed samples): the same explicit softmax restricted to each sample, each sample
// bitwise equal to the sample run alone, and finite-difference gradients.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_backend.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cpu");

using namespace recipe::kernels;
using namespace recipe::kernels::test;

namespace {
struct Shape {
  int B, T, Hq, Hkv, D;
  int64_t row() const { return int64_t(Hq + 2 * Hkv) * D; }
  int64_t qkv_numel() const { return int64_t(B) * T * row(); }
  int64_t out_numel() const { return int64_t(B) * T * Hq * D; }
  int64_t lse_numel() const { return int64_t(B) * Hq * T; }
};

// Explicit softmax(QKᵀ/√D + causal mask)·V in double. With positions (per-sample, [B·T]) the mask
// also hides every key of another sample: key j is visible to query i iff i and j lie in the same
// run of positions 0, 1, 2, ... (found by walking back from i to its position 0).
void reference(const Shape& s, const std::vector<float>& qkv, std::vector<double>& out, std::vector<double>& lse,
               const std::vector<int32_t>* positions = nullptr) {
  out.assign(s.out_numel(), 0.0);
  lse.assign(s.lse_numel(), 0.0);
  const double scale = 1.0 / std::sqrt(double(s.D));
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.Hq; ++h) {
      int g = h / (s.Hq / s.Hkv);
      std::vector<double> scores(size_t(s.T) * s.T, -INFINITY);
      auto at = [&](int t, int64_t off) { return &qkv[(int64_t(b) * s.T + t) * s.row() + off]; };
      auto same_sample = [&](int i, int j) {
        if (!positions) return true;
        int start = i;
        while ((*positions)[size_t(b) * s.T + start] != 0) --start;
        return j >= start;
      };
      for (int i = 0; i < s.T; ++i)
        for (int j = 0; j <= i; ++j) {
          if (!same_sample(i, j)) continue;
          double d = 0;
          for (int k = 0; k < s.D; ++k) d += double(at(i, int64_t(h) * s.D)[k]) * at(j, int64_t(s.Hq + g) * s.D)[k];
          scores[i * s.T + j] = d * scale;
        }
      for (int i = 0; i < s.T; ++i) {
        double m = -INFINITY, z = 0;
        for (int j = 0; j < s.T; ++j) m = std::max(m, scores[i * s.T + j]);
        for (int j = 0; j < s.T; ++j) z += std::exp(scores[i * s.T + j] - m);
        lse[(int64_t(b) * s.Hq + h) * s.T + i] = m + std::log(z);
        for (int j = 0; j < s.T; ++j) {
          double p = std::exp(scores[i * s.T + j] - m) / z;
          for (int k = 0; k < s.D; ++k)
            out[(int64_t(b) * s.T + i) * s.Hq * s.D + h * s.D + k] += p * at(j, int64_t(s.Hq + s.Hkv + g) * s.D)[k];
        }
      }
    }
}

struct Run {
  std::vector<float> out, lse;
};

Tensor positions_view(std::vector<int32_t>* positions, const Shape& s) {
  return positions ? view(*positions, {s.B, s.T}) : Tensor();
}

Run forward(Backend& be, const Shape& s, std::vector<float>& qkv, std::vector<int32_t>* positions = nullptr) {
  Run r{std::vector<float>(s.out_numel()), std::vector<float>(s.lse_numel())};
  be.attention_fwd({.out = view(r.out, {s.B, s.T, s.Hq * s.D}),
                    .lse = view(r.lse, {s.B, s.Hq, s.T}),
                    .qkv = view(qkv, {s.B, s.T, s.row()}),
                    .positions = positions_view(positions, s),
                    .shape = {.B = s.B, .T = s.T, .Hq = s.Hq, .Hkv = s.Hkv, .D = s.D}});
  return r;
}

std::vector<float> backward(Backend& be, const Shape& s, std::vector<float>& qkv, Run& fwd, std::vector<float>& dout,
                            float fill = 0.0f, std::vector<int32_t>* positions = nullptr) {
  std::vector<float> dqkv(s.qkv_numel(), fill);
  be.attention_bwd({.dqkv = view(dqkv, {s.B, s.T, s.row()}),
                    .dout = view(dout, {s.B, s.T, s.Hq * s.D}),
                    .qkv = view(qkv, {s.B, s.T, s.row()}),
                    .out = view(fwd.out, {s.B, s.T, s.Hq * s.D}),
                    .lse = view(fwd.lse, {s.B, s.Hq, s.T}),
                    .positions = positions_view(positions, s),
                    .shape = {.B = s.B, .T = s.T, .Hq = s.Hq, .Hkv = s.Hkv, .D = s.D}});
  return dqkv;
}

// Per-sample positions of rows made of samples of the given lengths (then padding, position 0).
std::vector<int32_t> packed_positions(const std::vector<std::vector<int>>& rows, int T) {
  std::vector<int32_t> pos;
  for (const auto& lengths : rows) {
    int used = 0;
    for (int len : lengths)
      for (int t = 0; t < len; ++t, ++used) pos.push_back(t);
    for (; used < T; ++used) pos.push_back(0);
  }
  return pos;
}
}  // namespace

TEST_CASE("cpu attention_fwd matches an explicit causal softmax in double") {
  auto be = make_cpu_backend();
  for (Shape s : {Shape{2, 7, 4, 4, 12}, Shape{2, 7, 4, 2, 12}, Shape{1, 13, 4, 1, 8}, Shape{1, 5, 2, 2, 3}}) {
    CAPTURE(s.T);
    CAPTURE(s.Hkv);
    CAPTURE(s.D);
    auto qkv = randn(s.qkv_numel(), 100 + s.Hkv, 1.0f);
    auto r = forward(*be, s, qkv);
    std::vector<double> out, lse;
    reference(s, qkv, out, lse);
    double worst_out = 0, worst_lse = 0;
    for (size_t i = 0; i < out.size(); ++i) worst_out = std::max(worst_out, std::fabs(r.out[i] - out[i]));
    for (size_t i = 0; i < lse.size(); ++i) worst_lse = std::max(worst_lse, std::fabs(r.lse[i] - lse[i]));
    CHECK(worst_out < 2e-6);
    CHECK(worst_lse < 2e-6);
  }
}

TEST_CASE("cpu attention_bwd gradients match finite differences (MHA, GQA, MQA)") {
  auto be = make_cpu_backend();
  for (Shape s : {Shape{2, 7, 4, 4, 6}, Shape{2, 7, 4, 2, 12}, Shape{2, 7, 4, 1, 6}}) {
    CAPTURE(s.Hkv);
    CAPTURE(s.D);
    auto qkv = randn(s.qkv_numel(), 200 + s.Hkv, 0.8f), r = randn(s.out_numel(), 300 + s.Hkv);
    auto fwd = forward(*be, s, qkv);
    auto dqkv = backward(*be, s, qkv, fwd, r, 55.0f);  // 55s must be overwritten, not added to
    auto objective = [&] { return weighted_sum(forward(*be, s, qkv).out, r); };
    check_gradient("attention dqkv", qkv, dqkv, objective);
  }
}

TEST_CASE("cpu attention_bwd is bitwise deterministic across calls and thread counts") {
  // Big enough that the CPU backend splits the work over threads.
  Shape s{2, 64, 4, 2, 16};
  auto qkv = randn(s.qkv_numel(), 7, 0.8f), r = randn(s.out_numel(), 8);
  auto one = make_cpu_backend(BackendOptions{.cpu_threads = 1});
  auto three = make_cpu_backend(BackendOptions{.cpu_threads = 3});
  auto f1 = forward(*one, s, qkv), f3 = forward(*three, s, qkv);
  CHECK(std::memcmp(f1.out.data(), f3.out.data(), f1.out.size() * 4) == 0);
  CHECK(std::memcmp(f1.lse.data(), f3.lse.data(), f1.lse.size() * 4) == 0);
  auto d1 = backward(*one, s, qkv, f1, r);
  auto d1_again = backward(*one, s, qkv, f1, r);
  auto d3 = backward(*three, s, qkv, f3, r);
  CHECK(std::memcmp(d1.data(), d1_again.data(), d1.size() * 4) == 0);
  CHECK(std::memcmp(d1.data(), d3.data(), d1.size() * 4) == 0);
}

TEST_CASE("cpu attention with per-sample positions matches a softmax masked to each sample") {
  auto be = make_cpu_backend();
  for (Shape s : {Shape{2, 13, 4, 2, 8}, Shape{2, 13, 4, 1, 6}}) {
    CAPTURE(s.Hkv);
    // Row 0: samples of 4, 6 and 1 tokens, then 2 padding tokens; row 1: 5 and 8 tokens.
    auto pos = packed_positions({{4, 6, 1}, {5, 8}}, s.T);
    auto qkv = randn(s.qkv_numel(), 400 + s.Hkv, 1.0f);
    auto r = forward(*be, s, qkv, &pos);
    std::vector<double> out, lse;
    reference(s, qkv, out, lse, &pos);
    double worst_out = 0, worst_lse = 0;
    for (size_t i = 0; i < out.size(); ++i) worst_out = std::max(worst_out, std::fabs(r.out[i] - out[i]));
    for (size_t i = 0; i < lse.size(); ++i) worst_lse = std::max(worst_lse, std::fabs(r.lse[i] - lse[i]));
    CHECK(worst_out < 2e-6);
    CHECK(worst_lse < 2e-6);
    // The mask matters: without positions the outputs differ.
    CHECK(forward(*be, s, qkv).out != r.out);
    // Positions 0..T-1 in every row are the unpacked op, bit for bit.
    auto plain = packed_positions({{s.T}, {s.T}}, s.T);
    CHECK(forward(*be, s, qkv, &plain).out == forward(*be, s, qkv).out);
  }
}

TEST_CASE("cpu attention: each packed sample equals the sample run alone, forward and backward, bitwise") {
  auto be = make_cpu_backend();
  const Shape s{1, 16, 4, 2, 8};
  const std::vector<int> lengths = {5, 7, 3};  // then one padding token
  auto pos = packed_positions({lengths}, s.T);
  auto qkv = randn(s.qkv_numel(), 500, 1.0f), dout = randn(s.out_numel(), 501);
  auto packed = forward(*be, s, qkv, &pos);
  auto dpacked = backward(*be, s, qkv, packed, dout, 0.0f, &pos);
  int start = 0;
  for (int len : lengths) {
    CAPTURE(start);
    const Shape a{1, len, s.Hq, s.Hkv, s.D};
    std::vector<float> q(qkv.begin() + start * s.row(), qkv.begin() + (start + len) * s.row());
    std::vector<float> g(dout.begin() + int64_t(start) * s.Hq * s.D, dout.begin() + int64_t(start + len) * s.Hq * s.D);
    auto alone = forward(*be, a, q);
    auto dalone = backward(*be, a, q, alone, g);
    CHECK(std::equal(alone.out.begin(), alone.out.end(), packed.out.begin() + int64_t(start) * s.Hq * s.D));
    CHECK(std::equal(dalone.begin(), dalone.end(), dpacked.begin() + start * s.row()));
    for (int h = 0; h < s.Hq; ++h)
      for (int t = 0; t < len; ++t) CHECK(alone.lse[size_t(h) * len + t] == packed.lse[size_t(h) * s.T + start + t]);
    start += len;
  }
}

TEST_CASE("cpu attention_bwd with per-sample positions matches finite differences") {
  auto be = make_cpu_backend();
  const Shape s{2, 9, 4, 2, 6};
  auto pos = packed_positions({{3, 4, 2}, {6}}, s.T);
  auto qkv = randn(s.qkv_numel(), 600, 0.8f), r = randn(s.out_numel(), 601);
  auto fwd = forward(*be, s, qkv, &pos);
  auto dqkv = backward(*be, s, qkv, fwd, r, 55.0f, &pos);
  auto objective = [&] { return weighted_sum(forward(*be, s, qkv, &pos).out, r); };
  check_gradient("packed attention dqkv", qkv, dqkv, objective);
}

TEST_CASE("cpu attention refuses positions that do not count up from 0 per sample") {
  auto be = make_cpu_backend();
  const Shape s{1, 4, 2, 2, 4};
  std::vector<int32_t> pos = {0, 1, 3, 0};
  auto qkv = randn(s.qkv_numel(), 700, 1.0f);
  CHECK_THROWS_WITH_AS(forward(*be, s, qkv, &pos), doctest::Contains("positions[0, 2] = 3"), std::invalid_argument);
}

TEST_CASE("cpu attention rejects a kv head count that does not divide the q heads") {
  auto be = make_cpu_backend();
  Shape s{1, 3, 4, 3, 4};
  std::vector<float> qkv(s.qkv_numel()), out(s.out_numel()), lse(s.lse_numel());
  CHECK_THROWS_WITH_AS(be->attention_fwd({.out = view(out, {int64_t(out.size())}),
                                          .lse = view(lse, {int64_t(lse.size())}),
                                          .qkv = view(qkv, {int64_t(qkv.size())}),
                                          .shape = {.B = s.B, .T = s.T, .Hq = s.Hq, .Hkv = s.Hkv, .D = s.D}}),
                       doctest::Contains("Hkv dividing Hq"), std::invalid_argument);
}

TEST_SUITE_END();
