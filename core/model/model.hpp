// GPT / Llama decoder with explicit forward and backward over one micro-batch.
//
// One block structure serves both families; the plan's fields choose the parts: LayerNorm or
// RMSNorm, learned positions or RoPE, GELU MLP (fc1/fc2) or SwiGLU (gate|up, down), biases,
// tied or untied classifier, MHA or GQA. Pre-norm:
//   x = embed(tokens) (+ positions)
//   per layer: x2 = x + proj(attention(rope(qk_norm(qkv(norm1(x))))));  x = x2 + mlp(norm2(x2))
//   (qk_norm: Qwen3's per-head RMSNorm of q and k; the identity without it)
//   logits = final_norm(x) · Wᵀ   (W = embedding.word.weight when tied, else lm_head.weight)
// The classifier runs in row chunks: logits → loss → dlogits in place → dW, d(final_norm out),
// so the full [N, Vp] logits never exist.
//
// Parameters come from a ParamStore (compute dtype); gradients accumulate (+=) into its f32 grads.
//
// Parallelism (the ParamLayout says which part of the model this rank holds):
// - Tensor parallel (Megatron): q|k|v, fc1 and gate|up are column-parallel (this rank's heads / FFN
//   columns), proj, fc2 and down row-parallel (their partial outputs are summed over the TP group;
//   the replicated bias is added by TP rank 0 only); the word embedding and the classifier are
//   vocab-parallel (partial embeddings summed; the loss combines row max and Σexp over the group).
//   The input gradients of column-parallel linears are summed over the group before the norm
//   backward. The linear objects (linear.hpp) own these reductions and the bias rule. Norms, positions and row-parallel biases are replicated; their gradients come out
//   equal on every TP rank, except qk-norm's q_norm/k_norm weights (replicated, [head_dim]), which
//   see only this rank's heads: their gradients are summed over the group once per step, with the
//   sequence-parallel sums below (set_phase_hook).
// - Sequence parallel (with TP; linear.hpp says how): the residual stream, the norms and the stage
//   boundary hold this rank's N/tp token rows. The embedding's partial rows are reduce-scattered
//   (its backward all-gathers the gradient); the final norm runs on this rank's rows, the
//   classifier on all of them (gathered; d(final norm) reduce-scattered back). The gradients of the
//   replicated tensors computed from this rank's rows (norm weights and biases, row-parallel
//   biases) are partial sums; the step's last backward sums each layer's over the TP group right
//   before it reports that layer's phase (see set_phase_hook), so DP and the optimizer see them
//   complete and equal on every TP rank, as without sequence parallelism.
// - Pipeline parallel: this rank runs the stage's layers only. A stage's input is the residual
//   stream [N, C] received from the previous stage (stage_input); its output the residual stream after
//   its last layer (stage_output). Backward mirrors it with stage_output_grad / stage_input_grad.
//   `slots` activation sets let 1F1B keep several micro-batches in flight. With virtual pipeline
//   stages a rank holds several model chunks (ParamLayout::chunks): one Model per chunk, binding
//   that chunk's layers from the rank's one ParamStore; the chunks share the transient region of
//   their arenas (only one of them computes at a time), each keeps its own slots.
// - Context parallel: this rank holds seq / cp tokens of every sample, an early and a late chunk
//   (ring_attention.hpp); token-wise layers run on them, RoPE and learned positions use their
//   global positions, attention is ring attention over the CP group. shape().seq is the local
//   length. Parameter gradients are this rank's share; the trainer sums them over the CP group.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/model/activations.hpp"
#include "core/model/linear.hpp"
#include "core/model/model_shape.hpp"
#include "core/parallel/comm.hpp"
#include "core/model/param_store.hpp"
#include "core/model/rope_table.hpp"
#include "family/linears.hpp"
#include "kernels/ops.hpp"

