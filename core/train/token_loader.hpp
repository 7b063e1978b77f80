// The trainer's one token-loading routine: reads a micro-batch of samples (B rows of T+1 token
// ids) from a data stream and hands it to the model — uploaded into an activation slot
// (Model::load_tokens), or checked and split into host memory that a recorded CUDA-graph step
// uploads from (split_token_rows, the same check and split).
//
// Masked streams (data.kind=sft, SampleSource::loss_masked) are read as Sequences instead: inputs
// and targets (-1 = no loss) come split, and each row's positions and sample boundaries
// (cu_seqlens) are kept here (sequences()); the positions go to the model with the tokens, which
// a packed model (data.pack=true) uses for per-sample RoPE and attention that never crosses a
// sample boundary.
#pragma once

#include <cstdint>
#include <vector>

#include "core/data/sample_source.hpp"
#include "core/model/model.hpp"

namespace recipe::core {

class TokenLoader {
 public:
  // cp > 1 (context parallelism): the samples are read whole (every CP rank of a DP rank reads the
  // same ones), and this rank keeps its two chunks of each (ring_attention.hpp): the model sees
  // B rows of seq / cp inputs and targets, each target the token after its input in the sample.
  TokenLoader(int micro_batch, int seq, int vocab, int cp = 1, int cp_rank = 0);

  // Samples [first, first + B) into the model's slot `slot` (inputs on the first stage, targets
  // on the last; the upload waits for the copy).
  void load(const data::SampleSource& src, int64_t first, Model& model, int slot);
  // Uploads the micro-batch read last into the slot again (phase timing's extra forward).
  void reload(Model& model, int slot) const;
  // Samples [first, first + B) checked and split into inputs / targets (each [B·T], host).
  void split(const data::SampleSource& src, int64_t first, int32_t* inputs, int32_t* targets);
  // The micro-batch read last as B Sequences (masked streams only; empty otherwise).
  const std::vector<data::Sequence>& sequences() const { return sequences_; }

 private:
  void read(const data::SampleSource& src, int64_t first);
  // CP: this rank's chunks of the micro-batch read last into local_inputs_ / local_targets_.
  void take_chunks();
  int B_, T_, vocab_;
  int cp_ = 1, cp_rank_ = 0;
  std::vector<int32_t> local_inputs_, local_targets_;  // [B·T/cp] CP only
  bool masked_ = false;                                // the last micro-batch came from a masked stream
  std::vector<int32_t> rows_;                          // [B, T+1], the micro-batch read last (unmasked streams)
  std::vector<int32_t> inputs_;                        // [B·T] masked streams: inputs of the micro-batch read last
  std::vector<int32_t> targets_;                       // [B·T] and its targets
  std::vector<int32_t> positions_;                     // [B·T] and each token's position in its sample
  std::vector<data::Sequence> sequences_;
};

}  // namespace recipe::core
