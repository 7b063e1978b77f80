// The column- and row-parallel linears: the backend calls of the local affine map and the TP
// reductions around them (see linear.hpp). The op sequence is the one the block issued before the
// seam existed, call for call, so training stays bitwise identical.
#include "core/model/linear.hpp"

#include <stdexcept>

namespace recipe::core {

using kernels::Tensor;

void TpGroup::sum(Tensor t) const {
  if (size > 1) comm->all_reduce_sum(t);
}

void Linear::affine_fwd(const LinearFwd& a, Tensor bias) const {
  be_->linear_fwd({.out = a.out, .inp = a.inp, .weight = w_.w, .bias = bias, .pre_gelu = a.pre_gelu});
}

void Linear::affine_bwd(const LinearBwd& a) const {
  if (a.rebuild_input && !a.gelu_pre.defined())
    throw std::logic_error("Linear::bwd: rebuild_input needs gelu_pre (the input is rebuilt as gelu(gelu_pre))");
  const Tensor dbias = a.bias_grad_done ? Tensor() : grad_.b;
  const Tensor dinp_sum = a.dinp_is_output_grad_of ? a.dinp_is_output_grad_of->bias_grad() : Tensor();
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

void ColumnParallelLinear::fwd(const LinearFwd& a) const { affine_fwd(a, w_.b); }

void ColumnParallelLinear::bwd(const LinearBwd& a) const {
  // dinp is partial here (a sum over this rank's output features only): an epilogue acting on it
  // element-wise would see the wrong values.
  if (tp_.size > 1 && (a.gelu_pre.defined() || a.dinp_is_output_grad_of))
    throw std::logic_error("ColumnParallelLinear::bwd: dGELU and dinp column-sum epilogues need the TP-summed dinp");
  affine_bwd(a);
  tp_.sum(a.dinp);
}

void RowParallelLinear::fwd(const LinearFwd& a) const {
  if (a.pre_gelu.defined())
    throw std::logic_error("RowParallelLinear::fwd: a GELU epilogue would act on a partial (pre-TP-sum) output");
  // The output is summed over the group: only rank 0 adds the replicated bias.
  affine_fwd(a, tp_.rank == 0 ? w_.b : Tensor());
  tp_.sum(a.out);
}

void RowParallelLinear::bwd(const LinearBwd& a) const { affine_bwd(a); }

}  // namespace recipe::core