namespace recipe::core {

class RingAttention;

// "none" | "gelu" | "norm" | "full" (see core/model/activations.hpp); throws std::invalid_argument
// naming trainer.recompute otherwise.
Recompute parse_recompute(const std::string& s);
const char* recompute_name(Recompute r);  // the recipe spelling (plan/enums.hpp); "<invalid>" off the enum
// r itself; throws std::invalid_argument naming trainer.recompute for a value cast from outside the
// enum (a plan built in code rather than by the resolver).
Recompute checked_recompute(Recompute r);

// The shape of the part of the model one rank computes in model chunk `chunk`: the chunk's layer
// count and the rank's TP share of heads, KV heads, FFN columns and vocabulary rows.
ModelShape local_shape(const ModelShape& global, const ParamLayout& layout, int chunk = 0);

class Model {
 public:
  // `tp`: the tensor-parallel group (nullptr or a group of one: no TP); it must match the layout's
  // tp_size. `slots`: activation sets (micro-batches in flight at once), ≥ 1. `chunk`: which of the
  // layout's model chunks this model runs. `share_transient`: another chunk's model on this rank
  // whose transient region (and full-recompute scratch) this one reuses; it must outlive this one.
  // `cp`: the context-parallel group (nullptr or a group of one: none); seq % (2·cp) == 0.
  Model(const ModelShape& shape, int micro_batch, Recompute recompute, kernels::Backend& backend, ParamStore& params,
        Comm* tp = nullptr, int slots = 1, int chunk = 0, const Model* share_transient = nullptr, Comm* cp = nullptr);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelShape& shape() const { return s_; }
  const ModelShape& local() const { return ls_; }
  int micro_batch() const { return B_; }
  int64_t rows() const { return N_; }  // tokens per micro-batch (B·T)
  // This rank's rows of the residual stream (the stage tensors): N, or N/tp with sequence parallelism.
  int64_t residual_rows() const { return R_; }
  int slots() const { return int(acts_.size()); }
  bool first_stage() const { return first_stage_; }
  bool last_stage() const { return last_stage_; }
  size_t activation_bytes() const { return arena_bytes_; }
  Recompute recompute() const { return recompute_; }
  // What the arena holds, by buffer name (every slot together).
  const std::vector<ArenaEntry>& activation_breakdown() const { return arena_entries_; }

