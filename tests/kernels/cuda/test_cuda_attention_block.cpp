// CUDA vs CPU: ring attention's block ops (ops.hpp AttentionBlockFwdArgs / AttentionBlockBwdArgs;
// the CUDA side is cuDNN's fused attention on the block's rows plus the merge / accumulate kernels
// of attention_block.cu). Causal diagonal blocks and unmasked blocks, MHA and GQA (ratios 1, 2, 4),
// head dims 16 to 128, T not a multiple of 8, merge off and on into a running (out, lse) that is not
// the block's own, sub-ranges at odd row offsets, q and kv from different tensors, gradients
// accumulated into prefilled dq / dkv (separate and one tensor) and compared per head group (q, k,
// v heads: a wrong dK shows apart from dV), and every element outside the block's rows and heads
// (by geometry) left bit for bit. Then the ring itself: the blocks of ring_block over cp = 2, 3, 4
// ranks, merged on the GPU, equal cuDNN's full causal attention of the whole sequence, forward and
// backward. A backend without cuDNN refuses at prepare_attention_blocks (there is no own kernel for
// blocks). Skipped without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/model/ring_attention.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cuda");

using namespace recipe::kernels;
using namespace recipe::kernels::testing;
using recipe::core::cp_global_position;
using recipe::core::ring_block;
using recipe::core::RingBlock;

namespace {

// Ring attention's blocks run only through cuDNN: without it the first two tests have nothing to test
// (the last one proves the refusal).
#ifdef RECIPE_WITH_CUDNN
constexpr bool kCudnn = true;
#else
constexpr bool kCudnn = false;
#endif
bool no_cudnn_gpu() { return !has_gpu() || !kCudnn; }

struct Shape {
  int B, T, Hq, Hkv, D;
};
struct Rows {
  int q_begin, q_len, k_begin, k_len;
  bool causal;
};

// ‖a − b‖ / ‖b‖ (NaN anywhere gives +inf).
double rel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Which elements a block op may write, by geometry alone: rows [first, first + len) of each batch
// entry, columns [col_begin, col_end) of each row ([B, T, width] tensors). (An earlier version
// called "outside" every element the CPU op left unchanged, which also flags elements inside the
// block whose exact increment is zero: the first query row of a causal block attends one key, so
// dS = P·(dP − rowsum(dO∘O)) is exactly 0 on the CPU and a rounding residue on cuDNN, which
// changes a bf16 gradient whose initial value is tiny. That was the one element "written outside
// its block" at B=2, T=40, Hq=6, Hkv=3, D=128.)
struct Region {
  int first, len;
  int64_t col_begin, col_end;
  bool holds(int t, int64_t col) const { return t >= first && t < first + len && col >= col_begin && col < col_end; }
};

// Compares `gpu` with `cpu` over a [B, T, width] tensor holding `init` before the op: elements in
// none of `writable` must still be exactly `init` on the GPU; inside, the increments (value − init)
// are compared per column band of `bands` (name, [begin, end)) as ‖gpu − cpu‖ / ‖cpu‖. Prints, per
// band, that relative error and the largest |gpu − cpu|, and the first element written outside
// (b, t, column), so one failing device run says where the bug is.
// RECIPE_TEST_VERBOSE=1 prints every region's errors, passing or not (a diagnosis run on a device).
bool verbose() {
  static const bool on = [] {
    const char* v = std::getenv("RECIPE_TEST_VERBOSE");
    return v != nullptr && std::string(v) == "1";
  }();
  return on;
}

struct Band {
  const char* name;
  int64_t begin, end;
};
void check_writes(const char* what, const std::vector<float>& gpu, const std::vector<float>& cpu,
                  const std::vector<float>& init, int B, int T, int64_t width, const std::vector<Region>& writable,
                  const std::vector<Band>& bands, double tol) {
  CAPTURE(what);
  int64_t outside = 0;
  std::string first_outside;
  std::vector<double> num(bands.size(), 0.0), den(bands.size(), 0.0), worst(bands.size(), 0.0);
  bool finite = true;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int64_t col = 0; col < width; ++col) {
        const size_t i = (size_t(b) * size_t(T) + size_t(t)) * size_t(width) + size_t(col);
        const bool in = std::any_of(writable.begin(), writable.end(), [&](const Region& r) { return r.holds(t, col); });
        if (!in) {
          if (gpu[i] != init[i] && outside++ == 0)
            first_outside = "b=" + std::to_string(b) + " t=" + std::to_string(t) + " col=" + std::to_string(col) +
                            " init=" + std::to_string(init[i]) + " gpu=" + std::to_string(gpu[i]);
          continue;
        }
        for (size_t k = 0; k < bands.size(); ++k) {
          if (col < bands[k].begin || col >= bands[k].end) continue;
          const double g = double(gpu[i]) - init[i], c = double(cpu[i]) - init[i];
          if (!std::isfinite(g) || !std::isfinite(c)) finite = false;
          num[k] += (g - c) * (g - c);
          den[k] += c * c;
          worst[k] = std::max(worst[k], std::fabs(g - c));
        }
      }
  // One line per band, printed with any failing check below (or always with RECIPE_TEST_VERBOSE=1).
  std::vector<double> err(bands.size(), 0.0);
  std::string summary = std::string(what) + ": " + std::to_string(outside) + " elements written outside the block" +
                        (outside ? " (first: " + first_outside + ")" : "");
  for (size_t k = 0; k < bands.size(); ++k) {
    err[k] = den[k] > 0 ? std::sqrt(num[k] / den[k]) : std::sqrt(num[k]);
    summary += "; " + std::string(bands[k].name) + ": increment rel err " + std::to_string(err[k]) +
               ", max |gpu - cpu| " + std::to_string(worst[k]);
  }
  INFO(summary);
  if (verbose()) MESSAGE(summary);
  CHECK(outside == 0);
  CHECK(finite);
  for (size_t k = 0; k < bands.size(); ++k)
    if (bands[k].begin < bands[k].end) CHECK(err[k] < tol);
}

