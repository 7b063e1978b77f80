// Reading micro-batches of token ids for the trainer (see token_loader.hpp).
#include "core/train/token_loader.hpp"

#include <algorithm>
#include <cstddef>

#include "core/model/ring_attention.hpp"
#include "core/model/token_rows.hpp"

namespace recipe::core {

TokenLoader::TokenLoader(int micro_batch, int seq, int vocab, int cp, int cp_rank)
    : B_(micro_batch),
      T_(seq),
      vocab_(vocab),
      cp_(cp),
      cp_rank_(cp_rank),
      rows_(size_t(micro_batch) * size_t(seq + 1)) {}

// Local row t of sample b is global position g (cp_global_position): input = the sample's token g,
// target = token g + 1 (unmasked rows), or the split inputs / targets at g (masked streams).
void TokenLoader::take_chunks() {
  const int Tl = T_ / cp_;
  local_inputs_.resize(size_t(B_) * size_t(Tl));
  local_targets_.resize(size_t(B_) * size_t(Tl));
  for (int b = 0; b < B_; ++b)
    for (int t = 0; t < Tl; ++t) {
      const size_t g = size_t(cp_global_position(cp_, cp_rank_, t, Tl)), l = size_t(b) * size_t(Tl) + size_t(t);
      if (masked_) {
        local_inputs_[l] = inputs_[size_t(b) * size_t(T_) + g];
        local_targets_[l] = targets_[size_t(b) * size_t(T_) + g];
      } else {
        local_inputs_[l] = rows_[size_t(b) * size_t(T_ + 1) + g];
        local_targets_[l] = rows_[size_t(b) * size_t(T_ + 1) + g + 1];
      }
    }
}

void TokenLoader::read(const data::SampleSource& src, int64_t first) {
  masked_ = src.loss_masked();
  if (!masked_) {
    const size_t row = size_t(T_) + 1;
    for (int b = 0; b < B_; ++b) src.sample(first + b, rows_.data() + size_t(b) * row);
    if (cp_ > 1) take_chunks();
    return;
  }
  sequences_.resize(size_t(B_));
  inputs_.resize(size_t(B_) * size_t(T_));
  targets_.resize(size_t(B_) * size_t(T_));
  positions_.resize(size_t(B_) * size_t(T_));
  for (int b = 0; b < B_; ++b) {
    data::Sequence& s = sequences_[size_t(b)];
    src.sequence(first + b, s);
    std::copy(s.inputs.begin(), s.inputs.end(), inputs_.begin() + ptrdiff_t(b) * T_);
    std::copy(s.targets.begin(), s.targets.end(), targets_.begin() + ptrdiff_t(b) * T_);
    std::copy(s.positions.begin(), s.positions.end(), positions_.begin() + ptrdiff_t(b) * T_);
  }
  if (cp_ > 1) take_chunks();
}

void TokenLoader::load(const data::SampleSource& src, int64_t first, Model& model, int slot) {
  read(src, first);
  reload(model, slot);
}

void TokenLoader::reload(Model& model, int slot) const {
  if (cp_ > 1)  // not packed (the resolver): the positions stay unread
    model.load_split_tokens(slot, local_inputs_.data(), local_targets_.data());
  else if (masked_)
    model.load_split_tokens(slot, inputs_.data(), targets_.data(), positions_.data());
  else
    model.load_tokens(slot, rows_.data());
}

void TokenLoader::split(const data::SampleSource& src, int64_t first, int32_t* inputs, int32_t* targets) {
  read(src, first);
  if (cp_ > 1) {
    check_split_tokens(local_inputs_.data(), local_targets_.data(), B_, T_ / cp_, vocab_);
    std::copy(local_inputs_.begin(), local_inputs_.end(), inputs);
    std::copy(local_targets_.begin(), local_targets_.end(), targets);
    return;
  }
  if (!masked_) {
    split_token_rows(rows_.data(), B_, T_, vocab_, inputs, targets);
    return;
  }
  check_split_tokens(inputs_.data(), targets_.data(), B_, T_, vocab_);
  std::copy(inputs_.begin(), inputs_.end(), inputs);
  std::copy(targets_.begin(), targets_.end(), targets);
}

}  // namespace recipe::core
