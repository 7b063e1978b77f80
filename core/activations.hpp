// The activation arena of one model: every tensor forward and backward touch, carved out of ONE
// backend allocation made at construction (sizes follow from the plan), so a training step never
// allocates.
//
// Per layer (act dtype unless noted; N = B·T rows, QKV = (Hq+2·Hkv)·D, FI = F (GELU) or 2F (SwiGLU)):
//   residual [N,C]     layer input (the residual stream)              saved in every mode
//   ln1 [N,C], ln1_mean/ln1_rstd [N] f32 (mean only for LayerNorm)
//   qkv [N,QKV]        after RoPE when the model uses it
//   atty [N,Hq·D], lse [B,Hq,T] f32
//   residual2 [N,C]    residual + attention projection
//   ln2 [N,C], ln2_mean/ln2_rstd [N] f32
//   fc_pre [N,FI]      GELU: pre-activation of fc1; SwiGLU: [gate|up]
//   fc_act [N,F]       GELU / SwiGLU output (input of fc2 / down)
// With recompute = none every layer keeps all of these; with recompute = full only `residual` is
// kept per layer and one scratch set holds the rest while a layer is (re)computed.
// Shared: final residual/norm, one projection output [N,C], a logits chunk [chunk,Vp], token ids,
// and the backward scratch (dresidual, dln [N,C], datty, dqkv, dfc [N,FI], dfc_act [N,F]).
#pragma once

#include <cstdint>
#include <vector>

#include "core/model_shape.hpp"
#include "kernels/tensor.hpp"

namespace recipe::core {

// Hands out aligned tensors from a byte range. With a null base it only measures (tensor pointers
// are then meaningless), which is how the arena size is found before the one allocation.
class Carver {
 public:
  Carver(void* base, kernels::Device device) : base_(reinterpret_cast<uintptr_t>(base)), device_(device) {}
  kernels::Tensor take(kernels::DType t, std::initializer_list<int64_t> shape);
  size_t used() const { return used_; }

 private:
  uintptr_t base_;
  kernels::Device device_;
  size_t used_ = 0;
};

struct LayerActs {
  kernels::Tensor residual, ln1, ln1_mean, ln1_rstd, qkv, atty, lse, residual2, ln2, ln2_mean,
      ln2_rstd, fc_pre, fc_act;
};

struct Activations {
  std::vector<LayerActs> saved;  // L entries; with recompute only .residual is set
  LayerActs scratch;             // recompute: the layer being (re)computed; unused otherwise
  bool recompute = false;
  kernels::Tensor final_residual, lnf, lnf_mean, lnf_rstd;
  kernels::Tensor proj_out;      // attention or MLP output projection before the residual add
  kernels::Tensor logits;        // [chunk_rows, Vp]
  int64_t chunk_rows = 0;
  kernels::Tensor inputs, targets;  // i32 [N]
  kernels::Tensor dresidual, dln, datty, dqkv, dfc, dfc_act;

  // The tensors of layer l for the current pass: its own (recompute = none) or the scratch set
  // with the layer's saved residual.
  LayerActs layer(int l) const {
    if (!recompute) return saved[size_t(l)];
    LayerActs a = scratch;
    a.residual = saved[size_t(l)].residual;
    return a;
  }
};

// Rows per classifier chunk: the largest count whose logits fit in ~64 MiB (at least 1, at most N).
int64_t classifier_chunk_rows(int64_t rows, int64_t padded_vocab, kernels::DType act);

// Assigns every tensor of `acts` from the carver.
void carve_activations(Carver& c, Activations& acts, const ModelShape& s, int micro_batch,
                       bool recompute, kernels::DType act);

}  // namespace recipe::core
