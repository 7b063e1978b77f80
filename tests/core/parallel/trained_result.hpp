// What a train_probe world left behind (losses.txt, params-<rank>.txt), reassembled into global
// tensors, for the parallel-vs-serial tests (training parity, checkpoint resharding).
#pragma once

#include <unistd.h>

#include <cmath>
#include <filesystem>
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

struct Trained {
  std::vector<double> losses;
  std::map<std::string, std::vector<double>> params;  // global tensors
  std::string problems;                               // replica disagreements
  // How rank 0's steps ran (train_probe's step-0.txt): the device step, and how many steps were
  // CUDA-graph launches; -1 when the probe did not say.
  int device_step = -1, graph_steps = -1;
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

}  // namespace recipe::testing
