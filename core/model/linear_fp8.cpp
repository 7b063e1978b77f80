// The FP8 path of the linear seam: casts of the GEMM operands with tensorwise current scaling and
// the FP8 GEMM ops, in the order and layout the top of linear.hpp describes.
#include <stdexcept>

#include "core/model/linear.hpp"

namespace recipe::core {

using kernels::DType;
using kernels::Tensor;

namespace {

// Cells of the stats tensors: amax at the even cell, inverse scale in the next. A cell is 16 bytes
// (4 floats, the value in the first) because cuBLASLt takes only 16-byte aligned scale pointers.
// Fp8Scratch::stats holds x's pair (kX) and dy's (kG); a weight's pair is in its own cache (kW).
constexpr int kX = 0, kW = 0, kG = 4;
constexpr int64_t kCellFloats = 4;
Tensor cell(const Tensor& stats, int i) { return stats.rows(i * kCellFloats, 1); }

// A [rows, cols] view of `dtype` at the start of a byte buffer.
Tensor typed(const Tensor& bytes, DType dtype, int64_t rows, int64_t cols) {
  if (rows * cols > bytes.numel())
    throw std::logic_error("Fp8Scratch: [" + std::to_string(rows) + ", " + std::to_string(cols) +
                           "] does not fit a buffer of " + std::to_string(bytes.numel()) + " bytes");
  return Tensor(bytes.ptr, dtype, bytes.device, {rows, cols});
}

}  // namespace

void TpGroup::max(Tensor t) const {
  if (size > 1) comm->all_reduce_max(t);
}

void Linear::fp8_cast(Tensor src, Tensor out, Tensor out_t, Tensor stats, int slot, bool sharded, Fp8Role role,
                      bool record) const {
  const Fp8DelayedCells* d = fp8_->delayed ? fp8_d_ : nullptr;
  Tensor amax = cell(stats, slot);
  if (d && fp8_->history_ready) {
    amax = d->scale_amax[role];  // delayed: the history's amax, equal on every rank
  } else {
    be_->fp8_amax(amax, src);  // current scaling (and delayed scaling's first step)
    if (sharded) tp_.max(amax);
  }
  const Tensor amax_out = d && record && fp8_->record_amax ? d->amax[role] : Tensor();
  const int64_t cols = out.defined() ? out.dim(1) : out_t.dim(0);
  be_->fp8_quantize({.out = out,
                     .out_t = out_t,
                     .scale_inv = cell(stats, slot + 1),
                     .inp = src,
                     .amax = amax,
                     .cols = cols,
                     .amax_out = amax_out});
}

bool Linear::fp8_fuses_swiglu_bwd(const LinearBwd& a) const {
  // The fused cast needs the scale before dy exists (a ready delayed history), and nothing else
  // may need dy in the act dtype: no adapter (its GEMMs read it), no bias gradient to sum from it.
  // (The TP comm-overlap rings, which read dy by blocks, are refused with FP8 by the resolver.)
  const bool bias_sum = !a.bias_grad_done && grad_.b.defined();
  return fp8_ && fp8_->fuse_producers && fp8_->delayed && fp8_->history_ready && fp8_d_ && !lora_ && !bias_sum &&
         !tp_.overlap;
}

bool Linear::fp8_fuses_swiglu_fwd() const {
  return fp8_ && fp8_->fuse_producers && fp8_->delayed && fp8_->history_ready && fp8_d_ && !lora_ && !tp_.overlap;
}

const Fp8WeightCache& Linear::fp8_weight() const {
  Fp8WeightCache& c = *fp8_w_;
  if (c.frozen) {  // held only in FP8: cast once, when the base was initialized or loaded
    if (!c.valid)
      throw std::logic_error("Linear: an FP8-only frozen weight is read before Model::quantize_frozen_base");
    return c;
  }
  if (!c.valid || !fp8_->cache_weights) {
    fp8_cast(w_.w, c.wq, c.wtq, c.stats, kW, tp_.size > 1, fp8_w, true);  // W is sharded whenever TP is on
    c.valid = true;
  }
  return c;
}

void Linear::fp8_affine_fwd(const LinearFwd& a, Tensor bias) const {
  const Fp8Scratch& s = *fp8_;
  const int64_t in = w_.w.dim(1), n = a.inp.numel() / in;
  const Tensor xq = typed(s.x, s.fwd, n, in);
  if (a.swiglu_pre.defined()) {
    // x = swiglu(fc_pre) written with its cast, with the history's scale (the delayed branch of
    // fp8_cast; the caller checked fp8_fuses_swiglu_fwd).
    const Fp8DelayedCells& d = *fp8_d_;
    be_->fp8_swiglu_fwd_quantize({.out = a.inp,
                                  .q = xq,
                                  .scale_inv = cell(s.stats, kX + 1),
                                  .gate_up = a.swiglu_pre,
                                  .amax = d.scale_amax[fp8_x],
                                  .amax_out = s.record_amax ? d.amax[fp8_x] : Tensor()});
  } else {
    fp8_cast(a.inp, xq, Tensor(), s.stats, kX, row_parallel_, fp8_x,
             true);  // a row-parallel input is sharded over its features
  }
  const Fp8WeightCache& w = fp8_weight();
  be_->fp8_linear_fwd({.out = a.out,
                       .inp = xq,
                       .inp_scale_inv = cell(s.stats, kX + 1),
                       .weight = w.wq,
                       .weight_scale_inv = cell(w.stats, kW + 1),
                       .bias = bias,
                       .pre_gelu = a.pre_gelu,
                       .fast_accum = s.fast_accum_forward});
}

void Linear::fp8_affine_bwd(const LinearBwd& a, Tensor dbias, Tensor dinp_sum) const {
  const Fp8Scratch& s = *fp8_;
  const int64_t out = w_.w.dim(0), in = w_.w.dim(1), n = a.dout.numel() / out;
  if (a.rebuild_input) be_->gelu_fwd(a.inp, a.gelu_pre);
  const bool need_dinp = a.dinp.defined(), need_dw = grad_.w.defined();
  if (!need_dinp && !need_dw && !dbias.defined()) return;
  // dy: sharded over the output features in a column-parallel linear, replicated in a row-parallel one.
  const Tensor gq = need_dinp ? typed(s.g, s.bwd, n, out) : Tensor();
  const Tensor gtq = need_dw ? typed(s.g_t, s.bwd, out, n) : Tensor();
  if (a.swiglu_pre.defined() && (need_dinp || need_dw)) {
    // dy = swiglu_bwd(dact, fc_pre), cast as it is computed with the history's scale (the
    // delayed branch of fp8_cast; the caller checked fp8_fuses_swiglu_bwd).
    const Fp8DelayedCells& d = *fp8_d_;
    be_->fp8_quantize_swiglu_bwd({.out = gq,
                                  .out_t = gtq,
                                  .scale_inv = cell(s.stats, kG + 1),
                                  .dout = a.swiglu_dact,
                                  .gate_up = a.swiglu_pre,
                                  .amax = d.scale_amax[fp8_dy],
                                  .amax_out = s.record_amax ? d.amax[fp8_dy] : Tensor()});
  } else if (need_dinp || need_dw) {
    fp8_cast(a.dout, gq, gtq, s.stats, kG, !row_parallel_, fp8_dy, true);
  }
  const Fp8WeightCache* w = need_dinp ? &fp8_weight() : nullptr;
  Tensor weight_t = w ? w->wtq : Tensor();
  if (w && w->frozen) {  // the K-major copy the dinp GEMM reads, into the shared scratch
    weight_t = typed(s.w_t, w->wq.dtype, in, out);
    be_->fp8_transpose(weight_t, w->wq);
  }
  Tensor xtq;
  if (need_dw) {
    xtq = typed(s.x, s.fwd, in, n);
    fp8_cast(a.inp, Tensor(), xtq, s.stats, kX, row_parallel_, fp8_x, false);
  }
  be_->fp8_linear_bwd({.dinp = a.dinp,
                       .dweight = grad_.w,
                       .dbias = dbias,
                       .dinp_gelu_aux = need_dinp ? a.gelu_pre : Tensor(),
                       .dinp_sum = dinp_sum,
                       .dout = a.dout,  // fused SwiGLU: unwritten, only its shape is read (no dbias)
                       .dout_fp8 = gq,
                       .dout_t = gtq,
                       .dout_scale_inv = cell(s.stats, kG + 1),
                       .weight_t = weight_t,
                       .weight_scale_inv = w ? cell(w->stats, kW + 1) : Tensor(),
                       .inp_t = xtq,
                       .inp_scale_inv = cell(s.stats, kX + 1)});
}

}  // namespace recipe::core
