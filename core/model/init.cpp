#include "core/model/init.hpp"

#include <algorithm>
#include <thread>
#include <vector>

#include "core/model/rng.hpp"

namespace recipe::core {

void init_values(const ParamSpec& p, uint64_t seed, int64_t first, int64_t count, float* out) {
  switch (p.init) {
    case InitKind::zeros:
      std::fill(out, out + count, 0.0f);
      return;
    case InitKind::ones:
      std::fill(out, out + count, 1.0f);
      return;
    case InitKind::kaiming_uniform: {  // uniform(-bound, bound), bound = init_std = 1/sqrt(fan_in)
      const uint64_t key = rng::stream_key(seed, p.name);
      for (int64_t i = 0; i < count; ++i) {
        const double u = rng::uniform_open0(uint32_t(rng::bits(key, uint64_t(p.global_index(first + i)))));
        out[i] = float(p.init_std * (2.0 * u - 1.0));
      }
      return;
    }
    case InitKind::normal:
    case InitKind::normal_output: {
      const uint64_t key = rng::stream_key(seed, p.name);
      for (int64_t i = 0; i < count; ++i)
        out[i] = float(p.init_std * rng::normal(key, uint64_t(p.global_index(first + i))));
      return;
    }
  }
}

namespace {

// Values of [first, first+count) into out, split over threads when large (normal draws cost ~20 ns
// each; the values do not depend on the split).
void init_range(const ParamSpec& p, uint64_t seed, int64_t first, int64_t count, float* out) {
  const unsigned hw = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  const int64_t nthreads = p.init == InitKind::zeros || p.init == InitKind::ones || count < 65536 ? 1 : int64_t(hw);
  if (nthreads == 1) return init_values(p, seed, first, count, out);
  std::vector<std::thread> pool;
  const int64_t per = (count + nthreads - 1) / nthreads;
  for (int64_t t = 0; t < nthreads; ++t) {
    const int64_t b = t * per, n = std::min(per, count - b);
    if (n <= 0) break;
    pool.emplace_back([&, b, n] { init_values(p, seed, first + b, n, out + b); });
  }
  for (auto& th : pool) th.join();
}

}  // namespace

void init_params(ParamStore& store, uint64_t seed) {
  kernels::Backend& be = store.backend();
  constexpr int64_t kChunk = int64_t(1) << 20;
  std::vector<float> host(static_cast<size_t>(kChunk));

  be.zero(store.master());  // alignment gaps stay zero
  for (const ParamSpec& p : store.layout().params) {
    if (p.fp8) continue;  // held only in FP8: the Model quantizes it from the source set below
    for (int64_t first = 0; first < p.numel; first += kChunk) {
      const int64_t count = std::min(kChunk, p.numel - first);
      init_range(p, seed, first, count, host.data());
      // A frozen tensor (LoRA base) has no master: it is written into the compute copy directly.
      if (p.trainable || store.compute_is_master())
        be.from_host(store.master_span(p.offset + first, count), host.data());
      else
        store.compute_from_host(p.offset + first, count, host.data());
    }
  }
  store.set_fp8_source([seed](const ParamSpec& p, float* out) { init_range(p, seed, 0, p.numel, out); });
  store.sync_compute();
  store.zero_grads();
}

}  // namespace recipe::core