void check_block(const Shape& s, const Rows& k, bool merge, bool one_grad_tensor, uint32_t seed) {
  CAPTURE(s.B);
  CAPTURE(s.T);
  CAPTURE(s.Hq);
  CAPTURE(s.Hkv);
  CAPTURE(s.D);
  CAPTURE(k.q_begin);
  CAPTURE(k.q_len);
  CAPTURE(k.k_begin);
  CAPTURE(k.k_len);
  CAPTURE(k.causal);
  CAPTURE(merge);
  CAPTURE(one_grad_tensor);
  Backend& cpu = cpu_backend();
  Backend& gpu = gpu_backend();
  Rng r(seed);
  const AttentionShape shape{.B = s.B, .T = s.T, .Hq = s.Hq, .Hkv = s.Hkv, .D = s.D};
  const int64_t row = int64_t(s.Hq + 2 * s.Hkv) * s.D, orow = int64_t(s.Hq) * s.D, N = int64_t(s.B) * s.T;
  auto qkv = make_dual(Kind::act, {s.B, s.T, row}, r.normal(size_t(N * row)));
  auto kv = make_dual(Kind::act, {s.B, s.T, row}, r.normal(size_t(N * row)));
  // A running result that is not the block's own: random out, lse around the block's scale.
  const std::vector<float> out0 = r.normal(size_t(N * orow)), lse0 = r.normal(size_t(s.B) * s.Hq * s.T, 1.f, 3.f);
  auto out = make_dual(Kind::act, {s.B, s.T, orow}, out0);
  auto lse = make_dual(Kind::f32, {s.B, s.Hq, s.T}, lse0);
  const AttentionBlockFwdArgs fwd{.shape = shape,
                                  .q_begin = k.q_begin,
                                  .q_len = k.q_len,
                                  .k_begin = k.k_begin,
                                  .k_len = k.k_len,
                                  .causal = k.causal,
                                  .merge = merge};
  auto cf = fwd, gf = fwd;
  cf.out = out.c, cf.lse = lse.c, cf.qkv = qkv.c, cf.kv = kv.c;
  gf.out = out.g, gf.lse = lse.g, gf.qkv = qkv.g, gf.kv = kv.g;
  cpu.attention_block_fwd(cf);
  gpu.attention_block_fwd(gf);
  CHECK_CLOSE(out, kBf16Tol);
  CHECK_CLOSE(lse, 1e-3);
  const std::vector<float> out_g = read(gpu, out.g), lse_g = read(gpu, lse.g);
  std::vector<float> out0_r(out0.size());
  std::transform(out0.begin(), out0.end(), out0_r.begin(), round_bf16);
  // out: the query rows, every head; lse [B, Hq, T]: the query rows of every head (as B·Hq rows of
  // T values: "row" = (b, h), "column" = t).
  check_writes("out", out_g, read(cpu, out.c), out0_r, s.B, s.T, orow, {{k.q_begin, k.q_len, 0, orow}},
               {{"all heads", 0, orow}}, 2e-2);
  check_writes("lse", lse_g, read(cpu, lse.c), lse0, s.B * s.Hq, 1, s.T,
               {{0, 1, int64_t(k.q_begin), int64_t(k.q_begin) + k.q_len}}, {{"rows", 0, s.T}}, 1e-2);

  // Backward from the GPU's merged out and lse on both sides (the "final" values of the contract),
  // into prefilled gradients: the block's share is what each adds.
  auto out2 = make_dual(Kind::act, {s.B, s.T, orow}, out_g);
  auto lse2 = make_dual(Kind::f32, {s.B, s.Hq, s.T}, lse_g);
  auto dout = make_dual(Kind::act, {s.B, s.T, orow}, r.normal(size_t(N * orow)));
  const std::vector<float> dq0 = r.normal(size_t(N * row), 0.05f), dkv0 = r.normal(size_t(N * row), 0.05f);
  auto dq = make_dual(Kind::act, {s.B, s.T, row}, dq0);
  auto dkv = make_dual(Kind::act, {s.B, s.T, row}, dkv0);
  const AttentionBlockBwdArgs bwd{.shape = shape,
                                  .q_begin = k.q_begin,
                                  .q_len = k.q_len,
                                  .k_begin = k.k_begin,
                                  .k_len = k.k_len,
                                  .causal = k.causal};
  auto cb = bwd, gb = bwd;
  cb.dq = dq.c, cb.dkv = one_grad_tensor ? dq.c : dkv.c, cb.dout = dout.c, cb.qkv = qkv.c, cb.kv = kv.c;
  cb.out = out2.c, cb.lse = lse2.c;
  gb.dq = dq.g, gb.dkv = one_grad_tensor ? dq.g : dkv.g, gb.dout = dout.g, gb.qkv = qkv.g, gb.kv = kv.g;
  gb.out = out2.g, gb.lse = lse2.g;
  cpu.attention_block_bwd(cb);
  gpu.attention_block_bwd(gb);
  // dq: the q heads of the query rows; dkv: the k and v heads of the key rows (both in one tensor
  // when one_grad_tensor). Increments compared per head group, so a wrong dK shows apart from dV.
  const std::vector<Band> bands = {{"q heads", 0, orow},
                                   {"k heads", orow, orow + int64_t(s.Hkv) * s.D},
                                   {"v heads", orow + int64_t(s.Hkv) * s.D, row}};
  const Region q_rows{k.q_begin, k.q_len, 0, orow}, kv_rows{k.k_begin, k.k_len, orow, row};
  std::vector<float> dq0_r(dq0.size()), dkv0_r(dkv0.size());
  std::transform(dq0.begin(), dq0.end(), dq0_r.begin(), round_bf16);
  std::transform(dkv0.begin(), dkv0.end(), dkv0_r.begin(), round_bf16);
  if (one_grad_tensor) {
    check_writes("dq+dkv", read(gpu, dq.g), read(cpu, dq.c), dq0_r, s.B, s.T, row, {q_rows, kv_rows}, bands, 3e-2);
  } else {
    check_writes("dq", read(gpu, dq.g), read(cpu, dq.c), dq0_r, s.B, s.T, row, {q_rows}, bands, 3e-2);
    check_writes("dkv", read(gpu, dkv.g), read(cpu, dkv.c), dkv0_r, s.B, s.T, row, {kv_rows}, bands, 3e-2);
  }
}

}  // namespace

