// The pipeline split's cost model and the balancing (pipeline_split.hpp).
#include "plan/pipeline_split.hpp"

#include <algorithm>

#include "plan/model_size.hpp"

namespace recipe::plan {

double head_cost_in_layers(const ModelConfig& m) {
  const double attention_width = static_cast<double>(m.num_attention_heads) * m.head_dim;
  const double layer = 6.0 * static_cast<double>(layer_params(m).total()) + 12.0 * attention_width * m.seq_length;
  const double head = 6.0 * static_cast<double>(m.hidden_size) * static_cast<double>(m.padded_vocab_size);
  return layer > 0 ? head / layer : 0.0;
}

std::vector<int> even_stage_layers(int num_layers, int chunks) {
  chunks = std::max(1, chunks);
  std::vector<int> counts(static_cast<size_t>(chunks), num_layers / chunks);
  for (int c = 0; c < num_layers % chunks; ++c) ++counts[static_cast<size_t>(c)];
  return counts;
}

std::vector<double> stage_loads(const std::vector<int>& chunk_layers, int pp, double head_layers) {
  pp = std::max(1, pp);
  std::vector<double> loads(static_cast<size_t>(pp), 0.0);
  for (size_t c = 0; c < chunk_layers.size(); ++c) loads[c % static_cast<size_t>(pp)] += chunk_layers[c];
  loads.back() += head_layers;
  return loads;
}

double heaviest_stage_load(const std::vector<int>& chunk_layers, int pp, double head_layers) {
  const std::vector<double> loads = stage_loads(chunk_layers, pp, head_layers);
  return *std::max_element(loads.begin(), loads.end());
}

std::vector<int> balanced_stage_layers(int num_layers, int pp, int virtual_pp, double head_layers) {
  pp = std::max(1, pp);
  const int chunks = pp * std::max(1, virtual_pp);
  std::vector<int> counts = even_stage_layers(num_layers, chunks);
  if (pp == 1 || chunks > num_layers) return counts;
  // The chunks of stage s are s, s+pp, ...: give from the largest (the last one on ties, nearest
  // the head), take into the smallest (the first one on ties).
  const auto chunk_of = [&](int stage, bool largest) {
    int best = -1;
    for (int c = stage; c < chunks; c += pp) {
      const int n = counts[static_cast<size_t>(c)];
      if (best < 0 || (largest ? n >= counts[static_cast<size_t>(best)] : n < counts[static_cast<size_t>(best)]))
        best = c;
    }
    return best;
  };
  // Each move lowers the sum of squared loads, so the loop ends; num_layers bounds it anyway.
  for (int moves = 0; moves < num_layers * chunks; ++moves) {
    const std::vector<double> loads = stage_loads(counts, pp, head_layers);
    const auto heavy = static_cast<int>(std::max_element(loads.begin(), loads.end()) - loads.begin());
    const auto light = static_cast<int>(std::min_element(loads.begin(), loads.end()) - loads.begin());
    const int from = chunk_of(heavy, true), to = chunk_of(light, false);
    if (heavy == light || counts[static_cast<size_t>(from)] <= 1) break;
    if (loads[static_cast<size_t>(light)] + 1.0 >= loads[static_cast<size_t>(heavy)]) break;
    --counts[static_cast<size_t>(from)];
    ++counts[static_cast<size_t>(to)];
  }
  return counts;
}

}  // namespace recipe::plan
