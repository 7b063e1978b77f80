// The decode path of generation: a Model's forward over a KV cache, a few new tokens at a time.
//
// It is not a second model: it runs the Model's own bound weights (the family's tensor table via
// Model::bind_params), its linear seam objects (so LoRA adapters apply unmerged, exactly as in
// training) and its norm calls; only attention differs. Tokens at positions [p, p + n):
//   x = embed(tokens) (+ positions p .. p+n−1)
//   per layer: qkv = qkv(norm1(x)); RoPE q,k at their positions, k/v appended to the layer's cache
//              (kv_cache_append); a = attention of the n queries over cache[0, p+n) (kv_attention);
//              x2 = x + proj(a);  x = x2 + mlp(norm2(x2))
//   logits = final_norm(x[last]) · Wᵀ      (the classifier of the last row only)
// A prompt is one call (prefill, n = prompt length), then one call per generated token (n = 1).
//
// KV cache layout: per layer k and v, each [1, Hkv, S, D] in the compute dtype, S = the Model's
// sequence length (the generation's capacity: prompt + new tokens), one contiguous [S, D] matrix per
// kv head. Work buffers hold up to S rows (a prefill of the whole capacity); everything is
// allocated once here, nothing per token.
//
// One rank only (no tensor or pipeline parallelism), micro-batch 1.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/model/model.hpp"

namespace recipe::core {

class IncrementalDecoder {
 public:
  // `model` must hold every layer, the embeddings and the classifier (tp = pp = 1) with micro-batch
  // 1; its shape's seq is the cache's capacity. Throws std::invalid_argument otherwise.
  explicit IncrementalDecoder(Model& model);
  ~IncrementalDecoder();
  IncrementalDecoder(const IncrementalDecoder&) = delete;
  IncrementalDecoder& operator=(const IncrementalDecoder&) = delete;

  int capacity() const { return S_; }
  int position() const { return pos_; }  // tokens in the cache
  void reset() { pos_ = 0; }             // forget the cache (the next call starts at position 0)

  // Runs `tokens` (ids in [0, vocab)) at positions [position(), position() + n), appends their K/V
  // and returns the logits of the last one (f32 [vocab], valid until the next call). Throws
  // std::invalid_argument when the tokens do not fit the capacity or an id is out of range.
  const std::vector<float>& forward(std::span<const int32_t> tokens);

 private:
  Model& m_;
  int S_ = 0, pos_ = 0;
  void* buf_ = nullptr;
  std::vector<kernels::Tensor> k_cache_, v_cache_;  // per layer [1, Hkv, S, D]
  kernels::Tensor tokens_, residual_, ln_, qkv_, atty_, proj_out_, residual2_, fc_pre_, fc_act_, lnf_, logits_;
  std::vector<float> host_logits_;
};

}  // namespace recipe::core
