// The activation arena of one model: every tensor forward and backward touch, carved out of ONE
// backend allocation made at construction (sizes follow from the plan), so a training step never
// allocates.
//
// Per layer (act dtype unless noted; N = B·T rows, QKV = (Hq+2·Hkv)·D, FI = F (GELU) or 2F (SwiGLU);
// R = this rank's rows of the residual stream: N, or N/tp with sequence parallelism, linear.hpp):
//   residual [R,C]     layer input (the residual stream)              saved in every mode
//   ln1 [R,C], ln1_mean/ln1_rstd [R] f32 (mean only for LayerNorm)
//   qkv [N,QKV]        after RoPE when the model uses it
//   atty [N,Hq·D], lse [B,Hq,T] f32
//   residual2 [R,C]    residual + attention projection
//   ln2 [R,C], ln2_mean/ln2_rstd [R] f32
//   fc_pre [N,FI]      GELU: pre-activation of fc1; SwiGLU: [gate|up]
//   fc_act [N,F]       GELU / SwiGLU output (input of fc2 / down)
// What each recompute level keeps per layer (the rest lives in one shared buffer and is rebuilt in
// backward from what is kept):
//   none  everything above
//   gelu  everything but fc_act: backward recomputes act(fc_pre) just before fc2's weight gradient
//         (llm.c's default, -r 1)
//   norm  gelu, and ln1/ln2 too: backward recomputes them from residual/residual2 (the saved
//         mean/rstd stay)
//   full  only `residual`; one scratch set holds the rest while a layer is (re)computed
//
// Shared by every layer and every pipeline slot (each buffer below lives only inside one layer's
// forward or backward, or inside the classifier), overlaid in ONE "transient" region:
//   offset 0:        logits chunk [chunk,Vl]       classifier only (plan::classifier_chunk_rows)
//   offset 0:        fc_act [N,F] (gelu/norm/full) fc1 forward → fc2 forward; fc2 backward
//   after fc_act:    dfc [N,FI], then dfc_act [N,F] (SwiGLU)      MLP backward
//   after fc_act:    proj_out [R,C]                 forward: projection output before the residual add
//   offset 0:        datty [N,Hq·D], then dqkv [N,QKV]            attention backward
// No op reads and writes overlapping parts of the region, and no part is live across two phases.
// Sequence parallelism adds two [N,C] buffers of their own (sp_full, sp_full_grad: the whole rows
// a linear, the embedding or the classifier gathers or reduce-scatters, linear.hpp).
// Per slot: the saved layers, final residual/norm (+ stats) [R,C], token ids [N], dresidual [R,C]
// (the gradient handed between pipeline stages) and dln [R,C] (the classifier's d(final norm)
// that backward consumes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/model_shape.hpp"
#include "kernels/tensor.hpp"
#include "plan/enums.hpp"

namespace recipe::core {

// trainer.recompute, in increasing order of memory saved (the plan's enum, plan/enums.hpp).
using Recompute = plan::Recompute;

// One named entry of an arena's breakdown: `count` buffers of `bytes` each (alignment included).
struct ArenaEntry {
  std::string name;
  size_t bytes = 0;
  int64_t count = 0;
};

// Hands out aligned tensors from a byte range. With a null base it only measures (tensor pointers
// are then meaningless), which is how the arena size is found before the one allocation. Every
// take is recorded under its name, which gives the breakdown of docs/performance.md.
class Carver {
 public:
  Carver(void* base, kernels::Device device) : base_(static_cast<char*>(base)), device_(device) {}
  kernels::Tensor take(kernels::DType t, std::initializer_list<int64_t> shape, const char* what = "other");
  // Reserves `bytes` for tensors laid out by hand with at(); returns the region's offset.
  size_t reserve(size_t bytes, const char* what);
  // A tensor at byte `offset` of the arena (inside a reserved region); not recorded.
  kernels::Tensor at(size_t offset, kernels::DType t, std::initializer_list<int64_t> shape) const;
  size_t used() const { return used_; }
  const std::vector<ArenaEntry>& entries() const { return entries_; }

 private:
  void record(const char* what, size_t bytes);
  char* base_;  // null: only measure
  kernels::Device device_;
  size_t used_ = 0;
  std::vector<ArenaEntry> entries_;
};

struct LayerActs {
  kernels::Tensor residual, ln1, ln1_mean, ln1_rstd, qkv, atty, lse, residual2, ln2, ln2_mean, ln2_rstd, fc_pre, fc_act;
};

struct Activations {
  std::vector<LayerActs> saved;  // L entries; with recompute = full only .residual is set
  LayerActs scratch;             // recompute = full: the layer being (re)computed; unused otherwise
  Recompute level = Recompute::none;
  kernels::Tensor final_residual, lnf, lnf_mean, lnf_rstd;
  kernels::Tensor proj_out;  // attention or MLP output projection before the residual add
  kernels::Tensor logits;    // [chunk_rows, Vp]
  int64_t chunk_rows = 0;
  kernels::Tensor inputs, targets;  // i32 [N]
  kernels::Tensor positions;        // i32 [N], each token's position in its sample (packed shapes only)
  kernels::Tensor dresidual, dln, datty, dqkv, dfc, dfc_act;
  // The one buffer standing in for every layer's ln1/ln2 (norm) and fc_act (gelu, norm, full).
  kernels::Tensor shared_ln, shared_fc_act;
  // Sequence parallelism: [N, C] whole rows (SequenceParallelScratch); undefined without it.
  kernels::Tensor sp_full, sp_full_grad;

  // The tensors of layer l for the current pass: its own (shared buffers where the level says so),
  // or (full) the scratch set with the layer's saved residual.
  LayerActs layer(int l) const {
    if (level != Recompute::full) return saved[size_t(l)];
    LayerActs a = scratch;
    a.residual = saved[size_t(l)].residual;
    return a;
  }
};

// Assigns every tensor of `acts` from the carver. `shared`: an Activations carved earlier by this
// function for the same shape and level (another pipeline slot) whose shared buffers are reused;
// nullptr carves them.
void carve_activations(Carver& c, Activations& acts, const ModelShape& s, int micro_batch, Recompute level,
                       kernels::DType act, const Activations* shared = nullptr);

// The breakdown of one model's arena (`slots` activation sets), by carving with a null base.
std::vector<ArenaEntry> activation_breakdown(const ModelShape& s, int micro_batch, Recompute level, kernels::DType act,
                                             int slots = 1);

}  // namespace recipe::core
