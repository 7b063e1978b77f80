// SampleSource's defaults: an unmasked sample is one sequence whose targets are the next tokens.
#include "core/data/sample_source.hpp"

#include <numeric>

namespace recipe::data {

SampleSource::~SampleSource() = default;

void SampleSource::sequence(int64_t idx, Sequence& out) const {
  const int T = seq_plus_one() - 1;
  std::vector<int32_t> row(static_cast<size_t>(T) + 1);
  sample(idx, row.data());
  out.inputs.assign(row.begin(), row.end() - 1);
  out.targets.assign(row.begin() + 1, row.end());
  out.positions.resize(static_cast<size_t>(T));
  std::iota(out.positions.begin(), out.positions.end(), 0);
  out.cu_seqlens = {0, T};
}

int64_t SampleSource::trained_tokens(int64_t /*idx*/) const { return seq_plus_one() - 1; }

}  // namespace recipe::data
