// Where every parameter lives: its global name and shape, the slice this rank holds (TP shard),
// and its place in the flat buffers of the ParamStore. Built by walking the family's tensor table
// (family/tensor_table.hpp), which says what each tensor is; this file says where.
//
// Flat buffer layout (element offsets, the same for master weights, compute copy, grads, Adam m/v):
//
//   [ decay group ............................ ][ no-decay group ....................... ]
//     embeddings (if optimizer.decay_embeddings)   embeddings (otherwise)
//     per layer: q|k|v, proj, fc1 | gate|up, fc2 | down
//     lm_head (untied; follows decay_embeddings)   per layer: norm weights/biases, linear biases
//                                                  final_norm
//
// With LoRA adapters (ModelShape::lora_rank > 0) the two groups hold only the trainable tensors
// (the adapters; trainable() in the tensor table decides), and a third region after them holds the
// frozen base, in table order:
//
//   [ decay group ][ no-decay group ][ frozen base (no gradient, master or Adam state) ]
//   '-------- trainable_numel -------'
//
// The gradient, master and Adam buffers of the ParamStore cover only the trainable prefix; the
// compute copy covers all of it. Without adapters the frozen region is empty and the layout is the
// one below, element for element.
//
// LoRA in FP8 with peft.base_fp8_only (ModelShape::fp8_frozen): the frozen weights of the FP8
// linears close the frozen region as its own sub-region, in table order, held only in FP8 (one
// byte per element, the ParamStore's FP8 buffer; no compute copy):
//
//   [ decay ][ no-decay ][ frozen base, compute dtype ][ frozen FP8 weights ]
//                                                      '-- fp8_begin .. total_numel
//
// Element offsets keep their meaning in it (its byte offset is offset - fp8_begin), so packs stay
// 64-element (here 64-byte) aligned.
//
// i.e. each group holds the table's rows of that group in table order: the embedding rows, then
// layer by layer the layer rows, then the head rows. So AdamW runs as two calls, one per group.
// Tensors that one GEMM reads together are "packs" (adjacent rows of one role and part in the
// table) placed back to back without gaps: q,k,v weights ([Hq·D + 2·Hkv·D, C] as one matrix),
// their biases, and Llama's gate,up weights ([2F, C]) and biases. Each pack starts on a 64-element
// boundary (256 bytes of f32) for vectorized device access; the gaps are zero and stay zero.
//
// Pipeline stages hold only their layers (global layer numbers keep their names); the first stage
// adds the embeddings, the last the final norm and the classifier, and with tied embeddings the last
// stage holds its own copy of the word embedding (kept equal to the first stage's by summing the
// two gradients over the embedding group). With virtual pipeline stages a rank holds several model
// chunks (runs of consecutive layers, not adjacent to each other); its layer rows go chunk after
// chunk in model order, and the embeddings stay with the model's first chunk, the head with its last.
//
// TP sharding, the table's shard rule (column-parallel: dim 0 of q/k/v/fc1/gate/up and their
// biases, vocab rows of the embedding and lm_head; row-parallel: dim 1 of proj/fc2/down). Norms,
// positions and row-parallel biases are replicated. Every TP rank holds whole KV heads of its own
// (num_kv_heads % tp == 0; the resolver refuses anything else).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "family/tensor_table.hpp"
#include "core/model/model_shape.hpp"
#include "plan/plan.hpp"

