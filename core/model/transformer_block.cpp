// One decoder layer's forward body and backward, the norms, and the chunked classifier.
#include "core/model/model.hpp"

namespace recipe::core {

using kernels::Tensor;

void Model::norm_fwd(Tensor out, Tensor mean, Tensor rstd, Tensor inp, const Norm& n) {
  if (s_.layernorm)
    be_.layernorm_fwd(out, mean, rstd, inp, n.w, n.b, s_.norm_eps);
  else
    be_.rmsnorm_fwd(out, rstd, inp, n.w, s_.norm_eps);
}

void Model::norm_bwd(Tensor dinp, const Norm& dn, Tensor dout, Tensor inp, const Norm& n, Tensor mean, Tensor rstd,
                     Tensor dinp_sum) {
  if (s_.layernorm)
    be_.layernorm_bwd(dinp, dn.w, dn.b, dout, inp, n.w, mean, rstd, dinp_sum);
  else
    be_.rmsnorm_bwd(dinp, dn.w, dout, inp, n.w, rstd);
}

// The residual stream's gradient after a norm backward is exactly the output gradient of the
// linear whose output was added into that residual (attention proj, or fc_out of the layer
// below): the norm backward already holds it row by row, so it also sums its columns into that
// linear's bias gradient and the linear skips its own pass over the rows.
Tensor Model::fc_out_bias_grad_from_norm(int l) const {
  if (!s_.layernorm || l < 0 || l >= ls_.layers) return Tensor();
  return g_.layers[size_t(l)].fc_out.b;
}

void Model::residual_norm(Tensor residual, Tensor out, Tensor mean, Tensor rstd, Tensor a, Tensor b, const Norm& n) {
  be_.residual_norm_fwd(residual, out, mean, rstd, a, b, n.w, n.b, s_.norm_eps, !s_.layernorm);
}

// Heads, KV heads and FFN columns are this rank's TP share (ls_).
void Model::layer_forward_body(Activations& A, int l, const LayerActs& a) {
  const LayerParams& p = w_.layers[size_t(l)];
  const int T = s_.seq, Hq = ls_.heads, Hkv = ls_.kv_heads, D = s_.head_dim;
  be_.linear_fwd(a.qkv, a.ln1, p.qkv.w, p.qkv.b, Tensor());
  if (!s_.learned_positions) be_.rope_fwd(a.qkv, B_, T, Hq, Hkv, D, s_.rope_theta);
  be_.attention_fwd(a.atty, a.lse, a.qkv, B_, T, Hq, Hkv, D);
  be_.linear_fwd(A.proj_out, a.atty, p.proj.w, row_bias(p.proj.b), Tensor());
  tp_sum(A.proj_out);
  residual_norm(a.residual2, a.ln2, a.ln2_mean, a.ln2_rstd, a.residual, A.proj_out, p.norm2);
  if (s_.gelu) {
    be_.linear_fwd(a.fc_act, a.ln2, p.fc_in.w, p.fc_in.b, a.fc_pre);
  } else {
    be_.linear_fwd(a.fc_pre, a.ln2, p.fc_in.w, p.fc_in.b, Tensor());
    be_.swiglu_fwd(a.fc_act, a.fc_pre);
  }
}

// On entry acts_.dresidual holds d(layer output); on exit d(layer input). Norm backward ACCUMULATES
// into it (the residual branch's identity gradient is already there).
// The gradients of replicated parameters (norms, row-parallel biases) come out equal on every TP
// rank, because every input they see has been summed over the group first.
void Model::layer_backward(Activations& A, int l, const LayerActs& a, bool dres_summed) {
  const LayerParams& p = w_.layers[size_t(l)];
  const LayerParams& g = g_.layers[size_t(l)];
  const int T = s_.seq, Hq = ls_.heads, Hkv = ls_.kv_heads, D = s_.head_dim;
  Tensor dres = A.dresidual;

  // gelu/norm levels keep no fc_act per layer: rebuild it from the saved fc_pre into the shared
  // buffer for fc2's weight gradient (deterministic, so bitwise what forward fed fc2 on the CPU; the
  // CUDA forward's fused epilogue rounds from f32, the recompute from the bf16 fc_pre, as llm.c).
  // With GELU the rebuild is part of fc2's backward below (gelu_rebuild_linear_bwd), which a
  // backend may fuse into the dinp GEMM.
  const bool lazy = recompute_ == Recompute::gelu || recompute_ == Recompute::norm;
  if (lazy && !s_.gelu) be_.swiglu_fwd(a.fc_act, a.fc_pre);

  // MLP: out = fc_out(act(fc_in(ln2)))
  // With GELU, fc_in's bias gradient Σ_rows dfc comes out of fc2's backward, which writes dfc
  // (linear_bwd's dinp_sum), and fc_in's backward skips its own column sum.
  const Tensor fc_in_bias_grad = s_.gelu ? g.fc_in.b : Tensor();
  if (s_.gelu) {
    // dfc = (dres·W2) ⊙ gelu'(pre_gelu): the dGELU epilogue of fc2's backward.
    const Tensor fc_out_bias_grad = dres_summed ? Tensor() : g.fc_out.b;
    if (lazy)
      be_.gelu_rebuild_linear_bwd(A.dfc, a.fc_act, g.fc_out.w, fc_out_bias_grad, dres, p.fc_out.w, a.fc_pre,
                                  fc_in_bias_grad);
    else
      be_.linear_bwd(A.dfc, g.fc_out.w, fc_out_bias_grad, dres, a.fc_act, p.fc_out.w, a.fc_pre, fc_in_bias_grad);
  } else {
    be_.linear_bwd(A.dfc_act, g.fc_out.w, dres_summed ? Tensor() : g.fc_out.b, dres, a.fc_act, p.fc_out.w, Tensor(),
                   Tensor());
    be_.swiglu_bwd(A.dfc, A.dfc_act, a.fc_pre);
  }
  // norm: ln2 (and below ln1) are rebuilt from the saved residual; the saved statistics stay.
  if (recompute_ == Recompute::norm) norm_fwd(a.ln2, Tensor(), Tensor(), a.residual2, p.norm2);
  be_.linear_bwd(A.dln, g.fc_in.w, fc_in_bias_grad.defined() ? Tensor() : g.fc_in.b, A.dfc, a.ln2, p.fc_in.w, Tensor(),
                 Tensor());
  tp_sum(A.dln);
  const Tensor proj_bias_grad = s_.layernorm ? g.proj.b : Tensor();
  norm_bwd(dres, g.norm2, A.dln, a.residual2, p.norm2, a.ln2_mean, a.ln2_rstd, proj_bias_grad);

  // Attention: out = proj(attention(rope(qkv(ln1))))
  be_.linear_bwd(A.datty, g.proj.w, proj_bias_grad.defined() ? Tensor() : g.proj.b, dres, a.atty, p.proj.w, Tensor(),
                 Tensor());
  be_.attention_bwd(A.dqkv, A.datty, a.qkv, a.atty, a.lse, B_, T, Hq, Hkv, D);
  if (!s_.learned_positions) be_.rope_bwd(A.dqkv, B_, T, Hq, Hkv, D, s_.rope_theta);
  if (recompute_ == Recompute::norm) norm_fwd(a.ln1, Tensor(), Tensor(), a.residual, p.norm1);
  be_.linear_bwd(A.dln, g.qkv.w, g.qkv.b, A.dqkv, a.ln1, p.qkv.w, Tensor(), Tensor());
  tp_sum(A.dln);
  norm_bwd(dres, g.norm1, A.dln, a.residual, p.norm1, a.ln1_mean, a.ln1_rstd, fc_out_bias_grad_from_norm(l - 1));
}

// logits = lnf · Wᵀ in row chunks (this rank's vocabulary columns); with_grad: the loss turns the
// chunk into dlogits in place, then linear_bwd gives d(lnf) rows (into A.dln, partial over the
// vocabulary shards until summed) and accumulates dW.
void Model::classifier(Activations& A, const LossScratch& ls, bool with_grad, Tensor losses, float dloss) {
  const int64_t chunk = A.chunk_rows, C = s_.hidden, Vl = ls_.padded_vocab;
  for (int64_t r0 = 0; r0 < N_; r0 += chunk) {
    const int64_t n = std::min(chunk, N_ - r0);
    Tensor logits = A.logits.rows(0, n).view({n, Vl});
    Tensor h = A.lnf.view({N_, C}).rows(r0, n);
    be_.linear_fwd(logits, h, w_.classifier, Tensor(), Tensor());
    cross_entropy(ls, losses.rows(r0, n), logits, A.targets.rows(r0, n), with_grad, dloss);
    if (with_grad)
      be_.linear_bwd(A.dln.view({N_, C}).rows(r0, n), g_.classifier, Tensor(), logits, h, w_.classifier, Tensor(),
                     Tensor());
  }
  if (with_grad) tp_sum(A.dln);
}

// One chunk's loss: the plain op on one rank; the three vocab-parallel passes with the group's max
// and sums between them under TP.
void Model::cross_entropy(const LossScratch& ls, Tensor losses, Tensor logits, Tensor targets, bool with_grad,
                          float dloss) {
  if (tp_size_ == 1) {
    be_.cross_entropy(losses, logits, targets, s_.vocab, dloss, with_grad);
    return;
  }
  const int64_t n = logits.dim(0);
  Tensor rowmax = ls.rowmax.rows(0, n);
  // A [2, n] tensor in the first 2n floats of the [2, chunk] scratch.
  Tensor sums_n = ls.sums.view({ls.sums.numel()}).rows(0, 2 * n).view({2, n});
  be_.vocab_parallel_ce_max(rowmax, logits, valid_cols_);
  tp_->all_reduce_max(rowmax);
  be_.vocab_parallel_ce_sums(sums_n, logits, rowmax, targets, vocab_start_, valid_cols_);
  tp_->all_reduce_sum(sums_n);
  be_.vocab_parallel_ce_finish(losses, logits, rowmax, sums_n, targets, vocab_start_, valid_cols_, dloss, with_grad);
}

}  // namespace recipe::core
