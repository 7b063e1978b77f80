#include "core/data/gpt_dataset.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "core/data/counter_rng.hpp"

namespace recipe::data {

namespace {
constexpr uint64_t kDocumentStream = 0x646f6373;  // "docs"
constexpr uint64_t kSampleStream = 0x736d706c;    // "smpl"
constexpr size_t kCachedEpochs = 2;
}  // namespace

GPTDataset::GPTDataset(std::shared_ptr<const IndexedDataset> data, DocumentRange documents, int seq_length,
                       uint64_t seed, int64_t vocab_size, std::string label)
    : data_(std::move(data)),
      documents_(documents),
      seq_length_(seq_length),
      seed_(seed),
      vocab_size_(vocab_size),
      label_(std::move(label)) {
  if (!data_) throw std::invalid_argument("GPTDataset: no indexed dataset");
  const std::string name = data_->prefix() + (label_.empty() ? "" : " (" + label_ + ")");
  if (seq_length_ < 1) throw std::runtime_error(name + ": model.seq_length must be ≥ 1");
  if (documents_.begin < 0 || documents_.end > data_->num_documents() || documents_.begin > documents_.end) {
    throw std::runtime_error(name + ": document range [" + std::to_string(documents_.begin) + ", " +
                             std::to_string(documents_.end) + ") is outside the dataset's " +
                             std::to_string(data_->num_documents()) + " documents");
  }
  doc_lengths_.reserve(static_cast<size_t>(documents_.size()));
  for (int64_t d = documents_.begin; d < documents_.end; ++d) {
    doc_lengths_.push_back(data_->document_length(d));
    tokens_ += doc_lengths_.back();
  }
  samples_per_epoch_ = tokens_ > 0 ? (tokens_ - 1) / seq_length_ : 0;
  if (samples_per_epoch_ < 1) {
    throw std::runtime_error(
        name + ": documents [" + std::to_string(documents_.begin) + ", " + std::to_string(documents_.end) + ") hold " +
        std::to_string(tokens_) +
        " tokens, fewer than one sample of model.seq_length+1 = " + std::to_string(seq_length_ + 1) +
        "; add data, lower model.seq_length, or give this split a larger share in data.split");
  }
  epoch(0);  // build now: construction is where cost and errors belong
}

std::shared_ptr<const GPTDataset::Epoch> GPTDataset::build_epoch(int64_t e) const {
  auto ep = std::make_shared<Epoch>();
  const uint64_t epoch_key = hash_combine(seed_, static_cast<uint64_t>(e));

  ep->doc_idx.resize(static_cast<size_t>(documents_.size()));
  std::iota(ep->doc_idx.begin(), ep->doc_idx.end(), documents_.begin);
  shuffle_with_key(ep->doc_idx, hash_combine(epoch_key, kDocumentStream));

  const size_t n = static_cast<size_t>(samples_per_epoch_);
  ep->sample_doc.resize(n);
  ep->sample_offset.resize(n);
  size_t pos = 0;
  int64_t consumed = 0;  // tokens of the documents before doc_idx[pos]
  for (size_t k = 0; k < n; ++k) {
    const int64_t start = static_cast<int64_t>(k) * seq_length_;
    while (consumed + document_length(ep->doc_idx[pos]) <= start) consumed += document_length(ep->doc_idx[pos++]);
    ep->sample_doc[k] = static_cast<int64_t>(pos);
    ep->sample_offset[k] = start - consumed;
  }

  ep->shuffle_idx.resize(n);
  std::iota(ep->shuffle_idx.begin(), ep->shuffle_idx.end(), int64_t{0});
  shuffle_with_key(ep->shuffle_idx, hash_combine(epoch_key, kSampleStream));
  return ep;
}

std::shared_ptr<const GPTDataset::Epoch> GPTDataset::epoch(int64_t e) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(e);
    if (it != cache_.end()) {
      last_use_[e] = ++use_clock_;
      return it->second;
    }
  }
  // Built outside the lock: two threads may both build the same epoch, with identical results.
  auto built = build_epoch(e);
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = cache_.emplace(e, built);
  last_use_[e] = ++use_clock_;
  while (cache_.size() > kCachedEpochs) {
    auto oldest = std::min_element(last_use_.begin(), last_use_.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
    cache_.erase(oldest->first);
    last_use_.erase(oldest);
  }
  return it->second;
}

int64_t GPTDataset::window_of(int64_t idx) const {
  if (idx < 0) throw std::out_of_range("GPTDataset: negative sample index " + std::to_string(idx));
  const auto ep = epoch(idx / samples_per_epoch_);
  return ep->shuffle_idx[static_cast<size_t>(idx % samples_per_epoch_)];
}

std::vector<int64_t> GPTDataset::document_order(int64_t e) const { return epoch(e)->doc_idx; }

void GPTDataset::sample(int64_t idx, int32_t* out) const {
  if (idx < 0) throw std::out_of_range("GPTDataset: negative sample index " + std::to_string(idx));
  const auto ep = epoch(idx / samples_per_epoch_);
  const size_t window = static_cast<size_t>(ep->shuffle_idx[static_cast<size_t>(idx % samples_per_epoch_)]);
  size_t pos = static_cast<size_t>(ep->sample_doc[window]);
  int64_t offset = ep->sample_offset[window];
  int64_t remaining = seq_length_ + 1;
  int32_t* dst = out;
  while (remaining > 0) {  // the window fits: n·seq + 1 ≤ T by the choice of n
    const int64_t doc = ep->doc_idx[pos];
    const int64_t take = std::min(remaining, document_length(doc) - offset);
    if (take > 0) {
      data_->read_document(doc, offset, take, dst);
      dst += take;
      remaining -= take;
    }
    ++pos;
    offset = 0;
  }
  if (vocab_size_ > 0) {
    for (int i = 0; i <= seq_length_; ++i) {
      if (out[i] < 0 || out[i] >= vocab_size_) {
        throw std::runtime_error(data_->bin_path() + " holds token id " + std::to_string(out[i]) +
                                 " outside model.vocab_size=" + std::to_string(vocab_size_) +
                                 ": the data was tokenized with a different vocabulary than the model's");
      }
    }
  }
}

}  // namespace recipe::data
