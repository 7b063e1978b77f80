// GPT / Llama decoder with explicit forward and backward over one micro-batch.
//
// One block structure serves both families; the plan's fields choose the parts: LayerNorm or
// RMSNorm, learned positions or RoPE, GELU MLP (fc1/fc2) or SwiGLU (gate|up, down), biases,
// tied or untied classifier, MHA or GQA. Pre-norm:
//   x = embed(tokens) (+ positions)
//   per layer: x2 = x + proj(attention(rope(qkv(norm1(x)))));  x = x2 + mlp(norm2(x2))
//   logits = final_norm(x) · Wᵀ   (W = embedding.word.weight when tied, else lm_head.weight)
// The classifier runs in row chunks: logits → loss → dlogits in place → dW, d(final_norm out),
// so the full [N, Vp] logits never exist.
//
// Parameters come from a ParamStore (compute dtype); gradients accumulate (+=) into its f32 grads.
#pragma once

#include <cstdint>
#include <vector>

#include "core/activations.hpp"
#include "core/model_shape.hpp"
#include "core/param_store.hpp"
#include "kernels/ops.hpp"

namespace recipe::core {

enum class Recompute { none, full };
// "none" | "full"; throws std::invalid_argument naming trainer.recompute otherwise.
Recompute parse_recompute(const std::string& s);

class Model {
 public:
  Model(const ModelShape& shape, int micro_batch, Recompute recompute, kernels::Backend& backend,
        ParamStore& params);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelShape& shape() const { return s_; }
  int micro_batch() const { return B_; }
  int64_t rows() const { return N_; }  // tokens per micro-batch (B·T)
  size_t activation_bytes() const { return arena_bytes_; }

  // `tokens`: host int32 [B, T+1] (row b = one sample); inputs are [:, :T], targets [:, 1:].
  // `losses`: device f32 [B·T] receives the per-token losses.
  // Forward + backward, gradients accumulated into the ParamStore, scaled by `dloss` (the weight of
  // one token's loss in the objective, e.g. 1/tokens in the global batch).
  void forward_backward(const int32_t* tokens, kernels::Tensor losses, float dloss);
  // Forward only (evaluation, finite differences).
  void forward_loss(const int32_t* tokens, kernels::Tensor losses);

 private:
  struct Norm { kernels::Tensor w, b; };
  struct Linear { kernels::Tensor w, b; };
  struct LayerParams { Norm norm1, norm2; Linear qkv, proj, fc_in, fc_out; };
  struct Params {
    std::vector<LayerParams> layers;
    kernels::Tensor word, position, classifier;
    Norm final_norm;
  };

  Params bind_params(bool grads) const;
  void upload_tokens(const int32_t* tokens);
  void forward(bool with_grad, kernels::Tensor losses, float dloss);
  void backward();

  // transformer_block.cpp
  void norm_fwd(kernels::Tensor out, kernels::Tensor mean, kernels::Tensor rstd, kernels::Tensor inp,
                const Norm& n);
  void norm_bwd(kernels::Tensor dinp, const Norm& dn, kernels::Tensor dout, kernels::Tensor inp,
                const Norm& n, kernels::Tensor mean, kernels::Tensor rstd);
  void residual_norm(kernels::Tensor residual, kernels::Tensor out, kernels::Tensor mean,
                     kernels::Tensor rstd, kernels::Tensor a, kernels::Tensor b, const Norm& n);
  // From a.ln1 to a.fc_act (everything but the MLP output projection).
  void layer_forward_body(int l, const LayerActs& a);
  void layer_backward(int l, const LayerActs& a);
  void classifier(bool with_grad, kernels::Tensor losses, float dloss);

  ModelShape s_;
  int B_;
  int64_t N_;
  Recompute recompute_;
  kernels::Backend& be_;
  ParamStore& store_;
  Params w_, g_;
  void* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  Activations acts_;
  std::vector<int32_t> host_inputs_, host_targets_;
};

}  // namespace recipe::core
