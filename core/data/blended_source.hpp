// A weighted blend of sample sources (data.blend), interleaved deterministically.
//
// Assignment follows Megatron's blended dataset: for sample i (taking i = 1 for i = 0), pick the
// source whose shortfall w_d·i - taken_d is largest (lowest index on ties), then taken_d += 1; the
// sample is that source's taken_d-th. The greedy pass is run once over a block of B indices and the
// pattern is reused for every block: index idx reads block idx / B, slot idx mod B, so source d's
// sample number is (idx / B)·count_d + slot_rank. That keeps sample(idx) O(1) and pure for any idx
// with O(B) memory, and equals Megatron's sequence exactly for the first B samples. Every block holds
// each source within one sample of its share, so the mix stays on its weights at every scale.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/data/sample_source.hpp"

namespace recipe::data {

class BlendedSource : public SampleSource {
 public:
  static constexpr int64_t kDefaultBlock = int64_t{1} << 20;

  // Weights must be positive; they are normalized here. All sources must share seq_plus_one().
  BlendedSource(std::vector<std::pair<double, std::unique_ptr<SampleSource>>> sources, int64_t block = kDefaultBlock);

  int seq_plus_one() const override { return seq_plus_one_; }
  // Samples until the first source would need a second epoch: min over d of size_d / w_d.
  int64_t size() const override { return size_; }
  void sample(int64_t idx, int32_t* out) const override;
  // Masked when the sources are (all or none: make_source builds blends of one kind).
  bool loss_masked() const override { return sources_.front()->loss_masked(); }
  void sequence(int64_t idx, Sequence& out) const override;
  int64_t trained_tokens(int64_t idx) const override;

  // Which source and which of its samples global index idx reads.
  std::pair<int, int64_t> locate(int64_t idx) const;
  size_t num_sources() const { return sources_.size(); }

 private:
  std::vector<std::unique_ptr<SampleSource>> sources_;
  std::vector<double> weights_;
  int64_t block_;
  std::vector<uint16_t> slot_source_;  // per slot of a block: the source it reads
  std::vector<uint32_t> slot_rank_;    // per slot: that source's sample number within the block
  std::vector<int64_t> block_count_;   // per source: samples it gives in one block
  int seq_plus_one_ = 0;
  int64_t size_ = 0;
};

}  // namespace recipe::data