  // ---- one micro-batch through this stage (pipeline API) ----
  // `tokens`: host int32 [B, T+1] (row b = one sample); inputs are [:, :T], targets [:, 1:].
  void load_tokens(int slot, const int32_t* tokens);
  // Masked data: inputs and targets already split (each host int32 [B·T]; a target of -1 has no
  // loss). Checked with check_split_tokens. `positions` (host int32 [B·T], each token's position
  // inside its sample, restarting at 0; see kernels/ops.hpp) is read when the shape is packed
  // (ModelShape::packed: RoPE and attention then stay inside each sample) and must be given then.
  void load_split_tokens(int slot, const int32_t* inputs, const int32_t* targets, const int32_t* positions = nullptr);
  // [R, C] act dtype (R = residual_rows()). Non-first stages: the caller fills stage_input before forward. Non-last
  // stages: stage_output is valid after forward; the caller fills stage_output_grad before backward.
  // Non-first stages: stage_input_grad is valid after backward.
  kernels::Tensor stage_input(int slot) const;
  kernels::Tensor stage_output(int slot) const;
  kernels::Tensor stage_output_grad(int slot) const;
  kernels::Tensor stage_input_grad(int slot) const;
  // The global index of the slot's first token (its first sample's index in the run's sample
  // stream × seq), which the adapter dropout mask is keyed by (linear.hpp); set before forward.
  void set_first_token(int slot, int64_t token) { first_rows_.at(size_t(slot)) = token; }
  // The slot's device token ids, i32 [N] (first stage: inputs; last stage: targets), as
  // load_tokens leaves them; a recorded (CUDA-graph) step uploads into them directly.
  kernels::Tensor input_tokens(int slot) const { return acts_.at(size_t(slot)).inputs; }
  kernels::Tensor target_tokens(int slot) const { return acts_.at(size_t(slot)).targets; }
  // Last stage: `losses` (device f32 [N]) receives the per-token losses; with `with_grad` the
  // classifier's backward runs here too, row r scaled by dloss[r] (device f32 [N]: the weight of
  // row r's loss in the objective, written by the loss component, core/train/loss.hpp; undefined
  // without with_grad). Other stages ignore both.
  void forward(int slot, bool with_grad, kernels::Tensor losses, kernels::Tensor dloss);
  // Gradients accumulate into the ParamStore. The phase hook (if set) is called with each
  // ParamSpec::ready_phase value of this chunk once the gradients of that phase are final for this
  // micro-batch (0, then this chunk's layers' phases; the embedding phase num_layers+1 is left to
  // the caller, who sums the tied embedding over the embedding group first).
  void backward(int slot);
  // The hook is set for the step's last backward only (Trainer::backward_micro): the phases it
  // reports are final for the whole step. Sequence parallelism and qk-norm under TP rely on that:
  // a phase's partial replicated gradients are summed over the TP group just before the hook hears
  // of it, once per step. (A step's last backward without a hook leaves them partial.)
  void set_phase_hook(std::function<void(int)> hook) { phase_hook_ = std::move(hook); }
  // FP8: on starts a pass of micro-batches (a training step, an evaluation) in which each FP8
  // linear casts its weight at its first use and keeps the cast until the pass ends (off); the
  // weights must not change inside a pass. Off (the default) recasts at every use.
  // record_amax: the pass computes gradients, so delayed scaling records its amaxes (linear.hpp).
  void fp8_weight_pass(bool on, bool record_amax = false);
  // Delayed scaling, once per optimizer step after the backward: the step's amaxes max-reduced
  // over `groups` (each one packed all-reduce), pushed into the histories, scales recomputed.
  // Device work only (capturable). Nothing to do under current scaling.
  void fp8_end_step(const std::vector<Comm*>& groups);
  // Delayed scaling's histories of this chunk, f32 [linears · kFp8TensorsPerLinear, H]: rows
  // [3·i, 3·i + 3) are x, W, dy of entry i of linear_list() (layer-major, so local layer l's rows
  // start at l · fp8_history_rows_per_layer()); undefined under current scaling. A checkpoint saves
  // and restores them.
  kernels::Tensor fp8_amax_history() const { return fp8_hist_.history; }
  int64_t fp8_history_rows_per_layer() const { return linears_per_layer_ * kFp8TensorsPerLinear; }
  int64_t linears_per_layer() const { return linears_per_layer_; }
  // This chunk's block linears, flat ({layer, role}; family/linears.hpp): FP8 caches, histories and
  // cells are indexed by it.
  const std::vector<LinearRef>& linear_list() const { return linear_list_; }
  // After fp8_amax_history() was overwritten (a resume): recompute the scales from it; the next
  // step casts with them.
  void fp8_history_restored();
  // Delayed scaling's casts inside the kernels that produce their operands (Fp8Scratch::
  // fuse_producers): always on; tests turn them off to prove the fused path gives the same bits.
  void fp8_fuse_producers(bool on) { fp8_.fuse_producers = on; }
  int first_layer() const { return first_layer_; }
  // peft.base_fp8_only: casts this chunk's FP8-only frozen weights (ParamSpec::fp8) into their FP8
  // bytes, once, from the values the ParamStore's source gives (the seeded init or the checkpoint
  // the base was loaded from): amax over the whole weight (max-reduced over the TP group), scale
  // and cast exactly as a per-pass cast of the compute copy would (Linear::fp8_weight), so the
  // GEMMs read the same bytes. Two phases, so that a failed read never leaves TP peers waiting in
  // a collective: stage (host only, may throw: the values in the compute dtype and their local
  // amaxes) and quantize (the TP max and the casts; without a staged set it reads each weight just
  // before its cast, so the host holds one weight at a time). After every initialization or load
  // of the base; nothing to do without such weights.
  void stage_frozen_base();
  void quantize_frozen_base();
  // The weights hook (if set) is called by forward with each ParamSpec::ready_phase value of this
  // chunk right before it first reads that phase's weights, in forward order (descending: the
  // embeddings, the layers bottom-up, then 0 before the final norm and the classifier). ZeRO-1
  // waits there for the all-gather of those weights only (GradSync::wait_weights), so a layer
  // computes as soon as its own weights have arrived. Set once; every forward calls it.
  void set_weights_hook(std::function<void(int)> hook) { weights_hook_ = std::move(hook); }

 private:
  // Generation (incremental_decoder.hpp) runs this model's bound weights, linears and norms over a
  // KV cache instead of the training activations.
  friend class IncrementalDecoder;

