// One decoder layer's forward body and backward, the norms, and the chunked classifier.
#include "core/model/model.hpp"

namespace recipe::core {

using kernels::Tensor;

void Model::norm_fwd(Tensor out, Tensor inp, const Norm& n, Tensor mean, Tensor rstd) {
  if (s_.arch.layernorm)
    be_.layernorm_fwd(
        {.out = out, .mean = mean, .rstd = rstd, .inp = inp, .weight = n.w, .bias = n.b, .eps = s_.arch.norm_eps});
  else
    be_.rmsnorm_fwd({.out = out, .rstd = rstd, .inp = inp, .weight = n.w, .eps = s_.arch.norm_eps});
}

void Model::norm_bwd(Tensor dinp, const Norm& dn, Tensor dout, Tensor inp, const Norm& n, Tensor mean, Tensor rstd,
                     Tensor dinp_sum) {
  if (s_.arch.layernorm)
    be_.layernorm_bwd({.dinp = dinp,
                       .dweight = dn.w,
                       .dbias = dn.b,
                       .dout = dout,
                       .inp = inp,
                       .weight = n.w,
                       .mean = mean,
                       .rstd = rstd,
                       .dinp_sum = dinp_sum});
  else
    be_.rmsnorm_bwd({.dinp = dinp, .dweight = dn.w, .dout = dout, .inp = inp, .weight = n.w, .rstd = rstd});
}

// The residual stream's gradient after a norm backward is exactly the output gradient of the
// linear whose output was added into that residual (attention proj, or fc_out of the layer
// below): the norm backward already holds it row by row, so it also sums its columns into that
// linear's bias gradient and the linear skips its own pass over the rows.
Tensor Model::fc_out_bias_grad_from_norm(int l) const {
  if (!s_.arch.layernorm || l < 0 || l >= ls_.arch.layers) return Tensor();
  return linears_[size_t(l)].fc_out.bias_grad();
}

void Model::residual_norm(Tensor residual, Tensor out, Tensor mean, Tensor rstd, Tensor a, Tensor b, const Norm& n) {
  be_.residual_norm_fwd({.residual = residual,
                         .out = out,
                         .mean = mean,
                         .rstd = rstd,
                         .a = a,
                         .b = b,
                         .weight = n.w,
                         .bias = n.b,
                         .eps = s_.arch.norm_eps,
                         .rms = !s_.arch.layernorm});
}

// The attention of one micro-batch on this rank: its TP share of the heads (ls_), every position.
kernels::AttentionShape Model::attention_shape() const {
  return {.B = B_,
          .T = s_.seq,
          .Hq = ls_.arch.heads,
          .Hkv = ls_.arch.kv_heads,
          .D = s_.arch.head_dim,
          .max_samples = s_.max_samples};
}

// What attention reads: without qk-norm a.qkv, roped in place; with it rope(qk_norm(a.qkv)) in
// A.qkv_normed, a.qkv keeping the projection's output for the qk-norm backward (the layout is in
// family/activations.hpp). Every q and k head vector of this rank's heads is normalised with the
// layer's replicated [head_dim] weights.
Tensor Model::attention_input(Activations& A, int l, const LayerActs& a, const kernels::AttentionShape& att) {
  Tensor qkv = a.qkv;
  if (s_.arch.qk_norm) {
    const LayerParams& p = w_.layers[size_t(l)];
    qkv = A.qkv_normed;
    be_.qk_norm_fwd({.out = qkv,
                     .inp = a.qkv,
                     .q_weight = p.q_norm,
                     .k_weight = p.k_norm,
                     .Hq = att.Hq,
                     .Hkv = att.Hkv,
                     .D = att.D,
                     .eps = s_.arch.norm_eps});
  }
  if (!s_.arch.learned_positions) be_.rope_fwd(rope_args(A, qkv, att));
  return qkv;
}

// Heads, KV heads and FFN columns are this rank's TP share (ls_).
void Model::layer_forward_body(Activations& A, int l, const LayerActs& a, bool act_by_fc_out) {
  const LayerParams& p = w_.layers[size_t(l)];
  const LayerLinears& L = linears_[size_t(l)];
  const kernels::AttentionShape att = attention_shape();
  L.qkv.fwd({.out = a.qkv, .inp = a.ln1});
  attention_fwd(A, a, attention_input(A, l, a, att), att);
  L.proj.fwd({.out = A.proj_out, .inp = a.atty});
  residual_norm(a.residual2, a.ln2, a.ln2_mean, a.ln2_rstd, a.residual, A.proj_out, p.norm2);
  if (s_.arch.gelu) {
    L.fc_in.fwd({.out = a.fc_act, .inp = a.ln2, .pre_gelu = a.fc_pre});
  } else {
    L.fc_in.fwd({.out = a.fc_pre, .inp = a.ln2});
    if (!act_by_fc_out) be_.swiglu_fwd(a.fc_act, a.fc_pre);
  }
}

// On entry acts_.dresidual holds d(layer output); on exit d(layer input). Norm backward ACCUMULATES
// into it (the residual branch's identity gradient is already there).
// The gradients of replicated parameters (norms, row-parallel biases) come out equal on every TP
// rank, because every input they see has been summed over the group first (the column-parallel
// linears sum their dinp inside bwd, before the norm backward reads it). Under sequence
// parallelism they are sums over this rank's rows only, summed over the group in backward().
void Model::layer_backward(Activations& A, int l, const LayerActs& a, bool dres_summed) {
  const LayerParams& p = w_.layers[size_t(l)];
  const LayerParams& g = g_.layers[size_t(l)];
  const LayerLinears& L = linears_[size_t(l)];
  const kernels::AttentionShape att = attention_shape();
  Tensor dres = A.dresidual;

  // gelu/norm levels keep no fc_act per layer: fc2's backward rebuilds it from the saved fc_pre
  // into the shared buffer for its weight gradient (rebuild_input; deterministic, so bitwise what
  // forward fed fc2 on the CPU; the CUDA forward's fused GELU epilogue rounds from f32, the
  // recompute from the bf16 fc_pre, as llm.c). With GELU the rebuild joins fc2's dinp GEMM
  // (gelu_rebuild_linear_bwd); with SwiGLU it joins the SwiGLU backward's pass over fc_pre.
  const bool lazy = recompute_ == Recompute::gelu || recompute_ == Recompute::norm;

  // MLP: out = fc_out(act(fc_in(ln2)))
  // With GELU, fc2's backward writes dfc = (dres·W2) ⊙ gelu'(fc_pre) (the dGELU epilogue) and sums
  // its rows into fc_in's bias gradient in the same pass, so fc_in's backward skips that sum.
  // With SwiGLU, fc2's backward writes dfc_act = dres·W2, then dfc = swiglu_bwd(dfc_act, fc_pre)
  // and the rebuilt fc_act in one pass, then its weight gradient (LinearBwd::swiglu_pre). Where
  // fc_in casts dfc to FP8 straight out of the SwiGLU backward (casts_swiglu_grad: delayed
  // scaling), dfc is never written: fc2 stops at dfc_act and fc_in's backward owns the SwiGLU.
  // dres_summed: the norm backward that produced dres already summed fc_out's bias gradient.
  const LinearBwd fc_in_casting{
      .dinp = A.dln, .dout = A.dfc, .inp = a.ln2, .swiglu_pre = a.fc_pre, .swiglu_dact = A.dfc_act};
  const bool fc_in_owns_swiglu = !s_.arch.gelu && L.fc_in.casts_swiglu_grad(fc_in_casting);
  if (s_.arch.gelu) {
    L.fc_out.bwd({.dinp = A.dfc,
                  .dout = dres,
                  .inp = a.fc_act,
                  .gelu_pre = a.fc_pre,
                  .rebuild_input = lazy,
                  .dinp_is_output_grad_of = &L.fc_in,
                  .bias_grad_done = dres_summed});
  } else if (fc_in_owns_swiglu) {
    if (lazy) be_.swiglu_fwd(a.fc_act, a.fc_pre);
    L.fc_out.bwd({.dinp = A.dfc_act, .dout = dres, .inp = a.fc_act, .bias_grad_done = dres_summed});
  } else {
    L.fc_out.bwd({.dinp = A.dfc,
                  .dout = dres,
                  .inp = a.fc_act,
                  .rebuild_input = lazy,
                  .bias_grad_done = dres_summed,
                  .swiglu_pre = a.fc_pre,
                  .swiglu_dact = A.dfc_act});
  }
  // norm: ln2 (and below ln1) are rebuilt from the saved residual; the saved statistics stay.
  if (recompute_ == Recompute::norm) norm_fwd(a.ln2, a.residual2, p.norm2);
  if (fc_in_owns_swiglu)
    L.fc_in.bwd(fc_in_casting);
  else
    L.fc_in.bwd({.dinp = A.dln, .dout = A.dfc, .inp = a.ln2, .bias_grad_done = s_.arch.gelu});
  // LayerNorm: the norm backward sums the rows of d(residual2) = d(proj output) into proj's bias
  // gradient (its dinp_sum), so proj's backward skips that sum.
  const bool proj_bias_from_norm = s_.arch.layernorm;
  norm_bwd(dres, g.norm2, A.dln, a.residual2, p.norm2, a.ln2_mean, a.ln2_rstd,
           proj_bias_from_norm ? L.proj.bias_grad() : Tensor());

  // Attention: out = proj(attention(rope(qk_norm(qkv(ln1))))) (qk_norm: identity without it)
  L.proj.bwd({.dinp = A.datty, .dout = dres, .inp = a.atty, .bias_grad_done = proj_bias_from_norm});
  // qk-norm: what attention read is rebuilt from the saved projection output (a.qkv already holds
  // it roped without qk-norm).
  const Tensor att_qkv = s_.arch.qk_norm ? attention_input(A, l, a, att) : a.qkv;
  attention_bwd(A, a, att_qkv, att);
  if (!s_.arch.learned_positions) be_.rope_bwd(rope_args(A, A.dqkv, att));
  if (s_.arch.qk_norm)
    be_.qk_norm_bwd({.dinp = A.dqkv,
                     .dq_weight = g.q_norm,
                     .dk_weight = g.k_norm,
                     .dout = A.dqkv,
                     .inp = a.qkv,
                     .q_weight = p.q_norm,
                     .k_weight = p.k_norm,
                     .Hq = att.Hq,
                     .Hkv = att.Hkv,
                     .D = att.D,
                     .eps = s_.arch.norm_eps});
  if (recompute_ == Recompute::norm) norm_fwd(a.ln1, a.residual, p.norm1);
  L.qkv.bwd({.dinp = A.dln, .dout = A.dqkv, .inp = a.ln1});
  norm_bwd(dres, g.norm1, A.dln, a.residual, p.norm1, a.ln1_mean, a.ln1_rstd, fc_out_bias_grad_from_norm(l - 1));
}

// logits = lnf · Wᵀ in row chunks (this rank's vocabulary columns); with_grad: the loss turns the
// chunk into dlogits in place, then linear_bwd gives d(lnf) rows (into A.dln, partial over the
// vocabulary shards until summed) and accumulates dW.
// Sequence parallel: the vocabulary-parallel loss needs every row on every rank, so lnf is
// gathered first (Megatron gathers before the output layer too) and d(lnf), whole rows, is
// reduce-scattered into this rank's rows of A.dln.
void Model::classifier(Activations& A, const LossScratch& ls, bool with_grad, Tensor losses, Tensor dloss) {
  const int64_t chunk = A.chunk_rows, C = s_.arch.hidden, Vl = ls_.arch.padded_vocab;
  const Tensor lnf = sp_ ? tp_group_.gather_rows(A.lnf, sp_scratch_.full) : A.lnf.view({N_, C});
  const Tensor dlnf = sp_ ? sp_scratch_.full_grad : A.dln.view({N_, C});
  for (int64_t r0 = 0; r0 < N_; r0 += chunk) {
    const int64_t n = std::min(chunk, N_ - r0);
    Tensor logits = A.logits.rows(0, n).view({n, Vl});
    Tensor h = lnf.rows(r0, n);
    be_.linear_fwd({.out = logits, .inp = h, .weight = w_.classifier});
    cross_entropy(ls, losses.rows(r0, n), logits, A.targets.rows(r0, n), with_grad,
                  with_grad ? dloss.rows(r0, n) : Tensor());
    if (with_grad)
      be_.linear_bwd(
          {.dinp = dlnf.rows(r0, n), .dweight = g_.classifier, .dout = logits, .inp = h, .weight = w_.classifier});
  }
  if (!with_grad) return;
  if (sp_)
    tp_group_.sum_scatter_rows(A.dln, dlnf);
  else
    tp_sum(A.dln);
}

// One chunk's loss: the plain op on one rank; the three vocab-parallel passes with the group's max
// and sums between them under TP.
void Model::cross_entropy(const LossScratch& ls, Tensor losses, Tensor logits, Tensor targets, bool with_grad,
                          Tensor dloss) {
  if (tp_size_ == 1) {
    be_.cross_entropy(losses, logits, targets, s_.arch.vocab, dloss, with_grad);
    return;
  }
  const int64_t n = logits.dim(0);
  Tensor rowmax = ls.rowmax.rows(0, n);
  // A [2, n] tensor in the first 2n floats of the [2, chunk] scratch.
  Tensor sums_n = ls.sums.view({ls.sums.numel()}).rows(0, 2 * n).view({2, n});
  be_.vocab_parallel_ce_max(rowmax, logits, valid_cols_);
  tp_->all_reduce_max(rowmax);
  be_.vocab_parallel_ce_sums({.sums = sums_n,
                              .logits = logits,
                              .rowmax = rowmax,
                              .targets = targets,
                              .vocab_start = vocab_start_,
                              .valid_cols = valid_cols_});
  tp_->all_reduce_sum(sums_n);
  be_.vocab_parallel_ce_finish({.losses = losses,
                                .logits = logits,
                                .rowmax = rowmax,
                                .sums = sums_n,
                                .targets = targets,
                                .vocab_start = vocab_start_,
                                .valid_cols = valid_cols_,
                                .dloss = dloss,
                                .compute_grad = with_grad});
}

}  // namespace recipe::core
