// Supervised fine-tuning samples (data.kind=sft): whole conversations of an indexed dataset with its
// loss mask (<prefix>.mask.bin), packed into sequences of T = model.seq_length positions.
//
// Packing (done once, at construction, over the document range in dataset order): greedy in order;
// a conversation of L tokens occupies L positions, so it joins the current pack while
// used + L ≤ T and the pack holds fewer than max_samples_per_pack conversations, otherwise the pack
// is closed and a new one starts. A conversation with L > T stands alone in its pack, cut to T
// positions (it loses predictions only when L > T + 1: the truncated count in stats()). With
// pack = false every conversation is its own pack. Padding (pad id, target -1, positions 0, 1, ...
// as one more sample) fills only the end of a pack.
//
// Targets (Sequence::targets): position t of a conversation holds token t and predicts token t+1,
// which is trained iff its mask byte is 1; the conversation's last position would predict the
// first token of the next one and is -1, as are untrained tokens and padding. Positions restart at
// 0 per conversation; cu_seqlens gives the boundaries (sample_source.hpp).
//
// Epochs: the packs are fixed; epoch e reads them in an order shuffled by key (seed, e), so global
// index idx is pack shuffle_e[idx mod n] with e = idx / n. Pure in idx, like GPTDataset.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/data/indexed_dataset.hpp"
#include "core/data/loss_mask.hpp"
#include "core/data/sample_source.hpp"
#include "plan/data_split.hpp"

namespace recipe::data {

class SftDataset : public SampleSource {
 public:
  struct Stats {
    int64_t conversations = 0, packs = 0;
    int64_t truncated = 0;       // conversations longer than T + 1 tokens, cut (their tail is not trained)
    int64_t untrained = 0;       // conversations with no trained target in the positions they occupy
    int64_t trained_tokens = 0;  // targets ≥ 0 over all packs of one epoch
    int64_t padding = 0;         // padding positions over all packs of one epoch
  };

  // vocab_size > 0: every token read must be in [0, vocab_size). pad_id is the input id of padding
  // positions (any id of the vocabulary; it is never a target). max_samples_per_pack > 0: a pack
  // holds at most that many conversations (data.max_samples_per_pack: the bound lets cuDNN's ragged
  // attention size its per-sample work). Throws when the range holds no conversation, or when no
  // conversation has a trained target within its first T + 1 tokens (nothing would be learned or
  // measured: the loss would be 0 at every step).
  SftDataset(std::shared_ptr<const IndexedDataset> data, std::shared_ptr<const LossMask> mask, DocumentRange documents,
             int seq_length, uint64_t seed, bool pack, int32_t pad_id = 0, int64_t vocab_size = 0,
             const std::string& label = "", int max_samples_per_pack = 0);

  int seq_plus_one() const override { return seq_length_ + 1; }
  int64_t size() const override { return static_cast<int64_t>(pack_begin_.size()) - 1; }
  // The pack's inputs followed by the pad id (unmasked; the trainer reads sequence()).
  void sample(int64_t idx, int32_t* out) const override;
  bool loss_masked() const override { return true; }
  void sequence(int64_t idx, Sequence& out) const override;
  int64_t trained_tokens(int64_t idx) const override { return pack_trained_[static_cast<size_t>(pack_of(idx))]; }

  const Stats& stats() const { return stats_; }
  // Which pack (0 ≤ k < size(), in packing order) global index idx reads.
  int64_t pack_of(int64_t idx) const;
  // The absolute document ids packed in pack k, in order.
  std::vector<int64_t> pack_documents(int64_t k) const;

 private:
  // untrained (optional): += the pack's conversations that got no trained target.
  void fill(int64_t pack, Sequence& out, int64_t* untrained = nullptr) const;
  std::shared_ptr<const std::vector<int64_t>> epoch_order(int64_t epoch) const;

  std::shared_ptr<const IndexedDataset> data_;
  std::shared_ptr<const LossMask> mask_;
  DocumentRange documents_;
  int seq_length_;
  uint64_t seed_;
  int32_t pad_id_;
  int64_t vocab_size_;
  std::string name_;
  std::vector<int64_t> pack_begin_;    // packs + 1 entries: pack k holds documents [begin[k], begin[k+1]) (absolute)
  std::vector<int64_t> pack_trained_;  // per pack: targets ≥ 0
  Stats stats_;

  mutable std::mutex mutex_;
  mutable std::map<int64_t, std::shared_ptr<const std::vector<int64_t>>> orders_;  // the two latest epochs
};

}  // namespace recipe::data
