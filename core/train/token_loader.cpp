// Reading micro-batches of token ids for the trainer (see token_loader.hpp).
#include "core/train/token_loader.hpp"

#include <algorithm>
#include <cstddef>

#include "core/model/token_rows.hpp"

namespace recipe::core {

TokenLoader::TokenLoader(int micro_batch, int seq, int vocab)
    : B_(micro_batch), T_(seq), vocab_(vocab), rows_(size_t(micro_batch) * size_t(seq + 1)) {}

void TokenLoader::read(const data::SampleSource& src, int64_t first) {
  masked_ = src.loss_masked();
  if (!masked_) {
    const size_t row = size_t(T_) + 1;
    for (int b = 0; b < B_; ++b) src.sample(first + b, rows_.data() + size_t(b) * row);
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
}

void TokenLoader::load(const data::SampleSource& src, int64_t first, Model& model, int slot) {
  read(src, first);
  reload(model, slot);
}

void TokenLoader::reload(Model& model, int slot) const {
  if (masked_)
    model.load_split_tokens(slot, inputs_.data(), targets_.data(), positions_.data());
  else
    model.load_tokens(slot, rows_.data());
}

void TokenLoader::split(const data::SampleSource& src, int64_t first, int32_t* inputs, int32_t* targets) {
  read(src, first);
  if (!masked_) {
    split_token_rows(rows_.data(), B_, T_, vocab_, inputs, targets);
    return;
  }
  check_split_tokens(inputs_.data(), targets_.data(), B_, T_, vocab_);
  std::copy(inputs_.begin(), inputs_.end(), inputs);
  std::copy(targets_.begin(), targets_.end(), targets);
}

}  // namespace recipe::core