  struct Norm {
    kernels::Tensor w, b;
  };
  struct LayerParams {
    Norm norm1, norm2;
    LinearTensors qkv, proj, fc_in, fc_out;
    kernels::Tensor q_norm, k_norm;  // qk-norm's per-head weights [head_dim] (undefined without it)
  };
  // One layer's linears (the seam, linear.hpp), built from the bound weights and gradients; the
  // block calls only these for its linear maps and their TP reductions.
  struct LayerLinears {
    ColumnParallelLinear qkv;
    RowParallelLinear proj;
    ColumnParallelLinear fc_in;
    RowParallelLinear fc_out;
  };
  // A layer's linear of table role `role` (the structs above keep fixed fields; the flat linear
  // list addresses them by role).
  static const LinearTensors& tensors_of(const LayerParams& p, Role role);
  static Linear& linear_of(LayerLinears& l, Role role);
  struct Params {
    std::vector<LayerParams> layers;  // this stage's, local index
    kernels::Tensor word, position, classifier;
    Norm final_norm;
  };
  struct LossScratch {
    kernels::Tensor rowmax, sums;
  };  // vocab-parallel loss, [chunk], [2, chunk]

  Params bind_params(bool grads, const LayerChunk& chunk) const;
  void make_linears();
  // The embedding's and the classifier's TP sums (the linears own theirs).
  void tp_sum(kernels::Tensor t);
  // Sums over the TP group the gradients of local layer l's replicated tensors that this rank
  // computed only a share of (tp_partial_grads_; l = -1: the final norm's, under sequence parallelism).
  void sum_tp_partial_grads(int l);

  // transformer_block.cpp
  // mean and rstd (optional) receive the statistics; a recompute that keeps the forward's leaves them out.
  void norm_fwd(kernels::Tensor out, kernels::Tensor inp, const Norm& n, kernels::Tensor mean = {},
                kernels::Tensor rstd = {});
  // dinp_sum (optional, LayerNorm only): += Σ_rows dinp after the backward (see layernorm_bwd).
  void norm_bwd(kernels::Tensor dinp, const Norm& dn, kernels::Tensor dout, kernels::Tensor inp, const Norm& n,
                kernels::Tensor mean, kernels::Tensor rstd, kernels::Tensor dinp_sum);
  // The gradient of layer l's fc_out bias when the norm backward that produces d(layer l's
  // output) should also produce it (LayerNorm models with biases), else undefined.
  kernels::Tensor fc_out_bias_grad_from_norm(int l) const;
  void residual_norm(kernels::Tensor residual, kernels::Tensor out, kernels::Tensor mean, kernels::Tensor rstd,
                     kernels::Tensor a, kernels::Tensor b, const Norm& n);
  // From a.ln1 to a.fc_act (everything but the MLP output projection).
  void alloc_fp8_scratch();  // fp8_ and fp8_buf_ (trainer.precision = fp8)
  // act_by_fc_out: the SwiGLU output fc_act is left to fc_out's forward (LinearFwd::swiglu_pre),
  // which the caller runs next; a recompute, which runs no fc_out forward, computes it here.
  void layer_forward_body(Activations& A, int l, const LayerActs& a, bool act_by_fc_out = false);
  // dres_summed: the column sum of d(layer output), fc_out's bias gradient, was already added by
  // the norm backward that produced it.
  void layer_backward(Activations& A, int l, const LayerActs& a, bool dres_summed);
  void classifier(Activations& A, const LossScratch& ls, bool with_grad, kernels::Tensor losses, kernels::Tensor dloss);
  void cross_entropy(const LossScratch& ls, kernels::Tensor losses, kernels::Tensor logits, kernels::Tensor targets,
                     bool with_grad, kernels::Tensor dloss);

  // model_context_parallel.cpp: the CP pieces (ring_attention.hpp). Without CP they are the
  // plain ops (attention_fwd/bwd, RoPE by t or the packed positions, wpe as stored).
  struct ContextParallel {
    int size = 1, rank = 0;
    std::unique_ptr<RingAttention> ring;
    void* buf = nullptr;
    kernels::Tensor positions;  // i32 [B, T]: each local row's global position (RoPE; row 0: wpe's rows)
  };
  static ModelShape cp_local_shape(const ModelShape& global, const Comm* cp);
  void setup_context_parallel(Comm* cp);
  // RoPE of `qkv` (the packed qkv, or its gradient): the positions (packed samples', or CP's
  // whole-sample ones) and their bound (the whole sample's length under CP).
  kernels::AttentionShape attention_shape() const;
  kernels::RopeArgs rope_args(const Activations& A, kernels::Tensor qkv, const kernels::AttentionShape& att) const;
  // `qkv`: what attention reads, a.qkv or (qk-norm) A.qkv_normed.
  void attention_fwd(const Activations& A, const LayerActs& a, kernels::Tensor qkv, const kernels::AttentionShape& att);
  void attention_bwd(const Activations& A, const LayerActs& a, kernels::Tensor qkv, const kernels::AttentionShape& att);
  // qk-norm: A.qkv_normed = rope(qk_norm(a.qkv)) of layer l, what its attention reads; returns it
  // (a.qkv itself, roped in place, without qk-norm).
  kernels::Tensor attention_input(Activations& A, int l, const LayerActs& a, const kernels::AttentionShape& att);
  // The wpe (and dwpe) row of each local row, i32 [T]: CP's global positions; undefined without CP.
  kernels::Tensor position_rows() const;

