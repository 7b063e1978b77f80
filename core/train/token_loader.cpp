// Reading micro-batches of token ids for the trainer (see token_loader.hpp).
#include "core/train/token_loader.hpp"

#include <cstddef>

#include "core/model/token_rows.hpp"

namespace recipe::core {

TokenLoader::TokenLoader(int micro_batch, int seq, int vocab)
    : B_(micro_batch), T_(seq), vocab_(vocab), rows_(size_t(micro_batch) * size_t(seq + 1)) {}

void TokenLoader::read(const data::SampleSource& src, int64_t first) {
  const size_t row = size_t(T_ + 1);
  for (int b = 0; b < B_; ++b) src.sample(first + b, rows_.data() + size_t(b) * row);
}

void TokenLoader::load(const data::SampleSource& src, int64_t first, Model& model, int slot) {
  read(src, first);
  model.load_tokens(slot, rows_.data());
}

void TokenLoader::reload(Model& model, int slot) const { model.load_tokens(slot, rows_.data()); }

void TokenLoader::split(const data::SampleSource& src, int64_t first, int32_t* inputs, int32_t* targets) {
  read(src, first);
  split_token_rows(rows_.data(), B_, T_, vocab_, inputs, targets);
}

}  // namespace recipe::core