TEST_CASE("cuda attention_block_fwd/bwd vs CPU: causal and unmasked blocks, GQA, merge, sub-ranges" *
          doctest::skip(no_cudnn_gpu())) {
  // Head dims 16 (gpt_tiny / llama_tiny: the CP parity runs), 32, 64 and 128; GQA ratios 1, 2 and 4;
  // T not a multiple of 8 or 64 and odd chunk lengths; B up to 3.
  const Shape shapes[] = {{2, 64, 8, 2, 64}, {1, 48, 4, 4, 32},  {2, 40, 6, 3, 128}, {2, 32, 4, 2, 16},
                          {2, 32, 4, 4, 16}, {3, 50, 8, 8, 128}, {2, 36, 8, 2, 128}, {2, 26, 4, 2, 64}};
  uint32_t seed = 1;
  for (const Shape& s : shapes) {
    const int T = s.T, c = T / 2, L = T / 3;
    const Rows blocks[] = {
        {0, T, 0, T, true},              // the diagonal block of ring step 0
        {0, T, 0, c, false},             // all queries × an earlier rank's first chunk
        {c, T - c, 0, T, false},         // the late chunk × all of a later rank's keys
        {1 + T / 8, L, T - L, L, true},  // a causal square at other rows of q and kv
        {5, 11, 3, T - 5, false},        // odd offsets, q_len != k_len
    };
    for (const Rows& k : blocks)
      for (const bool merge : {false, true}) check_block(s, k, merge, false, seed++);
    check_block(s, blocks[1], true, true, seed++);  // dq and dkv one tensor (the contract allows it)
  }
  const AttentionPlan p = gpu_backend().prepare_attention_blocks({.B = 2, .T = 64, .Hq = 8, .Hkv = 2, .D = 64},
                                                                 {{.q_len = 64, .k_len = 64, .causal = true},
                                                                  {.q_len = 64, .k_len = 32, .causal = false},
                                                                  {.q_len = 32, .k_len = 64, .causal = false}});
  CHECK(p.path == "cudnn");
  CHECK(p.workspace_bytes > 0);
  CHECK(gpu_backend().kernel_paths().attention.find("cudnn") != std::string::npos);
}

