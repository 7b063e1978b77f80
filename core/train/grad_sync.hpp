// Data-parallel gradient reduction in buckets, overlapped with the backward pass, and the ZeRO-1
// partition of the optimizer state.
//
// Buckets are contiguous runs of the flat gradient buffer inside one weight-decay group, made of
// whole backward phases (ParamSpec::ready_phase): the layers finish last-to-first, so the runs are
// merged in buffer order until a bucket reaches the target size. During the step's last
// micro-batch, backward reports each finished phase; every bucket whose tensors are all final is
// started at once (an asynchronous all-reduce, or reduce-scatter under ZeRO-1) while backward goes
// on. Buckets start in list order on every rank, so the collectives match across the DP group.
//
// bf16 reduction (parallelism.grad_reduce_bf16): each bucket is cast to a bf16 staging buffer
// (one for all buckets, laid out as the gradient buffer: bf16 [Σ bucket numel]) right before its
// collective, the collective moves the bf16 copy (half the bytes), and finish() casts the summed
// values back into the f32 gradients (under ZeRO-1 only the owned chunks). Megatron reduces in
// bf16 by default; the f32 default here keeps sums exact.
//
// ZeRO-1: the layout aligns every pack to kParamAlign·dp elements, so each bucket splits into dp
// equal chunks; DP rank r owns chunk r of every bucket. After the reduce-scatter only the owned
// chunks hold summed gradients; AdamW updates those (its moments stored back to back,
// bucket by bucket) and an all-gather per bucket brings every rank the updated weights.
//
// Overlapped weight gather (parallelism.zero1_overlap_gather, the default): the all-gathers of
// the updated weights do not block the end of the step; they are started at the start of the
// next step's micro-batches, one asynchronous all-gather per bucket in forward order (the bucket
// whose tensors forward reads first goes first: embeddings, then the layers bottom-up, then the
// head; i.e. by descending ready_phase, the reverse of the order gradients finish), and the
// forward waits, layer by layer, only for the buckets holding the weights it is about to read
// (wait_weights, called through Model::set_weights_hook: CUDA: the compute stream waits on the
// bucket's NCCL event, the host never waits; MPI: MPI_Wait on its request). The gathers start at
// the next step rather than right after AdamW so that a CUDA-graph recording of one step holds
// both the start and the waits of its gathers (a capture must join the comm stream before it
// ends). Reading weights outside a step (evaluation, checkpoint, inspection) first calls
// complete_weights().
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/train/optimizer.hpp"
#include "core/parallel/parallel_state.hpp"
#include "core/model/param_layout.hpp"
#include "core/model/param_store.hpp"

namespace recipe::core {

struct GradBucket {
  int64_t begin = 0, numel = 0;
  int ready_phase = 0;
  bool decay = false;
};

// Buckets of at least `target_elems` elements (except at group ends and the last one); 0 = one
// bucket per phase run.
std::vector<GradBucket> make_grad_buckets(const ParamLayout& layout, int64_t target_elems);

class GradSync {
 public:
  // `dp`: the data-parallel group (size 1: nothing to reduce, but ZeRO-1 bookkeeping still works).
  GradSync(const ParamLayout& layout, Comm& dp, bool zero1, int64_t target_elems);
  // The same with the bf16 reduction: the staging lives on `backend`, which also runs the casts.
  GradSync(const ParamLayout& layout, Comm& dp, bool zero1, int64_t target_elems, kernels::Backend* bf16_backend);
  // ZeRO-1's weight gather overlapped with the next forward (see the header); off by default here,
  // on in the trainer by default (parallelism.zero1_overlap_gather).
  void set_overlap_gather(bool on);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  const std::vector<GradBucket>& buckets() const { return buckets_; }
  bool zero1() const { return zero1_; }
  // Optimizer state elements this rank stores (per state tensor): the whole buffer, or its chunks under ZeRO-1.
  int64_t state_numel() const;

  // Per step: begin() before the last micro-batch's backward; on_phase(p) as backward finishes
  // phase p (starts the buckets that became final); finish() starts the rest and waits for all.
  void begin();
  void on_phase(ParamStore& store, int phase);
  void finish(ParamStore& store);

  // The optimizer segments of this rank (whole groups, or the owned chunk of every bucket).
  std::vector<OptimizerSegment> optimizer_segments(const ParamLayout& layout) const;
  // ZeRO-1, after AdamW: every rank gets the updated weights of every bucket (the compute copy;
  // on a backend whose compute copy is the master, that is the master). With the overlapped
  // gather this only notes that the weights are stale outside the owned chunks: the next step's
  // start_weight_gathers (or complete_weights) gathers them. No-op without ZeRO-1.
  void weights_updated(ParamStore& store);
  // Overlapped gather, at the start of a step's micro-batches: starts every bucket's all-gather
  // in forward order. Every step does it, stale or not (re-gathering current weights changes
  // nothing), so a CUDA-graph recording of any step holds them. No-op unless overlapping.
  void start_weight_gathers(ParamStore& store);
  // Before forward reads the weights of ready phase `phase` (forward runs phases in descending
  // order): waits for the started gathers of every bucket with ready_phase ≥ phase not waited
  // for yet, i.e. each bucket the first time forward reaches its highest phase.
  void wait_weights(int phase);
  // Makes the compute weights whole outside a step: waits for started gathers, or gathers stale
  // weights. Call before evaluation, saving or reading the weights.
  void complete_weights(ParamStore& store);
  bool overlap_gather() const { return overlap_gather_; }
  // ZeRO-1 with a separate compute copy (bf16 on CUDA): the f32 master weights are current only
  // in this rank's chunks after a step; this all-gathers them (for checkpoints and inspection, not
  // every step). No-op otherwise.
  void gather_masters(ParamStore& store);

  // [begin, end) ranges of the flat buffer whose squared gradients this rank contributes to the
  // global norm, so that the sum over the whole world counts every parameter exactly once:
  // TP-replicated tensors only on TP rank 0, the tied embedding copy of the last pipeline stage
  // not at all (stage 0 counts it), the DP replicas only on DP rank 0 (without ZeRO-1) or only
  // in the owned chunks (with it), and the CP replicas (equal after the sum over the CP group)
  // only on CP rank 0: other CP ranks count nothing. The host step and the device step (CUDA)
  // both read these ranges, so the rule lives here once.
  std::vector<std::pair<int64_t, int64_t>> norm_ranges(const ParamLayout& layout, const RankCoords& coords,
                                                       bool tied) const;

 private:
  void start(ParamStore& store, size_t i);
  void gather_all_blocking(ParamStore& store);
  std::vector<GradBucket> buckets_;
  Comm& dp_;
  bool zero1_;
  std::vector<bool> started_;  // this step
  // bf16 reduction: the staging (bf16, bucket i at staging_offset_[i]) and its backend; null = f32.
  kernels::Backend* bf16_backend_ = nullptr;
  void* staging_ = nullptr;
  std::vector<int64_t> staging_offset_;
  kernels::Tensor staging(size_t i) const;
  // Overlapped weight gather: on, the buckets in forward order (descending ready_phase, ties in
  // buffer order), each bucket's started gather not waited for yet (a null Op once waited), and
  // whether the compute weights outside the owned chunks are older than the masters.
  bool overlap_gather_ = false;
  std::vector<size_t> forward_order_;
  std::vector<Comm::Op> gathers_;
  std::vector<bool> gathering_;
  bool stale_ = false;
};

}  // namespace recipe::core
