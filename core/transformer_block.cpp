// One decoder layer's forward body and backward, the norms, and the chunked classifier.
#include "core/model.hpp"

namespace recipe::core {

using kernels::Tensor;

void Model::norm_fwd(Tensor out, Tensor mean, Tensor rstd, Tensor inp, const Norm& n) {
  if (s_.layernorm)
    be_.layernorm_fwd(out, mean, rstd, inp, n.w, n.b, s_.norm_eps);
  else
    be_.rmsnorm_fwd(out, rstd, inp, n.w, s_.norm_eps);
}

void Model::norm_bwd(Tensor dinp, const Norm& dn, Tensor dout, Tensor inp, const Norm& n, Tensor mean,
                     Tensor rstd) {
  if (s_.layernorm)
    be_.layernorm_bwd(dinp, dn.w, dn.b, dout, inp, n.w, mean, rstd);
  else
    be_.rmsnorm_bwd(dinp, dn.w, dout, inp, n.w, rstd);
}

void Model::residual_norm(Tensor residual, Tensor out, Tensor mean, Tensor rstd, Tensor a, Tensor b,
                          const Norm& n) {
  be_.residual_norm_fwd(residual, out, mean, rstd, a, b, n.w, n.b, s_.norm_eps, !s_.layernorm);
}

void Model::layer_forward_body(int l, const LayerActs& a) {
  const LayerParams& p = w_.layers[size_t(l)];
  const int T = s_.seq, Hq = s_.heads, Hkv = s_.kv_heads, D = s_.head_dim;
  be_.linear_fwd(a.qkv, a.ln1, p.qkv.w, p.qkv.b, Tensor());
  if (!s_.learned_positions) be_.rope_fwd(a.qkv, B_, T, Hq, Hkv, D, s_.rope_theta);
  be_.attention_fwd(a.atty, a.lse, a.qkv, B_, T, Hq, Hkv, D);
  be_.linear_fwd(acts_.proj_out, a.atty, p.proj.w, p.proj.b, Tensor());
  residual_norm(a.residual2, a.ln2, a.ln2_mean, a.ln2_rstd, a.residual, acts_.proj_out, p.norm2);
  if (s_.gelu) {
    be_.linear_fwd(a.fc_act, a.ln2, p.fc_in.w, p.fc_in.b, a.fc_pre);
  } else {
    be_.linear_fwd(a.fc_pre, a.ln2, p.fc_in.w, p.fc_in.b, Tensor());
    be_.swiglu_fwd(a.fc_act, a.fc_pre);
  }
}

// On entry acts_.dresidual holds d(layer output); on exit d(layer input). Norm backward ACCUMULATES
// into it (the residual branch's identity gradient is already there).
void Model::layer_backward(int l, const LayerActs& a) {
  const LayerParams& p = w_.layers[size_t(l)];
  const LayerParams& g = g_.layers[size_t(l)];
  const int T = s_.seq, Hq = s_.heads, Hkv = s_.kv_heads, D = s_.head_dim;
  Tensor dres = acts_.dresidual;

  // MLP: out = fc_out(act(fc_in(ln2)))
  if (s_.gelu) {
    // dfc = (dres·W2) ⊙ gelu'(pre_gelu): the dGELU epilogue of fc2's backward.
    be_.linear_bwd(acts_.dfc, g.fc_out.w, g.fc_out.b, dres, a.fc_act, p.fc_out.w, a.fc_pre);
  } else {
    be_.linear_bwd(acts_.dfc_act, g.fc_out.w, g.fc_out.b, dres, a.fc_act, p.fc_out.w, Tensor());
    be_.swiglu_bwd(acts_.dfc, acts_.dfc_act, a.fc_pre);
  }
  be_.linear_bwd(acts_.dln, g.fc_in.w, g.fc_in.b, acts_.dfc, a.ln2, p.fc_in.w, Tensor());
  norm_bwd(dres, g.norm2, acts_.dln, a.residual2, p.norm2, a.ln2_mean, a.ln2_rstd);

  // Attention: out = proj(attention(rope(qkv(ln1))))
  be_.linear_bwd(acts_.datty, g.proj.w, g.proj.b, dres, a.atty, p.proj.w, Tensor());
  be_.attention_bwd(acts_.dqkv, acts_.datty, a.qkv, a.atty, a.lse, B_, T, Hq, Hkv, D);
  if (!s_.learned_positions) be_.rope_bwd(acts_.dqkv, B_, T, Hq, Hkv, D, s_.rope_theta);
  be_.linear_bwd(acts_.dln, g.qkv.w, g.qkv.b, acts_.dqkv, a.ln1, p.qkv.w, Tensor());
  norm_bwd(dres, g.norm1, acts_.dln, a.residual, p.norm1, a.ln1_mean, a.ln1_rstd);
}

// logits = lnf · Wᵀ in row chunks; with_grad: cross_entropy turns the chunk into dlogits in place,
// then linear_bwd gives d(lnf) rows (into acts_.dln) and accumulates dW.
void Model::classifier(bool with_grad, Tensor losses, float dloss) {
  const int64_t chunk = acts_.chunk_rows, C = s_.hidden, Vp = s_.padded_vocab;
  for (int64_t r0 = 0; r0 < N_; r0 += chunk) {
    const int64_t n = std::min(chunk, N_ - r0);
    Tensor logits = acts_.logits.rows(0, n).view({n, Vp});
    Tensor h = acts_.lnf.view({N_, C}).rows(r0, n);
    be_.linear_fwd(logits, h, w_.classifier, Tensor(), Tensor());
    be_.cross_entropy(losses.rows(r0, n), logits, acts_.targets.rows(r0, n), s_.vocab, dloss, with_grad);
    if (with_grad)
      be_.linear_bwd(acts_.dln.view({N_, C}).rows(r0, n), g_.classifier, Tensor(), logits, h,
                     w_.classifier, Tensor());
  }
}

}  // namespace recipe::core
