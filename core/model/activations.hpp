// The activation arena of one model: every tensor forward and backward touch, carved out of ONE
// backend allocation made at construction, so a training step never allocates. What the arena
// holds, for how long and at which recompute level is declared once, in family/activations.hpp
// (declare_activations); this file turns that list into tensors, in its order, and the memory
// estimate (plan/memory_estimate.cpp) sums the same list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/model_shape.hpp"
#include "family/activations.hpp"
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
  // A declared buffer of its own (`act`: the activation dtype); recorded under its label.
  kernels::Tensor take(const ActBuffer& b, kernels::DType act);
  // Reserves `bytes` for tensors laid out by hand with at(); returns the region's offset.
  size_t reserve(size_t bytes, const char* what);
  // A tensor at byte `offset` of the arena (inside a reserved region); not recorded.
  kernels::Tensor at(size_t offset, kernels::DType t, std::initializer_list<int64_t> shape) const;
  kernels::Tensor at(size_t offset, kernels::DType t, const std::vector<int64_t>& shape) const;
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
  // qk-norm: rope(qk_norm(qkv)), what attention reads (family/activations.hpp); undefined without it.
  kernels::Tensor qkv_normed;
  // The one buffer standing in for every layer's ln1/ln2 (norm) and fc_act (gelu, norm, full).
  kernels::Tensor shared_ln, shared_fc_act;
  // Sequence parallelism: [N, C] whole rows (SequenceParallelScratch); undefined without it.
  kernels::Tensor sp_full, sp_full_grad;
  // The vocab-parallel loss of this slot (last stage, tp > 1): row maxima [chunk], sums [2, chunk].
  kernels::Tensor loss_rowmax, loss_sums;

  // The tensors of layer l for the current pass: its own (shared buffers where the level says so),
  // or (full) the scratch set with the layer's saved residual.
  LayerActs layer(int l) const {
    if (level != Recompute::full) return saved[size_t(l)];
    LayerActs a = scratch;
    a.residual = saved[size_t(l)].residual;
    return a;
  }
};

// The declaration's knobs for a model chunk's local shape (heads, kv_heads, ffn and padded_vocab
// already divided by tp; seq the rank's tokens of a sample). `vocab_parallel_loss`: the last stage
// under tensor parallelism.
ActivationKnobs activation_knobs(const ModelShape& local, int micro_batch, Recompute level, kernels::DType act,
                                 bool vocab_parallel_loss = false);

// Assigns every tensor of `acts` (one micro-batch slot of `layers` layers) from the carver, buffer
// by buffer of `decl`. `shared`: an Activations carved earlier from the same declaration (another
// slot, or another model chunk of the rank) whose rank-scope buffers are reused; nullptr carves them.
void carve_activations(Carver& c, Activations& acts, const std::vector<ActBuffer>& decl, int layers, Recompute level,
                       kernels::DType act, const Activations* shared = nullptr);
// The same for a local shape's own declaration (without the vocab-parallel loss scratch).
void carve_activations(Carver& c, Activations& acts, const ModelShape& s, int micro_batch, Recompute level,
                       kernels::DType act, const Activations* shared = nullptr);

// The breakdown of one model's arena (`slots` activation sets), by carving with a null base.
std::vector<ArenaEntry> activation_breakdown(const ModelShape& s, int micro_batch, Recompute level, kernels::DType act,
                                             int slots = 1);

}  // namespace recipe::core
