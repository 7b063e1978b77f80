// The trainer's one token-loading routine: reads a micro-batch of samples (B rows of T+1 token
// ids) from a data stream and hands it to the model — uploaded into an activation slot
// (Model::load_tokens), or checked and split into host memory that a recorded CUDA-graph step
// uploads from (split_token_rows, the same check and split).
#pragma once

#include <cstdint>
#include <vector>

#include "core/data/sample_source.hpp"
#include "core/model/model.hpp"

namespace recipe::core {

class TokenLoader {
 public:
  TokenLoader(int micro_batch, int seq, int vocab);

  // Samples [first, first + B) into the model's slot `slot` (inputs on the first stage, targets
  // on the last; the upload waits for the copy).
  void load(const data::SampleSource& src, int64_t first, Model& model, int slot);
  // Uploads the micro-batch read last into the slot again (phase timing's extra forward).
  void reload(Model& model, int slot) const;
  // Samples [first, first + B) checked and split into inputs / targets (each [B·T], host).
  void split(const data::SampleSource& src, int64_t first, int32_t* inputs, int32_t* targets);

 private:
  void read(const data::SampleSource& src, int64_t first);
  int B_, T_, vocab_;
  std::vector<int32_t> rows_;  // [B, T+1], the micro-batch read last
};

}  // namespace recipe::core
