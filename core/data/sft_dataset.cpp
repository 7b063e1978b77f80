// Packing conversations with their loss masks into training sequences (see sft_dataset.hpp).
#include "core/data/sft_dataset.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "core/data/counter_rng.hpp"

namespace recipe::data {

namespace {
constexpr uint64_t kPackStream = 0x7061636b;  // "pack"
constexpr size_t kCachedEpochs = 2;
}  // namespace

SftDataset::SftDataset(std::shared_ptr<const IndexedDataset> data, std::shared_ptr<const LossMask> mask,
                       DocumentRange documents, int seq_length, uint64_t seed, bool pack, int32_t pad_id,
                       int64_t vocab_size, const std::string& label, int max_samples_per_pack)
    : data_(std::move(data)),
      mask_(std::move(mask)),
      documents_(documents),
      seq_length_(seq_length),
      seed_(seed),
      pad_id_(pad_id),
      vocab_size_(vocab_size) {
  if (!data_ || !mask_) throw std::invalid_argument("SftDataset: no dataset or no loss mask");
  name_ = data_->prefix() + (label.empty() ? "" : " (" + label + ")");
  if (seq_length_ < 1) throw std::runtime_error(name_ + ": model.seq_length must be ≥ 1");
  if (documents_.begin < 0 || documents_.end > data_->num_documents() || documents_.begin > documents_.end)
    throw std::runtime_error(name_ + ": document range outside the dataset's " +
                             std::to_string(data_->num_documents()) + " documents");
  if (documents_.size() < 1)
    throw std::runtime_error(name_ +
                             ": no conversations in this split; add data or give it a larger share in "
                             "data.split");
  const int64_t T = seq_length_;
  int64_t used = 0, in_pack = 0;
  for (int64_t d = documents_.begin; d < documents_.end; ++d) {
    const int64_t L = data_->document_length(d);
    const bool fits =
        pack && used > 0 && used + L <= T && (max_samples_per_pack <= 0 || in_pack < max_samples_per_pack);
    if (!fits) {
      pack_begin_.push_back(d);
      used = 0;
      in_pack = 0;
    }
    used += std::min(L, T);
    ++in_pack;
    if (L > T + 1) ++stats_.truncated;
  }
  pack_begin_.push_back(documents_.end);
  stats_.conversations = documents_.size();
  stats_.packs = size();
  // Trained targets per pack, from the filled sequences themselves, so the count the trainer
  // divides by is the count of targets ≥ 0 it uploads.
  pack_trained_.assign(static_cast<size_t>(stats_.packs), 0);
  Sequence s;
  for (int64_t k = 0; k < stats_.packs; ++k) {
    fill(k, s, &stats_.untrained);
    const auto n = std::count_if(s.targets.begin(), s.targets.end(), [](int32_t t) { return t >= 0; });
    pack_trained_[static_cast<size_t>(k)] = n;
    stats_.trained_tokens += n;
    stats_.padding += T - s.cu_seqlens.back();
  }
  if (stats_.trained_tokens == 0)
    throw std::runtime_error(
        name_ + ": none of its " + std::to_string(stats_.conversations) +
        " conversations has a trained token within model.seq_length+1 = " + std::to_string(T + 1) +
        " tokens (their loss mask is 0 there" +
        (stats_.truncated > 0 ? "; " + std::to_string(stats_.truncated) + " are cut to that length" : std::string()) +
        "), so the loss would be 0 at every step; raise model.seq_length, shorten the prompts, or prepare the data "
        "again (`recipe data prepare --format chat`) so that the answers are marked as trained");
}

std::vector<int64_t> SftDataset::pack_documents(int64_t k) const {
  std::vector<int64_t> docs(
      static_cast<size_t>(pack_begin_[static_cast<size_t>(k) + 1] - pack_begin_[static_cast<size_t>(k)]));
  std::iota(docs.begin(), docs.end(), pack_begin_[static_cast<size_t>(k)]);
  return docs;
}

std::shared_ptr<const std::vector<int64_t>> SftDataset::epoch_order(int64_t e) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = orders_.find(e); it != orders_.end()) return it->second;
  }
  auto order = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(size()));
  std::iota(order->begin(), order->end(), int64_t{0});
  shuffle_with_key(*order, hash_combine(hash_combine(seed_, static_cast<uint64_t>(e)), kPackStream));
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = orders_.emplace(e, std::move(order));
  auto result = it->second;
  // Reading moves forward through epochs: drop the oldest.
  while (orders_.size() > kCachedEpochs) orders_.erase(orders_.begin());
  return result;
}

int64_t SftDataset::pack_of(int64_t idx) const {
  if (idx < 0) throw std::out_of_range(name_ + ": negative sample index " + std::to_string(idx));
  const int64_t n = size();
  return (*epoch_order(idx / n))[static_cast<size_t>(idx % n)];
}

void SftDataset::fill(int64_t pack, Sequence& out, int64_t* untrained) const {
  const size_t T = static_cast<size_t>(seq_length_);
  out.inputs.assign(T, pad_id_);
  out.targets.assign(T, -1);
  out.positions.assign(T, 0);
  out.cu_seqlens.assign(1, 0);
  std::vector<int32_t> tok;
  std::vector<uint8_t> m;
  size_t o = 0;
  for (int64_t d = pack_begin_[static_cast<size_t>(pack)]; d < pack_begin_[static_cast<size_t>(pack) + 1]; ++d) {
    const size_t L = static_cast<size_t>(data_->document_length(d));
    const size_t n = std::min(L, T - o);     // positions it occupies (L unless cut)
    const size_t read = std::min(L, n + 1);  // its tokens seen: inputs plus the last target
    tok.resize(read);
    m.resize(read);
    data_->read_document(d, 0, static_cast<int64_t>(read), tok.data());
    mask_->read_document(d, 0, static_cast<int64_t>(read), m.data());
    if (vocab_size_ > 0)
      for (int32_t id : tok)
        if (id < 0 || id >= vocab_size_)
          throw std::runtime_error(data_->bin_path() + " holds token id " + std::to_string(id) +
                                   " outside model.vocab_size=" + std::to_string(vocab_size_) +
                                   ": the data was tokenized with a different vocabulary than the model's");
    bool trained = false;
    for (size_t t = 0; t < n; ++t) {
      out.inputs[o + t] = tok[t];
      out.positions[o + t] = static_cast<int32_t>(t);
      if (t + 1 < read && m[t + 1] != 0) {
        out.targets[o + t] = tok[t + 1];
        trained = true;
      }
    }
    if (untrained && !trained) ++*untrained;
    o += n;
    out.cu_seqlens.push_back(static_cast<int32_t>(o));
  }
  // The padding is one run of positions 0, 1, ...: one more "sample" that no token outside it
  // attends to and that has no targets, so a row holds at most max_samples_per_pack + 1 samples.
  for (size_t t = o; t < T; ++t) out.positions[t] = static_cast<int32_t>(t - o);
}

void SftDataset::sequence(int64_t idx, Sequence& out) const { fill(pack_of(idx), out); }

void SftDataset::sample(int64_t idx, int32_t* out) const {
  Sequence s;
  sequence(idx, s);
  std::copy(s.inputs.begin(), s.inputs.end(), out);
  out[seq_length_] = pad_id_;
}

}  // namespace recipe::data