  ModelShape s_, ls_;
  ContextParallel cp_;
  int B_;
  int64_t N_, R_;  // token rows of a micro-batch; this rank's rows of the residual stream
  Recompute recompute_;
  kernels::Backend& be_;
  ParamStore& store_;
  // The run's RoPE inverse frequencies; the model chunks of a rank share chunk 0's (share_transient),
  // so the CUDA backend's angle table, made from one table, serves every chunk.
  std::shared_ptr<const RopeTable> rope_;
  Comm* tp_;
  int tp_rank_ = 0, tp_size_ = 1;
  bool sp_ = false;                     // sequence parallelism
  TpGroup tp_group_;                    // what the linears see (with sp_scratch_ under SP)
  SequenceParallelScratch sp_scratch_;  // views of the arena's whole-row buffers
  int first_layer_ = 0;
  int phase_above_ = 0;  // the rank's layers in chunks after this one (ParamSpec::ready_phase)
  bool first_stage_ = true, last_stage_ = true;
  int vocab_start_ = 0, valid_cols_ = 0;
  Params w_, g_;
  std::vector<LayerLinears> linears_;  // this stage's layers, local index
  LoraScratch lora_;                   // the adapters' [N, r] scratch (undefined without LoRA)
  void* lora_buf_ = nullptr;
  Fp8Scratch fp8_;                      // the FP8 linears' operand buffers (undefined without FP8)
  std::vector<LinearRef> linear_list_;  // this chunk's block linears, flat (linear_list())
  // Per local layer, the gradients of TP-replicated tensors a backward leaves partial over the TP
  // group (sum_tp_partial_grads), all trainable and no adapter: under sequence parallelism every
  // such tensor of the layer (norms, row-parallel biases: sums over this rank's rows); with qk-norm
  // under tensor parallelism the q_norm and k_norm weights (sums over this rank's heads; under
  // sequence parallelism already among the former). Summed once per step, at its last backward.
  std::vector<std::vector<kernels::Tensor>> tp_partial_grads_;
  int64_t linears_per_layer_ = 0;
  std::vector<Fp8WeightCache> fp8_weights_;  // per linear_list_ entry
  struct Fp8History {
    kernels::Tensor amax, scale_amax;       // f32 [T, 4] (16-byte cells), T = linears · 3
    kernels::Tensor history;                // f32 [T, H], newest first
  } fp8_hist_;                              // delayed scaling (undefined otherwise)
  std::vector<Fp8DelayedCells> fp8_cells_;  // per linear_list_ entry, views of fp8_hist_
  void* fp8_buf_ = nullptr;
  // stage_frozen_base's result per FP8-only frozen weight (per linear_list_ entry; empty: none staged):
  // its values in the compute dtype (raw bytes) and their local amax.
  struct StagedWeight {
    std::vector<char> values;
    float amax = 0.f;
  };
  std::vector<StagedWeight> frozen_staged_;
  StagedWeight stage_frozen_weight(size_t i) const;  // fp8_weights_[i]'s values from the store's source
  std::vector<int64_t> first_rows_;                  // per slot (set_first_token)
  void* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  std::vector<ArenaEntry> arena_entries_;
  std::vector<Activations> acts_;
  std::vector<LossScratch> loss_scratch_;
  std::vector<int32_t> host_inputs_, host_targets_;
  std::function<void(int)> phase_hook_;
  std::function<void(int)> weights_hook_;
  void weights_needed(int phase) {
    if (weights_hook_) weights_hook_(phase);
  }
  // ParamSpec::ready_phase of local layer l (the backward's phase numbering).
  int layer_phase(int l) const { return 1 + phase_above_ + (ls_.arch.layers - 1 - l); }
};

}  // namespace recipe::core
