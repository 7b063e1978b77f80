// GPT sample indexing over a document range of an indexed dataset (Megatron GPTDataset semantics).
//
// Epoch e: the range's documents in an order shuffled by key (seed, e); their tokens concatenated
// form a stream of T tokens; sample k of the epoch is the window [k·seq, k·seq + seq + 1) of that
// stream (consecutive samples overlap by one token, so every token but the last is once an input and
// every token but the first once a label); n = (T - 1) / seq samples per epoch, the tail that does
// not fill a window is dropped; the n samples are read in an order shuffled by key (seed, e).
// Global sample idx lives in epoch idx / n at shuffled position idx mod n.
//
// Per epoch three arrays are built, as Megatron does: doc_idx (the shuffled document order),
// sample_idx (for each sample, the position in doc_idx and token offset where it starts) and
// shuffle_idx. Epoch 0 is built at construction; later epochs on first use, cached (the two most
// recently used are kept). Building is deterministic, so the cache never changes what is read.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/data/indexed_dataset.hpp"
#include "core/data/sample_source.hpp"
#include "plan/data_split.hpp"

namespace recipe::data {

class GPTDataset : public SampleSource {
 public:
  // vocab_size > 0: every sample read is checked to hold ids in [0, vocab_size) (a tokenizer/model
  // mismatch is an error naming the file). Throws when the range holds fewer than seq+1 tokens.
  GPTDataset(std::shared_ptr<const IndexedDataset> data, DocumentRange documents, int seq_length, uint64_t seed,
             int64_t vocab_size = 0, std::string label = "");

  int seq_plus_one() const override { return seq_length_ + 1; }
  int64_t size() const override { return samples_per_epoch_; }
  void sample(int64_t idx, int32_t* out) const override;

  int64_t tokens_per_epoch() const { return tokens_; }
  const DocumentRange& documents() const { return documents_; }
  // The shuffled document order of an epoch (absolute document ids), for inspection and tests.
  std::vector<int64_t> document_order(int64_t epoch) const;
  // Which epoch-local window (k: tokens [k·seq, k·seq+seq+1) of the epoch's stream) idx reads.
  int64_t window_of(int64_t idx) const;

 private:
  struct Epoch {
    std::vector<int64_t> doc_idx;        // absolute document ids in reading order
    std::vector<int64_t> sample_doc;     // per window: position in doc_idx where it starts
    std::vector<int64_t> sample_offset;  // per window: token offset inside that document
    std::vector<int64_t> shuffle_idx;    // epoch-local sample position → window
  };
  std::shared_ptr<const Epoch> build_epoch(int64_t epoch) const;
  std::shared_ptr<const Epoch> epoch(int64_t e) const;
  int64_t document_length(int64_t doc) const { return doc_lengths_[static_cast<size_t>(doc - documents_.begin)]; }

  std::shared_ptr<const IndexedDataset> data_;
  DocumentRange documents_;
  int seq_length_;
  uint64_t seed_;
  int64_t vocab_size_;
  std::string label_;
  std::vector<int64_t> doc_lengths_;
  int64_t tokens_ = 0;
  int64_t samples_per_epoch_ = 0;

  mutable std::mutex mutex_;
  mutable std::map<int64_t, std::shared_ptr<const Epoch>> cache_;
  mutable std::map<int64_t, uint64_t> last_use_;
  mutable uint64_t use_clock_ = 0;
};

}  // namespace recipe::data
