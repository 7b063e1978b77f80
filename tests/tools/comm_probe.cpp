// One rank of an mpirun world that exercises every Comm operation of every group with values a
// rank can check on its own (each rank's data is a known function of its world rank).
//
//   mpirun -np 4 recipe_comm_probe --tp 2 --dp 2 [--pp 1] [--cp 1] [--device cpu|cuda]
//
// Prints "comm_probe ok" (rank 0) when every check passed on every rank; otherwise each rank prints
// one line per failed check and all exit 1. An exception (e.g. a world-size mismatch) prints
// "comm_probe rank R: error: ..." and ends the whole world with exit code 2.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "core/parallel/parallel_bootstrap.hpp"
#include "kernels/ops.hpp"

namespace {

using recipe::core::Comm;
using recipe::core::Group;
using recipe::core::ParallelSizes;
using recipe::core::ParallelState;
using recipe::kernels::Backend;
using recipe::kernels::bf16_t;
using recipe::kernels::DType;
using recipe::kernels::Tensor;

// Exact in f32 and in sums of a few ranks: multiples of 0.5 below 2^10.
float exact_value(int world_rank, int64_t i) { return float((world_rank + 1) * 3 + int(i % 17)) * 0.5f; }
// Small integers: exact in bf16 (8 significant bits) and in sums of up to 8 ranks.
float small_int(int world_rank, int64_t i) { return float(world_rank + 1 + int(i % 5)); }
float max_value(int world_rank, int64_t i) { return float((int64_t(world_rank) * 7 + i) % 11) - 3.0f; }
// Values with full mantissas, whose sum depends on the order of additions: results that agree
// bitwise across ranks show that every rank received the same reduction.
float noisy_value(int world_rank, int64_t i) {
  uint64_t x = uint64_t(world_rank + 1) * 0x9E3779B97F4A7C15ull + uint64_t(i) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return float(double(x >> 11) / double(1ull << 53) * 2.0 - 1.0) * 1.37f;
}

uint32_t fnv1a(const void* data, size_t bytes) {
  uint32_t h = 2166136261u;
  auto p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

class Probe {
 public:
  Probe(Backend& backend, const ParallelState& ps) : be_(backend), me_(ps.world_rank()) {}
  ~Probe() {
    for (void* p : allocations_) be_.free(p);
  }

  int failures() const { return int(failures_.size()); }
  const std::vector<std::string>& failure_lines() const { return failures_; }

  // A backend tensor of n elements holding `host` (converted to dtype).
  Tensor upload(const std::vector<float>& host, DType dt) {
    Tensor t = alloc(int64_t(host.size()), dt);
    write(t, host);
    return t;
  }
  Tensor alloc(int64_t n, DType dt) {
    void* p = be_.alloc(size_t(std::max<int64_t>(n, 1)) * recipe::kernels::dtype_size(dt));
    allocations_.push_back(p);
    return Tensor(p, dt, be_.device(), {n});
  }
  void write(Tensor t, const std::vector<float>& host) {
    if (t.dtype == DType::f32) {
      be_.from_host(t, host.data());
    } else if (t.dtype == DType::bf16) {
      std::vector<bf16_t> h(host.size());
      for (size_t i = 0; i < h.size(); ++i) h[i] = recipe::kernels::f32_to_bf16(host[i]);
      be_.from_host(t, h.data());
    } else {
      std::vector<int32_t> h(host.size());
      for (size_t i = 0; i < h.size(); ++i) h[i] = int32_t(host[i]);
      be_.from_host(t, h.data());
    }
  }
  std::vector<float> read(Tensor t) {
    std::vector<float> out(size_t(t.numel()));
    if (t.dtype == DType::f32) {
      be_.to_host(out.data(), t);
    } else if (t.dtype == DType::bf16) {
      std::vector<bf16_t> h(out.size());
      be_.to_host(h.data(), t);
      for (size_t i = 0; i < h.size(); ++i) out[i] = recipe::kernels::bf16_to_f32(h[i]);
    } else {
      std::vector<int32_t> h(out.size());
      be_.to_host(h.data(), t);
      for (size_t i = 0; i < h.size(); ++i) out[i] = float(h[i]);
    }
    return out;
  }

  void expect(bool ok, const std::string& group, const std::string& what) {
    if (!ok) failures_.push_back("comm_probe rank " + std::to_string(me_) + " [" + group + "] " + what);
  }
  // Element-wise equality (exact) of `got` and want(i).
  template <class F>
  void expect_values(const std::vector<float>& got, F want, const std::string& group, const std::string& what) {
    for (size_t i = 0; i < got.size(); ++i) {
      const float w = want(int64_t(i));
      if (got[i] != w) {
        expect(false, group,
               what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
                   std::to_string(w));
        return;
      }
    }
  }

  void check_group(Comm& c, const std::vector<int>& members) {
    const std::string g = c.name();
    const int n = int(members.size());
    expect(c.size() == n, g, "size " + std::to_string(c.size()) + ", layout says " + std::to_string(n));
    const int my_index = int(std::find(members.begin(), members.end(), me_) - members.begin());
    expect(c.rank() == my_index, g, "rank " + std::to_string(c.rank()) + ", layout says " + std::to_string(my_index));
    if (c.size() != n || c.rank() != my_index) return;  // the rest would only repeat the failure
    const int r = my_index;

    // Membership and order: the sum of world ranks, their maximum, and the gathered list.
    const double rank_sum = std::accumulate(members.begin(), members.end(), 0.0);
    expect(c.all_reduce_sum(double(me_)) == rank_sum, g, "all_reduce_sum(double) of world ranks");
    expect(c.all_reduce_max(double(me_)) == *std::max_element(members.begin(), members.end()), g,
           "all_reduce_max(double) of world ranks");
    {
      std::vector<float> h(size_t(n), -1.0f);
      h[size_t(r)] = float(me_);
      Tensor all = upload(h, DType::i32);
      c.all_gather(all, all.rows(r, 1));
      expect_values(
          read(all), [&](int64_t i) { return float(members[size_t(i)]); }, g,
          "all_gather(i32, in place) of world ranks");
    }

    // all_reduce sum (f32, bf16, i32) and max (f32).
    const int64_t len = 37;
    auto sum_over = [&](float (*f)(int, int64_t)) {
      return [&, f](int64_t i) {
        float s = 0;
        for (int m : members) s += f(m, i);
        return s;
      };
    };
    {
      std::vector<float> h(len);
      for (int64_t i = 0; i < len; ++i) h[size_t(i)] = exact_value(me_, i);
      Tensor t = upload(h, DType::f32);
      c.all_reduce_sum(t);
      expect_values(read(t), sum_over(exact_value), g, "all_reduce_sum(f32)");
    }
    {
      std::vector<float> h(len);
      for (int64_t i = 0; i < len; ++i) h[size_t(i)] = small_int(me_, i);
      Tensor t = upload(h, DType::bf16);
      c.all_reduce_sum(t);
      expect_values(read(t), sum_over(small_int), g, "all_reduce_sum(bf16)");
      Tensor k = upload(h, DType::i32);
      c.all_reduce_sum(k);
      expect_values(read(k), sum_over(small_int), g, "all_reduce_sum(i32)");
    }
    {
      std::vector<float> h(len);
      for (int64_t i = 0; i < len; ++i) h[size_t(i)] = max_value(me_, i);
      Tensor t = upload(h, DType::f32);
      c.all_reduce_max(t);
      expect_values(
          read(t),
          [&](int64_t i) {
            float m = -1e30f;
            for (int w : members) m = std::max(m, max_value(w, i));
            return m;
          },
          g, "all_reduce_max(f32)");
    }

    // Broadcast from the last group rank, every dtype.
    for (DType dt : {DType::f32, DType::bf16, DType::i32}) {
      std::vector<float> h(len);
      for (int64_t i = 0; i < len; ++i) h[size_t(i)] = small_int(me_, i);
      Tensor t = upload(h, dt);
      c.broadcast(t, n - 1);
      expect_values(
          read(t), [&](int64_t i) { return small_int(members.back(), i); }, g,
          std::string("broadcast(") + recipe::kernels::dtype_name(dt) + ", root " + std::to_string(n - 1) + ")");
    }

    // reduce_scatter and all_gather, in place (the ZeRO-1 pattern) and, for real groups, out of place.
    const int64_t chunk = 5;
    for (DType dt : {DType::f32, DType::bf16}) {
      const std::string tag = recipe::kernels::dtype_name(dt);
      std::vector<float> h(size_t(chunk * n));
      for (size_t j = 0; j < h.size(); ++j) h[j] = small_int(me_, int64_t(j));
      Tensor in = upload(h, dt);
      c.reduce_scatter_sum(in.rows(r * chunk, chunk), in);
      auto got = read(in);
      std::vector<float> mine(got.begin() + r * chunk, got.begin() + (r + 1) * chunk);
      expect_values(
          mine, [&](int64_t k) { return sum_over(small_int)(r * chunk + k); }, g,
          "reduce_scatter_sum(" + tag + ", in place)");
      std::vector<float> others;
      for (int64_t j = 0; j < chunk * n; ++j)
        if (j / chunk != r) others.push_back(got[size_t(j)]);
      std::vector<float> others_before;
      for (int64_t j = 0; j < chunk * n; ++j)
        if (j / chunk != r) others_before.push_back(h[size_t(j)]);
      expect(others == others_before, g, "reduce_scatter_sum(" + tag + ", in place) changed other chunks of in");

      std::vector<float> gathered(size_t(chunk * n), -7.0f);
      for (int64_t k = 0; k < chunk; ++k) gathered[size_t(r * chunk + k)] = exact_value(me_, k);
      Tensor out = upload(gathered, dt);
      c.all_gather(out, out.rows(r * chunk, chunk));
      expect_values(
          read(out), [&](int64_t j) { return exact_value(members[size_t(j / chunk)], j % chunk); }, g,
          "all_gather(" + tag + ", in place)");

      if (n > 1) {
        Tensor in2 = upload(h, dt);
        Tensor out2 = alloc(chunk, dt);
        c.reduce_scatter_sum(out2, in2);
        expect_values(
            read(out2), [&](int64_t k) { return sum_over(small_int)(r * chunk + k); }, g,
            "reduce_scatter_sum(" + tag + ", out of place)");
        std::vector<float> mine_in(static_cast<size_t>(chunk));
        for (int64_t k = 0; k < chunk; ++k) mine_in[size_t(k)] = exact_value(me_, k);
        Tensor src = upload(mine_in, dt);
        Tensor dst = alloc(chunk * n, dt);
        c.all_gather(dst, src);
        expect_values(
            read(dst), [&](int64_t j) { return exact_value(members[size_t(j / chunk)], j % chunk); }, g,
            "all_gather(" + tag + ", out of place)");
      }
    }

    // Asynchronous forms: several collectives in flight, completed together.
    {
      std::vector<float> a(len), b(len), s(size_t(chunk * n));
      for (int64_t i = 0; i < len; ++i) a[size_t(i)] = exact_value(me_, i), b[size_t(i)] = small_int(me_, i);
      for (size_t j = 0; j < s.size(); ++j) s[j] = exact_value(me_, int64_t(j));
      Tensor ta = upload(a, DType::f32), tb = upload(b, DType::bf16), ts = upload(s, DType::f32);
      c.all_reduce_sum_start(ta);
      c.reduce_scatter_sum_start(ts.rows(r * chunk, chunk), ts);
      c.all_reduce_sum_start(tb);
      c.wait_all();
      expect_values(read(ta), sum_over(exact_value), g, "all_reduce_sum_start(f32) + wait_all");
      expect_values(read(tb), sum_over(small_int), g, "all_reduce_sum_start(bf16) + wait_all");
      auto got = read(ts);
      std::vector<float> mine(got.begin() + r * chunk, got.begin() + (r + 1) * chunk);
      expect_values(
          mine, [&](int64_t k) { return sum_over(exact_value)(r * chunk + k); }, g,
          "reduce_scatter_sum_start(f32, in place) + wait_all");
    }

    // One started all-gather waited for alone (ZeRO-1's overlapped weight gather): three in flight
    // (in place f32 and bf16; out of place f32 for real groups), waited in reverse order and read
    // before any wait_all(); a wait on a handle wait_all() completed since does nothing.
    {
      std::vector<float> mine(static_cast<size_t>(chunk));
      for (int64_t k = 0; k < chunk; ++k) mine[size_t(k)] = exact_value(me_, k);
      std::vector<float> full(size_t(chunk * n), -7.0f);
      std::copy(mine.begin(), mine.end(), full.begin() + r * chunk);
      Tensor f = upload(full, DType::f32), h = upload(full, DType::bf16);
      Tensor src = upload(mine, DType::f32), dst = alloc(chunk * n, DType::f32);
      const Comm::Op of = c.all_gather_start(f, f.rows(r * chunk, chunk));
      const Comm::Op oh = c.all_gather_start(h, h.rows(r * chunk, chunk));
      const Comm::Op od = n > 1 ? c.all_gather_start(dst, src) : Comm::Op{};
      c.wait(od);
      c.wait(oh);
      c.wait(of);
      auto want = [&](int64_t j) { return exact_value(members[size_t(j / chunk)], j % chunk); };
      expect_values(read(f), want, g, "all_gather_start(f32, in place) + wait");
      expect_values(read(h), want, g, "all_gather_start(bf16, in place) + wait");
      if (n > 1) expect_values(read(dst), want, g, "all_gather_start(f32, out of place) + wait");
      c.wait_all();
      c.wait(of);
    }

    // Bitwise agreement on order-sensitive data, large enough for the bandwidth algorithms, blocking
    // and asynchronous; and close to the exact (double) sum.
    {
      const int64_t big = 100003;
      std::vector<float> h(static_cast<size_t>(big));
      for (int64_t i = 0; i < big; ++i) h[size_t(i)] = noisy_value(me_, i);
      Tensor t = upload(h, DType::f32), u = upload(h, DType::f32);
      c.all_reduce_sum(t);
      c.all_reduce_sum_start(u);
      c.wait_all();
      for (auto [tensor, label] : {std::pair{t, "all_reduce_sum"}, std::pair{u, "all_reduce_sum_start"}}) {
        auto got = read(tensor);
        const double hash = fnv1a(got.data(), got.size() * sizeof(float));
        expect(c.all_reduce_max(hash) == c.all_reduce_sum(hash) / n, g,
               std::string(label) + "(f32, 100003 noisy values): results differ bitwise between ranks");
        double worst = 0;
        for (int64_t i = 0; i < big; ++i) {
          double exact = 0;
          for (int m : members) exact += double(noisy_value(m, i));
          worst = std::max(worst, std::abs(double(got[size_t(i)]) - exact));
        }
        expect(worst < 1e-5, g, std::string(label) + "(f32, noisy): off by " + std::to_string(worst));
      }
    }
    c.barrier();
  }

  // Ring exchange in both directions plus a one-sided transfer, between consecutive group ranks.
  void check_send_recv(Comm& c, const std::vector<int>& members) {
    const std::string g = c.name();
    const int n = c.size(), r = c.rank();
    if (n < 2 || n != int(members.size())) return;
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    const int64_t len = 11;
    for (DType dt : {DType::f32, DType::bf16}) {
      const std::string tag = recipe::kernels::dtype_name(dt);
      std::vector<float> h(len);
      for (int64_t i = 0; i < len; ++i) h[size_t(i)] = small_int(me_, i);
      Tensor send = upload(h, dt);
      Tensor recv = alloc(len, dt);
      c.send_recv(send, next, recv, prev);  // forward: activations to the next stage
      expect_values(
          read(recv), [&](int64_t i) { return small_int(members[size_t(prev)], i); }, g,
          "send_recv(" + tag + ") forward ring");
      c.send_recv(send, prev, recv, next);  // backward: gradients to the previous stage
      expect_values(
          read(recv), [&](int64_t i) { return small_int(members[size_t(next)], i); }, g,
          "send_recv(" + tag + ") backward ring");
    }
    // Only group rank 0 sends, only group rank 1 receives (the undefined halves are skipped).
    std::vector<float> h(len);
    for (int64_t i = 0; i < len; ++i) h[size_t(i)] = exact_value(me_, i);
    Tensor t = upload(h, DType::f32);
    Tensor got = alloc(len, DType::f32);
    if (r == 0) c.send_recv(t, 1, Tensor(), 0);
    if (r == 1) {
      c.send_recv(Tensor(), 0, got, 0);
      expect_values(
          read(got), [&](int64_t i) { return exact_value(members[0], i); }, g, "send_recv one-sided");
    }
    c.barrier();
  }

  // The chunk operations of the TP communication overlap (comm.hpp): a ring all-gather of n
  // blocks by send_recv_start, each block read right after its own wait while the next step is
  // already started (the per-operation wait, not wait_all); an all_gather_start (in place and out
  // of place) overlapping a ring step and waited after it; wait_all completing an unwaited one.
  void check_chunk_ops(Comm& c, const std::vector<int>& members) {
    const std::string g = c.name();
    const int n = c.size(), r = c.rank();
    if (n < 2 || n != int(members.size())) return;
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    const int64_t len = 7;
    for (DType dt : {DType::f32, DType::bf16}) {
      const std::string tag = recipe::kernels::dtype_name(dt);
      std::vector<float> h(size_t(len * n), -3.0f);
      for (int64_t i = 0; i < len; ++i) h[size_t(r * len + i)] = small_int(me_, i);
      Tensor full = upload(h, dt);
      auto block_ok = [&](int j) {
        auto got = read(full.rows(j * len, len));
        expect_values(
            got, [&](int64_t i) { return small_int(members[size_t(j)], i); }, g,
            "send_recv_start(" + tag + ") ring block " + std::to_string(j) + " after its wait");
      };
      for (int s = 0; s + 1 < n; ++s) {
        const int j = (r - s + n) % n, from = (j - 1 + n) % n;
        const Comm::Op op = c.send_recv_start(full.rows(j * len, len), next, full.rows(from * len, len), prev);
        expect(op.seq >= 0, g, "send_recv_start returned no handle");
        c.wait(op);
        block_ok(from);
      }
      std::vector<float> mine(static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i) mine[size_t(i)] = exact_value(me_, i);
      Tensor src = upload(mine, dt), dst = alloc(len * n, dt);
      std::vector<float> inplace(size_t(len * n), -5.0f);
      std::copy(mine.begin(), mine.end(), inplace.begin() + r * len);
      Tensor in_place = upload(inplace, dt);
      const Comm::Op gathered = c.all_gather_start(dst, src);
      const Comm::Op gathered2 = c.all_gather_start(in_place, in_place.rows(r * len, len));
      Tensor ring_send = upload(mine, dt), ring_recv = alloc(len, dt);
      const Comm::Op step = c.send_recv_start(ring_send, next, ring_recv, prev);
      c.wait(gathered);  // the older operation alone, while the newer ones may still run
      expect_values(
          read(dst), [&](int64_t j) { return exact_value(members[size_t(j / len)], j % len); }, g,
          "all_gather_start(" + tag + ", out of place) + wait");
      c.wait(step);
      expect_values(
          read(ring_recv), [&](int64_t i) { return exact_value(members[size_t(prev)], i); }, g,
          "send_recv_start(" + tag + ") after an all_gather_start");
      c.wait_all();       // gathered2 was never waited on its own
      c.wait(gathered2);  // already complete: nothing to do
      expect_values(
          read(in_place), [&](int64_t j) { return exact_value(members[size_t(j / len)], j % len); }, g,
          "all_gather_start(" + tag + ", in place) + wait_all");
    }
    c.barrier();
  }

  // The started reductions waited for alone (comm.hpp; the TP linears' backward, core/model/
  // linear.cpp): all_reduce_sum_start and reduce_scatter_sum_start return handles; f32 and bf16
  // (MPI: through f32 staging), in place and out of place, in flight together with an
  // all_gather_start (the sequence-parallel backward's pattern), each waited in reverse order and
  // read before any wait_all(); a tensor changed after its op's wait keeps the change through
  // wait_all() (the staged result moves out once). And bitwise the blocking form's result on
  // order-sensitive data, small (latency algorithms) and large (bandwidth algorithms).
  void check_waited_reductions(Comm& c, const std::vector<int>& members) {
    const std::string g = c.name();
    const int n = c.size(), r = c.rank();
    if (n < 2 || n != int(members.size())) return;
    auto sum_over = [&](float (*f)(int, int64_t), int64_t offset) {
      return [&, f, offset](int64_t i) {
        float s = 0;
        for (int m : members) s += f(m, offset + i);
        return s;
      };
    };
    const int64_t len = 23, chunk = 6;
    for (DType dt : {DType::f32, DType::bf16}) {
      const std::string tag = recipe::kernels::dtype_name(dt);
      std::vector<float> a(len), s(size_t(chunk * n)), mine(static_cast<size_t>(chunk));
      for (int64_t i = 0; i < len; ++i) a[size_t(i)] = small_int(me_, i);
      for (size_t j = 0; j < s.size(); ++j) s[j] = small_int(me_, int64_t(j));
      for (int64_t k = 0; k < chunk; ++k) mine[size_t(k)] = exact_value(me_, k);
      Tensor ta = upload(a, dt), in_place = upload(s, dt), in = upload(s, dt), out = alloc(chunk, dt);
      Tensor src = upload(mine, dt), gathered = alloc(chunk * n, dt);
      const Comm::Op oa = c.all_reduce_sum_start(ta);
      const Comm::Op og = c.all_gather_start(gathered, src);
      const Comm::Op oi = c.reduce_scatter_sum_start(in_place.rows(r * chunk, chunk), in_place);
      const Comm::Op oo = c.reduce_scatter_sum_start(out, in);
      expect(oa.seq >= 0 && oi.seq >= 0 && oo.seq >= 0, g, "a started reduction returned no handle");
      c.wait(oo);
      expect_values(read(out), sum_over(small_int, r * chunk), g,
                    "reduce_scatter_sum_start(" + tag + ", out of place) + wait");
      c.wait(oi);
      expect_values(read(in_place.rows(r * chunk, chunk)), sum_over(small_int, r * chunk), g,
                    "reduce_scatter_sum_start(" + tag + ", in place) + wait");
      c.wait(og);
      expect_values(
          read(gathered), [&](int64_t j) { return exact_value(members[size_t(j / chunk)], j % chunk); }, g,
          "all_gather_start(" + tag + ") + wait, beside started reductions");
      c.wait(oa);
      expect_values(read(ta), sum_over(small_int, 0), g, "all_reduce_sum_start(" + tag + ") + wait");
      const std::vector<float> changed(len, 2.0f);
      write(ta, changed);
      c.wait_all();
      c.wait(oa);  // completed by wait_all(): nothing to do
      expect_values(
          read(ta), [](int64_t) { return 2.0f; }, g,
          "all_reduce_sum_start(" + tag + "): wait_all() overwrote the tensor after its op's wait");
    }
    for (const int64_t size : {int64_t(37), int64_t(4099), int64_t(100003)}) {
      const int64_t big = size - size % n;
      std::vector<float> h(static_cast<size_t>(big));
      for (int64_t i = 0; i < big; ++i) h[size_t(i)] = noisy_value(me_, i);
      Tensor t = upload(h, DType::f32), u = upload(h, DType::f32);
      Tensor in_t = upload(h, DType::f32), in_u = upload(h, DType::f32);
      const int64_t part = big / n;
      Tensor out_t = alloc(part, DType::f32), out_u = alloc(part, DType::f32);
      c.all_reduce_sum(t);
      c.reduce_scatter_sum(out_t, in_t);
      const Comm::Op summed = c.all_reduce_sum_start(u);
      const Comm::Op scattered = c.reduce_scatter_sum_start(out_u, in_u);
      c.wait(scattered);
      c.wait(summed);
      const std::string what = "(f32, " + std::to_string(big) + " noisy values) differs bitwise from ";
      expect(read(t) == read(u), g, "all_reduce_sum_start + wait" + what + "all_reduce_sum");
      expect(read(out_t) == read(out_u), g, "reduce_scatter_sum_start + wait" + what + "reduce_scatter_sum");
      c.wait_all();
    }
    c.barrier();
  }

 private:
  Backend& be_;
  int me_;
  std::vector<void*> allocations_;
  std::vector<std::string> failures_;
};

int run(int argc, char** argv) {
  ParallelSizes sizes;
  std::string device = "cpu";
  CLI::App app{"one rank of a communicator test world"};
  app.add_option("--tp", sizes.tp)->check(CLI::PositiveNumber);
  app.add_option("--cp", sizes.cp)->check(CLI::PositiveNumber);
  app.add_option("--dp", sizes.dp)->check(CLI::PositiveNumber);
  app.add_option("--pp", sizes.pp)->check(CLI::PositiveNumber);
  app.add_option("--device", device)->check(CLI::IsMember({"cpu", "cuda"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  const auto launcher = recipe::core::launcher_world();
  recipe::kernels::BackendOptions opts;
  opts.cpu_threads = 1;
  if (device == "cuda") {
    const int gpus = recipe::kernels::query_gpus().count;
    opts.device_index = gpus > 0 ? launcher.local_rank % gpus : 0;
  }
  auto backend = recipe::kernels::make_backend(
      device == "cuda" ? recipe::kernels::Device::cuda : recipe::kernels::Device::cpu, opts);
  auto ps = recipe::core::bootstrap_parallel(sizes, *backend);
  const int me = ps->world_rank();

  Probe probe(*backend, *ps);
  probe.expect(launcher.launched && launcher.rank == me && launcher.size == ps->world_size(), "launcher",
               "launcher_world() says rank " + std::to_string(launcher.rank) + " of " + std::to_string(launcher.size) +
                   ", MPI says " + std::to_string(me) + " of " + std::to_string(ps->world_size()));
  std::vector<int> everyone(size_t(ps->world_size()));
  std::iota(everyone.begin(), everyone.end(), 0);
  probe.check_group(ps->world(), everyone);
  probe.check_group(ps->tp(), recipe::core::group_ranks(sizes, me, Group::tp));
  probe.check_group(ps->cp(), recipe::core::group_ranks(sizes, me, Group::cp));
  probe.check_group(ps->dp(), recipe::core::group_ranks(sizes, me, Group::dp));
  probe.check_group(ps->pp(), recipe::core::group_ranks(sizes, me, Group::pp));
  const auto emb = recipe::core::embedding_group_ranks(sizes, me);
  probe.expect(int(emb.size()) == ((sizes.pp > 1 && (ps->first_stage() || ps->last_stage())) ? 2 : 1), "embedding",
               "embedding group of " + std::to_string(emb.size()) + " ranks at pipeline stage " +
                   std::to_string(ps->coords().pp));
  probe.check_group(ps->embedding(), emb);
  probe.check_send_recv(ps->pp(), recipe::core::group_ranks(sizes, me, Group::pp));
  probe.check_send_recv(ps->world(), everyone);
  probe.check_chunk_ops(ps->tp(), recipe::core::group_ranks(sizes, me, Group::tp));
  probe.check_chunk_ops(ps->world(), everyone);
  probe.check_waited_reductions(ps->tp(), recipe::core::group_ranks(sizes, me, Group::tp));
  probe.check_waited_reductions(ps->world(), everyone);

  const double total = ps->world().all_reduce_sum(double(probe.failures()));
  for (const auto& line : probe.failure_lines()) std::fprintf(stderr, "%s\n", line.c_str());
  if (total > 0) {
    if (me == 0) std::fprintf(stderr, "comm_probe: %d failed checks in the world\n", int(total));
    return 1;
  }
  if (me == 0)
    std::printf("comm_probe ok: world %d (tp %d, cp %d, dp %d, pp %d) on %s\n", ps->world_size(), sizes.tp, sizes.cp,
                sizes.dp, sizes.pp, device.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int rc = run(argc, argv);
    std::fflush(nullptr);
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "comm_probe rank %d: error: %s\n", recipe::core::launcher_world().rank, e.what());
    recipe::core::abort_world(2);
  }
}
