#include "core/data/blended_source.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace recipe::data {

BlendedSource::BlendedSource(std::vector<std::pair<double, std::unique_ptr<SampleSource>>> sources, int64_t block)
    : block_(block) {
  if (sources.empty()) throw std::runtime_error("data.blend: no datasets to blend");
  if (sources.size() > std::numeric_limits<uint16_t>::max())
    throw std::runtime_error("data.blend: more than 65535 datasets");
  if (block_ < 1 || block_ > UINT32_MAX) throw std::invalid_argument("BlendedSource: block must be in [1, 2^32)");
  double total = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    const double w = sources[i].first;
    if (!(w > 0) || !std::isfinite(w))
      throw std::runtime_error("data.blend: weight " + std::to_string(w) + " of entry " + std::to_string(i + 1) +
                               " must be a positive number");
    if (!sources[i].second) throw std::invalid_argument("BlendedSource: null source");
    total += w;
  }
  seq_plus_one_ = sources[0].second->seq_plus_one();
  double size_bound = std::numeric_limits<double>::infinity();
  for (auto& [w, src] : sources) {
    if (src->seq_plus_one() != seq_plus_one_)
      throw std::invalid_argument("BlendedSource: sources disagree on the sample length");
    weights_.push_back(w / total);
    size_bound = std::min(size_bound, static_cast<double>(src->size()) / weights_.back());
    sources_.push_back(std::move(src));
  }
  size_ = size_bound >= 9.2e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(size_bound);

  const size_t n = sources_.size();
  block_count_.assign(n, 0);
  slot_source_.resize(static_cast<size_t>(block_));
  slot_rank_.resize(static_cast<size_t>(block_));
  for (int64_t i = 0; i < block_; ++i) {
    const double x = static_cast<double>(std::max<int64_t>(i, 1));
    size_t best = 0;
    double best_error = weights_[0] * x - static_cast<double>(block_count_[0]);
    for (size_t d = 1; d < n; ++d) {
      const double error = weights_[d] * x - static_cast<double>(block_count_[d]);
      if (error > best_error) {
        best_error = error;
        best = d;
      }
    }
    slot_source_[static_cast<size_t>(i)] = static_cast<uint16_t>(best);
    slot_rank_[static_cast<size_t>(i)] = static_cast<uint32_t>(block_count_[best]++);
  }
}

std::pair<int, int64_t> BlendedSource::locate(int64_t idx) const {
  if (idx < 0) throw std::out_of_range("blended data: negative sample index " + std::to_string(idx));
  const int64_t blk = idx / block_;
  const size_t slot = static_cast<size_t>(idx % block_);
  const int d = slot_source_[slot];
  return {d, blk * block_count_[static_cast<size_t>(d)] + static_cast<int64_t>(slot_rank_[slot])};
}

void BlendedSource::sample(int64_t idx, int32_t* out) const {
  const auto [d, j] = locate(idx);
  sources_[static_cast<size_t>(d)]->sample(j, out);
}

void BlendedSource::sequence(int64_t idx, Sequence& out) const {
  const auto [d, j] = locate(idx);
  sources_[static_cast<size_t>(d)]->sequence(j, out);
}

int64_t BlendedSource::trained_tokens(int64_t idx) const {
  const auto [d, j] = locate(idx);
  return sources_[static_cast<size_t>(d)]->trained_tokens(j);
}

}  // namespace recipe::data