TEST_CASE("cuda ring attention over cp blocks equals cuDNN's full causal attention, forward and backward" *
          doctest::skip(no_cudnn_gpu())) {
  Backend& gpu = gpu_backend();
  for (const Shape& s :
       {Shape{2, 96, 8, 2, 64}, Shape{1, 96, 4, 4, 128}, Shape{2, 96, 6, 3, 128}, Shape{2, 96, 4, 2, 16}})
    for (int cp : {2, 3, 4}) {
      CAPTURE(cp);
      CAPTURE(s.Hkv);
      CAPTURE(s.D);
      Rng r(uint32_t(cp * 100 + s.D));
      const int B = s.B, T = s.T, Tl = T / cp;
      const int64_t row = int64_t(s.Hq + 2 * s.Hkv) * s.D, orow = int64_t(s.Hq) * s.D;
      // The whole sequence through attention_fwd / attention_bwd (cuDNN), on bf16-rounded inputs.
      std::vector<float> qkv_h = r.normal(size_t(B) * T * row), dout_h = r.normal(size_t(B) * T * orow);
      for (float& x : qkv_h) x = round_bf16(x);
      for (float& x : dout_h) x = round_bf16(x);
      const AttentionShape full{.B = B, .T = T, .Hq = s.Hq, .Hkv = s.Hkv, .D = s.D};
      auto qkv = make_dual(Kind::act, {B, T, row}, qkv_h);
      auto dout = make_dual(Kind::act, {B, T, orow}, dout_h);
      auto out = make_dual(Kind::act, {B, T, orow}, std::vector<float>(size_t(B) * T * orow));
      auto lse = make_dual(Kind::f32, {B, s.Hq, T}, std::vector<float>(size_t(B) * s.Hq * T));
      auto dqkv = make_dual(Kind::act, {B, T, row}, std::vector<float>(size_t(B) * T * row));
      gpu.attention_fwd({.out = out.g, .lse = lse.g, .qkv = qkv.g, .shape = full});
      gpu.attention_bwd({.dqkv = dqkv.g, .dout = dout.g, .qkv = qkv.g, .out = out.g, .lse = lse.g, .shape = full});
      const std::vector<float> out_f = read(gpu, out.g), lse_f = read(gpu, lse.g), dqkv_f = read(gpu, dqkv.g);

      // Rank r's local rows (its chunks r and 2cp−1−r) of a [B, T, width] host tensor.
      auto local = [&](const std::vector<float>& v, int64_t width, int rank) {
        std::vector<float> o(size_t(B) * Tl * width);
        for (int b = 0; b < B; ++b)
          for (int t = 0; t < Tl; ++t)
            std::copy_n(v.begin() + (int64_t(b) * T + cp_global_position(cp, rank, t, Tl)) * width, width,
                        o.begin() + (int64_t(b) * Tl + t) * width);
        return o;
      };
      const AttentionShape ls{.B = B, .T = Tl, .Hq = s.Hq, .Hkv = s.Hkv, .D = s.D};
      std::vector<Dual> lq, ld, lo, ll, ldq, ldkv;
      for (int k = 0; k < cp; ++k) {
        lq.push_back(make_dual(Kind::act, {B, Tl, row}, local(qkv_h, row, k)));
        ld.push_back(make_dual(Kind::act, {B, Tl, orow}, local(dout_h, orow, k)));
        lo.push_back(make_dual(Kind::act, {B, Tl, orow}, std::vector<float>(size_t(B) * Tl * orow)));
        ll.push_back(make_dual(Kind::f32, {B, s.Hq, Tl}, std::vector<float>(size_t(B) * s.Hq * Tl)));
        ldq.push_back(make_dual(Kind::act, {B, Tl, row}, std::vector<float>(size_t(B) * Tl * row)));
        ldkv.push_back(make_dual(Kind::act, {B, Tl, row}, std::vector<float>(size_t(B) * Tl * row)));
      }
      const size_t n = size_t(cp);
      for (int k = 0; k < cp; ++k) {
        std::vector<AttentionBlockShape> blocks;
        for (int i = 0; i < cp; ++i) {
          const RingBlock b = ring_block(cp, k, i, Tl);
          blocks.push_back({.q_len = b.q_len, .k_len = b.k_len, .causal = b.causal});
        }
        CHECK(gpu.prepare_attention_blocks(ls, blocks).path == "cudnn");
      }
      // Rank k at ring step i holds the K/V of rank (k − i) mod cp (ring_attention.hpp).
      for (int k = 0; k < cp; ++k)
        for (int i = 0; i < cp; ++i) {
          const size_t src = size_t(((k - i) % cp + cp) % cp), me = size_t(k);
          const RingBlock b = ring_block(cp, k, i, Tl);
          gpu.attention_block_fwd({.out = lo[me].g,
                                   .lse = ll[me].g,
                                   .qkv = lq[me].g,
                                   .kv = lq[src].g,
                                   .shape = ls,
                                   .q_begin = b.q_begin,
                                   .q_len = b.q_len,
                                   .k_begin = b.k_begin,
                                   .k_len = b.k_len,
                                   .causal = b.causal,
                                   .merge = i > 0});
        }
      for (int k = 0; k < cp; ++k)
        for (int i = 0; i < cp; ++i) {
          const size_t src = size_t(((k - i) % cp + cp) % cp), me = size_t(k);
          const RingBlock b = ring_block(cp, k, i, Tl);
          gpu.attention_block_bwd({.dq = ldq[me].g,
                                   .dkv = ldkv[src].g,
                                   .dout = ld[me].g,
                                   .qkv = lq[me].g,
                                   .kv = lq[src].g,
                                   .out = lo[me].g,
                                   .lse = ll[me].g,
                                   .shape = ls,
                                   .q_begin = b.q_begin,
                                   .q_len = b.q_len,
                                   .k_begin = b.k_begin,
                                   .k_len = b.k_len,
                                   .causal = b.causal});
        }
      for (size_t k = 0; k < n; ++k) {
        CAPTURE(k);
        std::vector<float> d = read(gpu, ldq[k].g);
        const std::vector<float> dk = read(gpu, ldkv[k].g);
        for (size_t i = 0; i < d.size(); ++i) d[i] += dk[i];
        CHECK(rel(read(gpu, lo[k].g), local(out_f, orow, int(k))) < 2e-2);
        // lse rows of rank k: [B, Hq, Tl] against the full [B, Hq, T] at the global positions.
        const std::vector<float> lk = read(gpu, ll[k].g);
        std::vector<float> lref(lk.size());
        for (int bh = 0; bh < B * s.Hq; ++bh)
          for (int t = 0; t < Tl; ++t)
            lref[size_t(bh) * Tl + t] = lse_f[size_t(bh) * T + size_t(cp_global_position(cp, int(k), t, Tl))];
        CHECK(rel(lk, lref) < 1e-3);
        // dq, dK and dV apart (q, k, v heads of each row), so a failure names the tensor.
        const std::vector<float> dref = local(dqkv_f, row, int(k));
        const int64_t heads[4] = {0, orow, orow + int64_t(s.Hkv) * s.D, row};
        const char* names[3] = {"dq", "dk", "dv"};
        for (int h = 0; h < 3; ++h) {
          std::vector<float> a, b;
          for (size_t i = 0; i < d.size(); ++i) {
            const int64_t col = int64_t(i) % row;
            if (col >= heads[h] && col < heads[h + 1]) a.push_back(d[i]), b.push_back(dref[i]);
          }
          const double e = rel(a, b);
          INFO(names[h] << " rel err " << e);
          if (verbose()) MESSAGE("cp=" << cp << " rank " << k << " D=" << s.D << " " << names[h] << " rel err " << e);
          CHECK(e < 3e-2);
        }
      }
    }
}

TEST_CASE("cuda ring attention blocks have no own-kernel path: a backend without cuDNN refuses at prepare" *
          doctest::skip(!has_gpu())) {
  BackendOptions o = cuda_options();
  o.attention_fallback = true;  // the plan's kernels.attention="fallback"
  auto be = make_cuda_backend(o);
  const AttentionShape sh{.B = 1, .T = 32, .Hq = 4, .Hkv = 4, .D = 64};
  CHECK_THROWS_WITH_AS(be->prepare_attention_blocks(sh, {{.q_len = 32, .k_len = 32, .causal = true}}),
                       doctest::Contains("cuDNN"), std::runtime_error);
}