namespace recipe::core {

struct ParamSpec {
  std::string name;  // global, HF-like: "layers.3.attention.q.weight"
  std::vector<int64_t> global_shape;
  int shard_dim = -1;                // -1: not sharded (this rank holds the full tensor)
  int64_t shard_begin = 0;           // first index along shard_dim held by this rank
  int64_t shard_size = 0;            // extent along shard_dim held by this rank
  std::vector<int64_t> local_shape;  // global_shape with shard_dim replaced by shard_size
  int64_t offset = 0;                // first element in the flat buffers
  int64_t numel = 0;                 // local element count
  bool weight_decay = false;
  InitKind init = InitKind::normal;
  double init_std = 0;  // normal kinds only
  // When the gradient is final in a backward pass, as a count of backward "phases": 0 = the
  // classifier and final norm (first to finish), 1 + (the rank's layers above l) for layer l, and
  // one past the rank's lowest layer for the embeddings (last to finish). The chunks of a virtual
  // pipeline finish their last backward last chunk first, so this order holds across chunks too. Buckets of the DP reduction start when
  // all their tensors are final.
  int ready_phase = 0;
  bool trainable = true;             // false: frozen (a LoRA base): no gradient, master or Adam state
  bool fp8 = false;                  // held only in FP8 (the layout's FP8 region; see above)
  const TensorDecl* decl = nullptr;  // its row of the family's tensor table
  int layer = -1;                    // global layer number (layer rows), else -1
  bool tp_replicated() const { return shard_dim < 0; }

  // Global flat (row-major) index of local element i; the init RNG is keyed by it.
  int64_t global_index(int64_t local) const;
};

// One model chunk a rank holds: consecutive layers, and whether it is the model's first chunk
// (it holds the embeddings and starts from the tokens) or its last (final norm, classifier, loss).
struct LayerChunk {
  int first_layer = 0, num_layers = 0;  // global layer numbers
  bool first_stage = false, last_stage = false;
};

struct ParamLayout {
  std::vector<ParamSpec> params;
  int64_t decay_begin = 0, decay_numel = 0;  // [decay_begin, decay_begin+decay_numel)
  int64_t nodecay_begin = 0, nodecay_numel = 0;
  int64_t frozen_begin = 0, frozen_numel = 0;  // the frozen base (empty without LoRA)
  int64_t fp8_begin = 0, fp8_numel = 0;        // its FP8-only tail, [fp8_begin, total_numel)
  int64_t trainable_numel = 0;                 // [0, trainable_numel): both groups, gaps included
  int64_t total_numel = 0;                     // including alignment gaps and the frozen region
  int tp_size = 1, tp_rank = 0;
  // The rank's model chunks in model order: one (its pipeline stage's layers), or virtual_pp.
  std::vector<LayerChunk> chunks;
  int num_layers = 0;                          // the rank's layers, every chunk together
  bool first_stage = true, last_stage = true;  // it holds the embeddings / the head
  int64_t align = 64;                          // pack alignment in elements (see LayoutOptions)
  int num_phases() const { return num_layers + 2; }
  // Elements the compute copy holds: all but the FP8-only tail.
  int64_t compute_numel() const { return total_numel - fp8_numel; }

  const ParamSpec* find(std::string_view name) const;
  const ParamSpec& get(std::string_view name) const;  // throws std::out_of_range naming it
  int64_t num_params() const;                         // local, without gaps
  // The tensors bound to `role`/`part` of layer `layer` (-1: outside the layers), in layout order:
  // one, none (the model lacks it, or this stage does not hold it), or a pack's members.
  std::vector<const ParamSpec*> bound(Role role, Part part, int layer = -1) const;
};

constexpr int64_t kParamAlign = 64;

struct LayoutOptions {
  int tp_size = 1, tp_rank = 0;
  // This rank's model chunks in model order; empty: every layer in one chunk with the embeddings
  // and the head (one pipeline stage).
  std::vector<LayerChunk> chunks;
  // Every pack (and each group's end) starts on a multiple of this many elements. ZeRO-1 uses
  // kParamAlign·dp, so any run of whole packs splits into dp equal, aligned chunks.
  int64_t align = kParamAlign;
};

ParamLayout build_param_layout(const ModelShape& shape, const plan::OptimizerConfig& opt, const LayoutOptions& options);
ParamLayout build_param_layout(const ModelShape& shape, const plan::OptimizerConfig& opt, int tp_size = 1,
                               int tp_rank = 0);

}  // namespace recipe::core
