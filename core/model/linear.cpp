// The column- and row-parallel linears: the backend calls of the local affine map and the TP
// reductions around them (see linear.hpp). The op sequence is the one the block issued before the
// seam existed, so training stays bitwise identical; the plain column-parallel backward under TP
// issues its one linear_bwd as two (input gradient, then weight gradient) with its collectives
// between them (linear.hpp, "Backward collectives overlapped"), and with parallelism.tp_comm_overlap
// the row-parallel forward runs in row chunks (linear_overlap.cpp).
#include "core/model/linear.hpp"

#include <stdexcept>

namespace recipe::core {

using kernels::Tensor;

void TpGroup::sum(Tensor t) const {
  if (size > 1) comm->all_reduce_sum(t);
}

Tensor TpGroup::leading(Tensor buffer, int64_t rows, int64_t width) {
  return buffer.view({buffer.numel()}).rows(0, rows * width).view({rows, width});
}

Tensor TpGroup::gather_rows(Tensor shard, Tensor buffer) const {
  const int64_t width = shard.dim(-1), rows = shard.numel() / width;
  const Tensor full = leading(buffer, rows * size, width);
  comm->all_gather(full, shard);
  return full;
}

void TpGroup::sum_scatter_rows(Tensor shard, Tensor full) const { comm->reduce_scatter_sum(shard, full); }

void Linear::affine_fwd(const LinearFwd& a, Tensor bias) const {
  if (a.swiglu_pre.defined() && (!fp8_ || lora_))
    throw std::logic_error("Linear::fwd: only the FP8 forward computes a SwiGLU input with its cast");
  if (!lora_) {
    if (fp8_)
      fp8_affine_fwd(a, bias);  // linear_fp8.cpp
    else
      be_->linear_fwd({.out = a.out, .inp = a.inp, .weight = w_.w, .bias = bias, .pre_gelu = a.pre_gelu});
    return;
  }
  // The adapter's term joins the affine result before the GELU, which then runs on its own. The
  // frozen base may run in FP8; the adapter always runs in the act dtype.
  const Tensor affine = a.pre_gelu.defined() ? a.pre_gelu : a.out;
  if (fp8_)
    fp8_affine_fwd({.out = affine, .inp = a.inp}, bias);
  else
    be_->linear_fwd({.out = affine, .inp = a.inp, .weight = w_.w, .bias = bias});
  adapter_fwd(affine, a.inp);
  if (a.pre_gelu.defined()) be_->gelu_fwd(a.out, a.pre_gelu);
}

void Linear::affine_bwd(const LinearBwd& a) const {
  if (a.rebuild_input && !a.gelu_pre.defined() && !a.swiglu_pre.defined())
    throw std::logic_error(
        "Linear::bwd: rebuild_input needs gelu_pre or swiglu_pre (the input is rebuilt as gelu or swiglu of it)");
  const Tensor dbias = a.bias_grad_done ? Tensor() : grad_.b;
  if (a.swiglu_pre.defined() && row_parallel_) return swiglu_input_bwd(a, dbias);
  if (a.swiglu_pre.defined() && (!fp8_ || lora_))
    throw std::logic_error("Linear::bwd: only the FP8 backward casts a SwiGLU gradient without materialising it");
  const Tensor dinp_sum = a.dinp_is_output_grad_of ? a.dinp_is_output_grad_of->bias_grad() : Tensor();
  if (fp8_ && !lora_) {
    fp8_affine_bwd(a, dbias, dinp_sum);
    return;
  }
  if (lora_) {
    // The adapter's dx joins the base's before the dGELU, so the epilogues run as their own ops.
    // The base is frozen (no dweight, no bias gradients, hence no dinp_sum either).
    if (dbias.defined() || dinp_sum.defined())
      throw std::logic_error("Linear::bwd: a LoRA linear's base (and its biases) is frozen");
    if (a.rebuild_input) be_->gelu_fwd(a.inp, a.gelu_pre);
    if (fp8_)  // the base's dx only: its weight takes no gradient
      fp8_affine_bwd({.dinp = a.dinp, .dout = a.dout, .inp = a.inp}, Tensor(), Tensor());
    else
      be_->linear_bwd({.dinp = a.dinp, .dweight = grad_.w, .dout = a.dout, .inp = a.inp, .weight = w_.w});
    adapter_bwd(a.dinp, a.dout, a.inp);
    if (a.gelu_pre.defined() && a.dinp.defined()) be_->gelu_bwd(a.dinp, a.dinp, a.gelu_pre);
    return;
  }
  if (a.rebuild_input)
    be_->gelu_rebuild_linear_bwd({.dinp = a.dinp,
                                  .act = a.inp,
                                  .dweight = grad_.w,
                                  .dbias = dbias,
                                  .dout = a.dout,
                                  .weight = w_.w,
                                  .pre = a.gelu_pre,
                                  .dinp_sum = dinp_sum});
  else
    be_->linear_bwd({.dinp = a.dinp,
                     .dweight = grad_.w,
                     .dbias = dbias,
                     .dout = a.dout,
                     .inp = a.inp,
                     .weight = w_.w,
                     .dinp_gelu_aux = a.gelu_pre,
                     .dinp_sum = dinp_sum});
}

bool Linear::splits_bwd(const LinearBwd& a) const {
  return !fp8_ && !lora_ && a.dinp.defined() && !a.gelu_pre.defined() && !a.rebuild_input &&
         !a.dinp_is_output_grad_of && !a.swiglu_pre.defined();
}

// fc2's backward through the SwiGLU before it (LinearBwd::swiglu_pre, row-parallel): the dinp
// GEMM into swiglu_dact, then one pass over gate_up for dinp = d(gate_up) and the rebuilt input,
// then the weight gradient reads that input.
void Linear::swiglu_input_bwd(const LinearBwd& a, Tensor dbias) const {
  if (fp8_ || lora_) {
    // The separate ops: the adapter's dx joins the base's before the SwiGLU backward, and the FP8
    // backward casts the input for its weight GEMM inside the same op as its dinp GEMM; both read
    // the input before d(act) is complete.
    if (a.rebuild_input) be_->swiglu_fwd(a.inp, a.swiglu_pre);
    LinearBwd plain = a;
    plain.dinp = a.dinp.defined() ? a.swiglu_dact : Tensor();
    plain.rebuild_input = false;
    plain.swiglu_pre = plain.swiglu_dact = Tensor();
    affine_bwd(plain);
    if (a.dinp.defined()) be_->swiglu_bwd(a.dinp, a.swiglu_dact, a.swiglu_pre);
    return;
  }
  if (a.dinp.defined()) {
    // inp gives the dinp GEMM its shapes only (it is rebuilt right after).
    be_->linear_bwd({.dinp = a.swiglu_dact, .dout = a.dout, .inp = a.inp, .weight = w_.w});
    be_->swiglu_bwd_rebuild({.dgate_up = a.dinp,
                             .act = a.rebuild_input ? a.inp : Tensor(),
                             .dout = a.swiglu_dact,
                             .gate_up = a.swiglu_pre});
  } else if (a.rebuild_input) {
    be_->swiglu_fwd(a.inp, a.swiglu_pre);
  }
  be_->linear_bwd({.dweight = grad_.w, .dbias = dbias, .dout = a.dout, .inp = a.inp, .weight = w_.w});
}

Tensor Linear::adapter_input(Tensor x) const {
  if (!dropout_now()) return x;
  const int64_t in = w_.lora_a.dim(1), n = x.numel() / in;
  const Tensor xd = lora_->dropped.view({lora_->dropped.numel()}).rows(0, n * in).view({n, in});
  apply_dropout(xd, x, false);
  return xd;
}

void Linear::apply_dropout(Tensor dst, Tensor src, bool accumulate) const {
  // The mask spans the full input width: a row-parallel rank holds columns [rank·in, (rank+1)·in).
  const int64_t in = w_.lora_a.dim(1), n = src.numel() / in;
  const int64_t width = row_parallel_ ? in * tp_.size : in, first_col = row_parallel_ ? in * tp_.rank : 0;
  be_->dropout({.out = dst.view({n, in}),
                .inp = src.view({n, in}),
                .p = lora_->dropout,
                .key = dropout_key_,
                .first_row = lora_->first_row,
                .row_stride = width,
                .first_col = first_col,
                .accumulate = accumulate});
}

void Linear::adapter_fwd(Tensor y, Tensor x) const {
  const int64_t n = x.numel() / w_.lora_a.dim(1);  // the scratch is [N, r]; x has n <= N rows
  const Tensor h = lora_->h.rows(0, n);
  // Row-parallel: h is this rank's partial sum; y's all-reduce after this sums the terms (linear.hpp).
  be_->linear_fwd({.out = h, .inp = adapter_input(x), .weight = w_.lora_a});
  be_->scale(h, lora_->scale);
  be_->linear_fwd({.out = y, .inp = h, .weight = w_.lora_b, .accumulate = true});
}

void Linear::adapter_bwd(Tensor dx, Tensor dy, Tensor x) const {
  const int64_t n = x.numel() / w_.lora_a.dim(1);
  const Tensor h = lora_->h.rows(0, n), dh = lora_->dh.rows(0, n);
  const Tensor xd = adapter_input(x);
  be_->linear_fwd({.out = h, .inp = xd, .weight = w_.lora_a});
  if (row_parallel_) tp_.sum(h);  // B's gradient needs the complete h
  be_->scale(h, lora_->scale);
  be_->linear_bwd({.dinp = dh, .dweight = grad_.lora_b, .dout = dy, .inp = h, .weight = w_.lora_b});
  be_->scale(dh, lora_->scale);
  if (!row_parallel_) tp_.sum(dh);  // A's gradient needs the complete dh
  // Column-parallel dx is summed over the group after this: the complete dh adds its term on rank 0 only.
  const Tensor dx_here = dx.defined() && (row_parallel_ || tp_.rank == 0) ? dx : Tensor();
  if (!dropout_now()) {
    be_->linear_bwd({.dinp = dx_here,
                     .dweight = grad_.lora_a,
                     .dout = dh,
                     .inp = x,
                     .weight = w_.lora_a,
                     .dinp_accumulate = dx_here.defined()});
    return;
  }
  be_->linear_bwd({.dweight = grad_.lora_a, .dout = dh, .inp = xd, .weight = w_.lora_a});
  if (!dx_here.defined()) return;
  // d(dh·A): the product goes through the scratch (xd is no longer needed), then the same mask.
  be_->linear_bwd({.dinp = xd, .dout = dh, .inp = x, .weight = w_.lora_a});  // inp: the shape only
  apply_dropout(dx_here, xd, true);
}

// ---- sequence parallelism (linear.hpp): whole rows inside, this rank's rows outside ----

void Linear::sp_column_fwd(const LinearFwd& a) const {
  if (tp_.overlap) return ring_column_fwd(a);
  LinearFwd whole = a;
  whole.inp = tp_.gather_rows(a.inp, tp_.sp->full);
  affine_fwd(whole, w_.b);
}

void Linear::sp_column_bwd(const LinearBwd& a) const {
  if (tp_.overlap && a.dinp.defined()) return ring_column_bwd(a);
  // The input is gathered again rather than kept from the forward: the saved per-layer tensor is
  // this rank's rows only.
  if (splits_bwd(a)) {
    // The gather runs under the dinp GEMM (which reads dout and W only), the reduce-scatter of
    // dinp under the weight-gradient GEMM (linear.hpp, "Backward collectives overlapped").
    const int64_t in = w_.w.dim(1), rows = a.inp.numel() / in * tp_.size;
    const Tensor x = TpGroup::leading(tp_.sp->full, rows, in), dx = TpGroup::leading(tp_.sp->full_grad, rows, in);
    const Comm::Op gathered = tp_.comm->all_gather_start(x, a.inp.view({rows / tp_.size, in}));
    // inp gives the op its shapes only: x is still being gathered.
    be_->linear_bwd({.dinp = dx, .dout = a.dout, .inp = x, .weight = w_.w});
    const Comm::Op scattered = tp_.comm->reduce_scatter_sum_start(a.dinp.view({rows / tp_.size, in}), dx);
    tp_.comm->wait(gathered);
    be_->linear_bwd(
        {.dweight = grad_.w, .dbias = a.bias_grad_done ? Tensor() : grad_.b, .dout = a.dout, .inp = x, .weight = w_.w});
    tp_.comm->wait(scattered);
    tp_.comm->wait_all();  // both were waited: this only recycles their events / requests
    return;
  }
  LinearBwd whole = a;
  whole.inp = tp_.gather_rows(a.inp, tp_.sp->full);
  if (a.dinp.defined()) whole.dinp = TpGroup::leading(tp_.sp->full_grad, whole.inp.dim(0), whole.inp.dim(1));
  affine_bwd(whole);
  if (a.dinp.defined()) tp_.sum_scatter_rows(a.dinp, whole.dinp);
}

void Linear::sp_row_fwd(const LinearFwd& a) const {
  if (tp_.overlap) return ring_row_fwd(a);
  const int64_t width = w_.w.dim(0), rows = a.out.numel() / width * tp_.size;
  LinearFwd whole = a;
  whole.out = TpGroup::leading(tp_.sp->full, rows, width);
  affine_fwd(whole, tp_.rank == 0 ? w_.b : Tensor());
  tp_.sum_scatter_rows(a.out, whole.out);
}

void Linear::sp_row_bwd(const LinearBwd& a) const {
  if (tp_.overlap) return ring_row_bwd(a);
  LinearBwd whole = a;
  whole.dout = tp_.gather_rows(a.dout, tp_.sp->full);
  whole.bias_grad_done = true;  // summed below, over this rank's rows
  affine_bwd(whole);
  if (a.bias_grad_done || !grad_.b.defined()) return;
  // Σ over this rank's rows of dout: partial over the group, summed by the Model with the other
  // replicated gradients (linear.hpp). The input rows only give the op its row count.
  const int64_t rows = a.dout.numel() / w_.w.dim(0), in = w_.w.dim(1);
  be_->linear_bwd({.dbias = grad_.b, .dout = a.dout, .inp = TpGroup::leading(a.inp, rows, in), .weight = w_.w});
}

void ColumnParallelLinear::fwd(const LinearFwd& a) const {
  if (a.swiglu_pre.defined())
    throw std::logic_error("ColumnParallelLinear::fwd: swiglu_pre is for the row-parallel linear after the SwiGLU");
  if (tp_.sequence_parallel()) return sp_column_fwd(a);
  affine_fwd(a, w_.b);
}

void ColumnParallelLinear::bwd(const LinearBwd& a) const {
  if (a.swiglu_pre.defined() && !fp8_fuses_swiglu_bwd(a)) {  // materialise dout = swiglu_bwd(...)
    be_->swiglu_bwd(a.dout, a.swiglu_dact, a.swiglu_pre);
    LinearBwd plain = a;
    plain.swiglu_pre = plain.swiglu_dact = Tensor();
    return bwd(plain);
  }
  // dinp is partial here (a sum over this rank's output features only): an epilogue acting on it
  // element-wise would see the wrong values.
  if (tp_.size > 1 && (a.gelu_pre.defined() || a.dinp_is_output_grad_of))
    throw std::logic_error("ColumnParallelLinear::bwd: dGELU and dinp column-sum epilogues need the TP-summed dinp");
  if (tp_.sequence_parallel()) return sp_column_bwd(a);
  if (tp_.size == 1 || !splits_bwd(a)) {
    affine_bwd(a);
    tp_.sum(a.dinp);
    return;
  }
  // The all-reduce of dinp runs under the weight-gradient GEMM, which does not read dinp (linear.hpp,
  // "Backward collectives overlapped"): the same two GEMMs affine_bwd's one call runs, in its order.
  be_->linear_bwd({.dinp = a.dinp, .dout = a.dout, .inp = a.inp, .weight = w_.w});
  const Comm::Op summed = tp_.comm->all_reduce_sum_start(a.dinp);
  be_->linear_bwd({.dweight = grad_.w,
                   .dbias = a.bias_grad_done ? Tensor() : grad_.b,
                   .dout = a.dout,
                   .inp = a.inp,
                   .weight = w_.w});
  tp_.comm->wait(summed);
  tp_.comm->wait_all();  // summed was waited: this only recycles its event / request
}

void RowParallelLinear::fwd(const LinearFwd& a) const {
  if (a.swiglu_pre.defined() && !fp8_fuses_swiglu_fwd()) {  // materialise inp = swiglu(swiglu_pre)
    be_->swiglu_fwd(a.inp, a.swiglu_pre);
    LinearFwd plain = a;
    plain.swiglu_pre = Tensor();
    return fwd(plain);
  }
  if (a.pre_gelu.defined())
    throw std::logic_error("RowParallelLinear::fwd: a GELU epilogue would act on a partial (pre-TP-sum) output");
  if (tp_.sequence_parallel()) return sp_row_fwd(a);
  if (tp_.size > 1 && tp_.overlap) return chunked_row_fwd(a);
  // The output is summed over the group: only rank 0 adds the replicated bias.
  affine_fwd(a, tp_.rank == 0 ? w_.b : Tensor());
  tp_.sum(a.out);
}

void RowParallelLinear::bwd(const LinearBwd& a) const {
  if (a.swiglu_pre.defined() && (a.gelu_pre.defined() || a.dinp_is_output_grad_of || !a.swiglu_dact.defined()))
    throw std::logic_error(
        "RowParallelLinear::bwd: swiglu_pre needs swiglu_dact and takes neither gelu_pre nor dinp_is_output_grad_of");
  if (tp_.sequence_parallel()) return sp_row_bwd(a);
  affine_bwd(a);
}

}  // namespace recipe::core
