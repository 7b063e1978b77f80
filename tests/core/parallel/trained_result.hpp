// What a train_probe world left behind (losses.txt, params-<rank>.txt), reassembled into global
// tensors, for the parallel-vs-serial tests (training parity, checkpoint resharding).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace recipe::testing {

struct TempOut {
  std::filesystem::path path;
  explicit TempOut(const std::string& tag) {
    path = std::filesystem::temp_directory_path() / ("recipe-parity-" + tag + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempOut() { std::filesystem::remove_all(path); }
};

// The rounding noise floor of a serial run (see measure_noise below): per tensor, the largest
// relative L2 distance between the run and the same run under another BLAS kernel set; and the
// largest relative loss difference. Empty: no floor measured (the fixed bounds apply).
struct NoiseFloor {
  std::map<std::string, double> params;
  double loss = 0;
  std::vector<std::string> cores;  // the kernel sets it was measured with (for messages)
};

struct Trained {
  std::vector<double> losses;
  std::map<std::string, std::vector<double>> params;  // global tensors
  std::string problems;                               // replica disagreements
  // How rank 0's steps ran (train_probe's step-0.txt): the device step, and how many steps were
  // CUDA-graph launches; -1 when the probe did not say.
  int device_step = -1, graph_steps = -1;
  NoiseFloor noise;  // a serial reference's measured floor (measure_noise), else empty
};

// Reads losses.txt and every params-<r>.txt; places each shard into its global tensor.
inline Trained read_result(const std::filesystem::path& dir, int world) {
  Trained t;
  std::ifstream lf(dir / "losses.txt");
  for (double v; lf >> v;) t.losses.push_back(v);
  std::ifstream sf(dir / "step-0.txt");
  sf >> t.device_step >> t.graph_steps;
  std::map<std::string, std::vector<char>> seen;  // which global elements are already set
  for (int r = 0; r < world; ++r) {
    std::ifstream f(dir / ("params-" + std::to_string(r) + ".txt"));
    std::string header, values;
    while (std::getline(f, header) && std::getline(f, values)) {
      std::istringstream h(header), v(values);
      std::string name;
      int shard_dim, ndim;
      int64_t begin, size, numel;
      h >> name >> shard_dim >> begin >> size >> ndim;
      std::vector<int64_t> shape(static_cast<size_t>(ndim));
      int64_t global = 1;
      for (auto& d : shape) {
        h >> d;
        global *= d;
      }
      h >> numel;
      auto& dst = t.params[name];
      auto& mark = seen[name];
      if (dst.empty()) {
        dst.assign(size_t(global), 0.0);
        mark.assign(size_t(global), 0);
      }
      int64_t inner = 1;
      if (shard_dim >= 0)
        for (int d = shard_dim + 1; d < ndim; ++d) inner *= shape[size_t(d)];
      for (int64_t i = 0; i < numel; ++i) {
        double x;
        v >> x;
        int64_t g = i;
        if (shard_dim >= 0) {
          const int64_t along = (i / inner) % size, outer = i / (inner * size);
          g = (outer * shape[size_t(shard_dim)] + begin + along) * inner + i % inner;
        }
        if (mark[size_t(g)] && dst[size_t(g)] != x && t.problems.size() < 2000)
          t.problems += name + "[" + std::to_string(g) + "] differs between the ranks holding it\n";
        dst[size_t(g)] = x;
        mark[size_t(g)] = 1;
      }
    }
  }
  return t;
}

// ‖a − b‖₂ / ‖b‖₂ over the first min(|a|, |b|) elements' common global rows is not needed: both
// runs have the same global shapes (the tiny presets pad the vocabulary by 1).
inline double rel_l2(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Why bounds come from a measured floor. A parallel layout sums the same products in another
// order (TP splits a GEMM's inner dimension, DP adds the ranks' gradients), so its fp32 results
// differ from one process's in the last bits, and Adam's normalisation scales such differences
// up in a tensor's near-null directions (e.g. LoRA's B of q|k|v after 12 steps at lr 1e-2). How
// large they grow depends on the BLAS kernels' own summation order, which OpenBLAS picks at run
// time for the CPU: a fixed 1e-5 passed on one CI machine (SkylakeX kernels) and failed at 2.9x
// on another (Zen, i.e. Haswell's kernels) while the losses agreed to 1e-7. The same serial run
// under other kernel sets (OPENBLAS_CORETYPE) differs from itself by exactly that kind of
// rounding, so its distance is the floor the comparison cannot go below on this CPU.
//
// Measured (llama_tiny_lora, 12 steps, tests/core/parallel/test_lora_parity.cpp's schedule):
// serial runs under SkylakeX, Haswell, Sandybridge and Prescott kernels differ by 0.5-4.4e-5 per
// adapter; TP2, TP2xPP2 and DP2+ZeRO-1 differ from the serial run of the same kernels by at most
// 1.8x the floor taken over two other kernel sets (0.8x over three), PP2 by 0. A parallel run
// must stay within kNoiseFactor times the floor, or the fixed bound where that is larger: a wrong
// gradient or a missed reduction is off by 1e-2 and more, far above either.
constexpr double kNoiseFactor = 5;

// The OpenBLAS kernel sets this CPU can run other than the one OpenBLAS chose (OPENBLAS_CORETYPE
// names; Debian builds OpenBLAS for every core type and picks one at load). Empty when the BLAS
// is not OpenBLAS (the symbol is weak) or the architecture has no list here.
extern "C" char* openblas_get_corename(void) __attribute__((weak));
inline std::vector<std::string> other_blas_cores() {
  if (openblas_get_corename == nullptr) return {};
  std::string native = openblas_get_corename();
  std::transform(native.begin(), native.end(), native.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  std::vector<std::string> candidates;
#if defined(__x86_64__)
  // SSE3, AVX and AVX2+FMA kernels: the sets every x86-64 CPU of CI's kind can run (Zen picks
  // Haswell's kernels, so on Zen the third adds nothing and two remain).
  candidates.push_back("Prescott");
  if (__builtin_cpu_supports("avx")) candidates.push_back("Sandybridge");
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) candidates.push_back("Haswell");
#elif defined(__aarch64__)
  candidates = {"ARMV8", "CORTEXA53", "CORTEXA57"};  // plain ARMv8.0 NEON kernels
#endif
  std::vector<std::string> out;
  for (const std::string& c : candidates) {
    std::string lower = c;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
    if (lower != native) out.push_back(c);
  }
  return out;
}

// The serial run `serial` once more under each other kernel set (`rerun(core)` runs it with
// OPENBLAS_CORETYPE=core in the ranks' environment); returns `serial` with its floor filled in.
inline Trained measure_noise(Trained serial, const std::function<Trained(const std::string& core)>& rerun) {
  for (const std::string& core : other_blas_cores()) {
    const Trained other = rerun(core);
    if (other.losses.size() != serial.losses.size() || other.params.size() != serial.params.size()) continue;
    serial.noise.cores.push_back(core);
    for (size_t i = 0; i < serial.losses.size(); ++i)
      serial.noise.loss =
          std::max(serial.noise.loss, std::abs(other.losses[i] - serial.losses[i]) / std::abs(serial.losses[i]));
    for (const auto& entry : serial.params) {
      auto it = other.params.find(entry.first);
      if (it == other.params.end() || it->second.size() != entry.second.size()) continue;
      double& floor = serial.noise.params[entry.first];
      floor = std::max(floor, rel_l2(it->second, entry.second));
    }
  }
  return serial;
}

// The bound a parallel run's tensor `name` (or, with name empty, its losses) must meet against
// `serial`: `fixed`, or kNoiseFactor times serial's measured floor where that is larger.
inline double parity_bound(const Trained& serial, const std::string& name, double fixed) {
  double floor = serial.noise.loss;
  if (!name.empty()) {
    auto it = serial.noise.params.find(name);
    floor = it == serial.noise.params.end() ? 0 : it->second;
  }
  return std::max(fixed, kNoiseFactor * floor);
}

}  // namespace recipe::testing
