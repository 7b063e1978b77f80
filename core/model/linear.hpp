// The linear seam: every linear layer of a transformer block is one object, column-parallel or
// row-parallel (Megatron-Core's ColumnParallelLinear / RowParallelLinear), that owns its weight and
// bias with their gradients, its backend calls, its tensor-parallel reduction and its bias
// handling. The block calls fwd/bwd and never a raw linear op.
//
// This is the one place LoRA adapters and FP8 scaling plug in: an adapter (A/B sharded with the
// base weight) adds its low-rank path inside Linear::affine_fwd / affine_bwd, an FP8 linear
// quantizes its GEMM operands there, and neither the block nor the TP reductions change.
//
// FP8 (trainer.precision = fp8, the linears of fp8.linears; Transformer Engine's tensorwise
// "current scaling"). Master weights, optimizer, norms, attention and the loss stay as they are;
// only the three GEMMs of the linear read FP8 operands, with f32 accumulation and bf16 (dinp, out)
// or f32 (dweight) results. Each operand T is cast with its own scale, computed just before the
// cast from T's amax: scale = max / amax(T) (E4M3 max 448 for x and W, E5M2 57344 or E4M3 for dy;
// amax 0 → scale 1), q(T) = fp8(T·scale), and the GEMM multiplies by 1/scale (cuBLASLt's A/B
// scale pointers). On one rank, with x [N, in], W [out, in], dy [N, out]:
//   forward   amax(x), amax(W)                      two reductions
//             xq [N, in] = q(x), wq [out, in] = q(W) one cast each
//             y = xq·wqᵀ (+ b, GELU epilogue)        FP8 GEMM, bf16 out
//   backward  amax(dy); gq [N, out] and gtq [out, N] = q(dy), one pass writing both
//             dx = gq·wtqᵀ (dGELU, dinp_sum)         FP8 GEMM, bf16
//             xtq [in, N] = q(x)ᵀ                    (amax(x) again: same x, same scale)
//             dW += gtq·xtqᵀ                         FP8 GEMM, f32; db from dy itself (not its FP8 copy)
// The weight is cast once per pass of micro-batches (a training step, an evaluation): amax(W), then
// wq [out, in] and wtq [in, out] = q(W) in one pass, into the linear's own Fp8WeightCache, which
// every forward and backward of the pass reads (the weights change only between passes; outside a
// pass, Model::fp8_weight_pass off, every use recasts). The transposed copies exist because
// cuBLASLt's FP8 GEMMs take both operands K-major ("TN"): y reads x and W as stored (K = in), dx
// needs W K-major over out (wtq), dW needs dy and x K-major over N (gtq, xtq). No activation is
// kept in FP8 between forward and backward: the backward recasts x from the bf16 tensor the block
// keeps anyway (an input that trainer.recompute rebuilds may differ from the forward's in its last
// bf16 bit, as on the bf16 path). Per FP8 linear: 2·out·in bytes of weight copies; shared by all
// of them, sized for the widest, one Fp8Scratch:
//   x [N·max in] (xq, later xtq), g [N·max out], g_t [N·max out],
//   stats f32 [64]: 16-byte cells (4 floats each; the value is the cell's first float): amax and
//   inverse scale of x (cells 0, 1) and dy (4, 5); the weight's pair is in its Fp8WeightCache.
//   cuBLASLt refuses (NOT_SUPPORTED, at the matmul, not at the heuristic) an A/B scale pointer
//   that is not 16-byte aligned, hence the cells.
//   w_t [max in·out]: only with FP8-only frozen weights (below), the transpose of one.
//
// A frozen weight held only in FP8 (LoRA's base with peft.base_fp8_only, ModelShape::fp8_frozen).
// A LoRA base never changes, so its per-pass cast is the same every pass: it is done once, when the
// base is initialized or loaded (Model::quantize_frozen_base), and the bytes ARE the parameter (the
// ParamStore's FP8 region, param_layout.hpp); no compute-dtype copy of the weight exists. Per such
// linear: out·in bytes (wq [out, in], what the forward GEMM reads) plus its two cells, instead of
// 2·out·in bytes of compute copy and 2·out·in of cache. The cast is the per-pass one: amax of the
// whole weight (max-reduced over TP), scale = max / amax, so the GEMMs read the bytes the bf16 path
// would have cast, bit for bit. Delayed scaling: a history of a constant amax gives that same
// scale (max and most_recent alike, and its first step is current scaling anyway), so the weight
// simply keeps its current-scaling cast and its role's history stays unused (zero). The input-
// gradient GEMM needs W K-major over out: right before it, fp8_transpose writes wtq [in, out]
// into Fp8Scratch::w_t, shared by every linear (a byte copy: no rounding, the same bytes the cast
// of the transpose gives). The weights' values themselves (to write the base into a checkpoint)
// come from where the base came from (ParamStore::fp8_values).
// Under TP an operand sharded over the group (W always; x of a row-parallel linear; dy of a
// column-parallel one) takes the amax of the whole tensor: its local amax is max-reduced over the
// group (a one-float all-reduce) before the cast, so every rank uses the scale a single rank
// would, and TP runs match the serial run up to summation order. (Transformer Engine scales the
// weights per rank instead; the reduction is what makes TP parity testable, at one scalar
// collective per sharded operand.) Replicated operands need no reduction: their amax is equal on
// every rank.
//
// Delayed scaling (fp8.scaling = "delayed", Transformer Engine's DelayedScaling). Each operand role
// of each FP8 linear (x, W, dy) keeps an amax history of H steps (fp8.amax_history_len), newest
// first. The cast takes its scale from the history instead of measuring the tensor first: scale =
// max / a with a = max(history) (fp8.amax_compute = "max") or its newest entry ("most_recent"),
// with current scaling's guards (a = 0 or not finite → scale 1), and records the tensor's amax in
// the same pass (fp8_quantize's amax_out: one read of the operand instead of two). The recorded
// amax max-accumulates over the step's micro-batches (the backward's recast of x does not record:
// same tensor); evaluations and other passes that compute no gradient record nothing, so they do
// not change training. Once per step, after the backward (Model::fp8_end_step, inside the
// captured step: device only), the step's amaxes of this model chunk, one contiguous f32 buffer
// of 16-byte cells, are max-reduced over the TP group, then the context- and data-parallel groups
// (one packed all-reduce per group, not one per tensor), so every rank that holds a layer keeps
// the same histories and scales; then each history takes its amax (the oldest drops) and its scale
// source is recomputed (fp8_amax_history). No per-cast TP reduction is needed. The run's first
// step has no history: it casts with current scaling (as above, TP reductions included) and
// records, which seeds the histories (torchao's choice; Transformer Engine starts from scale 1
// instead, which flushes small gradients to zero for a step). The histories are training state:
// checkpoints save them per layer (fp8.layers.<l>.amax_history, [linears, 3 roles, H], equal on
// every rank, written once), a resume restores them, so it continues bitwise. Memory per model
// chunk: 3 tensors per entry of the flat linear list (family/linears.hpp) × (H floats + two
// 16-byte cells), in the FP8 allocation.
// Since a delayed scale is known before the operand exists, the kernel that produces an operand
// can cast it itself: fc1's output gradient dy = swiglu_bwd(dact, fc_pre) [N, 2·ffn], the largest
// cast of a Llama layer, is computed in registers, rounded to bf16 as swiglu_bwd would store it,
// and written as gq and gtq with its amax recorded, in one kernel (fp8_quantize_swiglu_bwd,
// LinearBwd::swiglu_pre); the bf16 dy is neither written nor read. Not where dy is needed in bf16:
// the first step (current scaling needs amax(dy) before the cast), an adapter, a bias gradient.
// Likewise fc2's input x = swiglu(fc_pre): the SwiGLU forward writes xq beside the bf16 x that
// the block still keeps (fp8_swiglu_fwd_quantize, LinearFwd::swiglu_pre), so fc2's forward does
// not read x again.
// The bytes are those of the unfused path (tests/core/model/test_linear_fp8.cpp,
// tests/core/train/test_fp8_training.cpp), so it is no recipe key: always on where it applies.
//
// LoRA (peft.kind=lora): y = x·Wᵀ (+ b) + s·(d(x)·Aᵀ)·Bᵀ with A [r, in], B [out, r], s = alpha/r
// (rsLoRA: alpha/sqrt(r)) and d the adapter dropout (PEFT's lora_dropout, peft.dropout = p):
// d(x) = x ⊙ keep/(1−p) during training, the identity in evaluation and with p = 0. The base W, b
// are frozen (their gradient tensors are undefined: the ops skip them). The adapter path goes
// through shared scratch only (LoraScratch, one set for all the model's linears): [N, r] for h and
// dh, and with p > 0 one [N, in] buffer for d(x) (in = the widest adapted input of this rank),
// reused by every linear in turn, never a temporary per adapter. On one rank:
//   forward   xd = d(x)                    dropout (xd = x without dropout: no copy)
//             h = s·(xd·Aᵀ)                linear_fwd, scale
//             y += h·Bᵀ                    linear_fwd (accumulate)
//   backward  xd = d(x), h = s·(xd·Aᵀ)     recomputed (neither kept from the forward)
//             dh = dy·B,  dB += dyᵀ·h      linear_bwd
//             dh ·= s
//             dA += dhᵀ·xd                 linear_bwd
//             dx += d(dh·A)                linear_bwd (dinp_accumulate); with p > 0 through the
//                                          scratch, then dropout(accumulate) with the same mask
// The mask is regenerated, not stored: it is a pure function (kernels/dropout_mask.hpp) of the
// linear's stream key (seed, layer, linear) and the element's global position (token index
// first_row + i of the step's global batch, input feature j of the full, unsharded width). So it
// is the same in forward, backward and a full-recompute forward; the same on every TP rank for
// a replicated input and the single-rank mask's slice for a sharded one; the same for a sample
// whatever DP rank or micro-batch carries it; and a resumed run draws what the uninterrupted one
// drew (the token index counts consumed samples).
// With the GELU epilogues (fc1's forward, fc2's backward) the adapter's term is added before the
// GELU / dGELU, which then run as their own ops.
//
// LoRA under tensor parallelism (Megatron / NeMo sharding; Σ = sum over the TP group):
// - Column-parallel base (W rows split): A [r, in] replicated, B [out/t, r] split by rows like W.
//   x is replicated, so h = s·d(x)·Aᵀ is complete on every rank and y_local += h·B_localᵀ needs
//   no communication. Backward: dB_local += dy_localᵀ·h is this rank's slice, complete. But
//   dh_local = s·dy_local·B_local is a partial sum over the output features, so dh = Σ dh_local
//   (an all-reduce of [N, r], cheap) before dA += dhᵀ·xd: A's gradient is then complete and equal
//   on every rank, as a replicated tensor's must be. dx is summed over the group after the base
//   GEMM anyway (the column-parallel input-gradient all-reduce), so the adapter's d(dh·A), with the
//   summed dh, is added on TP rank 0 only: counted exactly once, and the other ranks skip a GEMM.
// - Row-parallel base (W columns split): A [r, in/t] split by columns like W, B [out, r]
//   replicated. h_local = s·d(x_local)·A_localᵀ is a partial sum of h. Forward: every rank adds
//   h_local·Bᵀ to its partial y before y's all-reduce; by linearity Σ h_local·Bᵀ = h·Bᵀ, so the
//   term is counted once with no extra communication. Backward: B's gradient needs the complete
//   h, so h = Σ h_local (an all-reduce of [N, r]); then dB += dyᵀ·h (dy is replicated: equal on
//   every rank), dh = s·dy·B is complete, dA_local += dhᵀ·xd_local is this rank's column slice and
//   dx_local += d(dh·A_local) its complete input slice (row-parallel dx needs no reduction).
// So TP adds two [N, r] all-reduces per adapted linear pair and no full-size communication.
//
// Tensor parallelism (weights are [out, in], HF layout):
// - Column-parallel (q|k|v, fc1, gate|up): this rank holds rows of W (a slice of the output
//   features) and their bias. Forward needs no communication: the input is replicated and the
//   output stays sharded. Backward: each rank's dinp = dout_local·W_local is a partial sum over
//   the output features, so dinp is summed over the TP group right after the GEMM; that sum is the
//   "input-gradient all-reduce" of Megatron's column-parallel linear.
// - Row-parallel (attention proj, fc2, down): this rank holds columns of W (a slice of the input
//   features, the sharded output of the column-parallel linear before it). Forward: each rank's
//   product is a partial sum of the output, summed over the group; the bias is replicated, so only
//   TP rank 0 adds it and the sum holds it once. Backward needs no communication: dout is
//   replicated, dinp is this rank's complete input slice, and the bias gradient Σ_rows dout comes
//   out equal on every rank.
// Because a column-parallel dinp (and a row-parallel output) is partial until summed, the fused
// epilogues that act on it element-wise (GELU, dGELU, a column sum of dinp) are only offered where
// the tensor is complete: the row-parallel backward. Asking for them elsewhere throws.
//
// Sequence parallelism (parallelism.sequence_parallel, Megatron's; needs TP): outside the linears
// (norms, residual adds, the stage boundary) each TP rank holds only its N/t contiguous token rows
// of the residual stream, rank r the rows [r·N/t, (r+1)·N/t) (t = TP size). Inside them (attention
// and the MLP on this rank's heads / FFN columns) every rank works on all N rows, as without it.
// The collectives move from all-reduce to all-gather / reduce-scatter at the region's edges:
// - Column-parallel: the input (a norm output) arrives as this rank's rows [N/t, in]; forward
//   all-gathers it into [N, in] and runs the GEMM on all rows. Backward all-gathers it again (the
//   weight gradient needs every row; it is not kept, which is where the memory goes), computes the
//   partial dinp [N, in] and reduce-scatters it: each rank gets the group's sum of its own rows,
//   in place of the all-reduce of the whole.
// - Row-parallel: forward computes the partial output [N, out] (bias on TP rank 0 only, as
//   before) and reduce-scatters it into this rank's rows [N/t, out], in place of the all-reduce.
//   Backward all-gathers dout [N/t, out] into [N, out] for the GEMMs. The bias gradient is summed
//   over this rank's rows of dout only: a partial sum over the group, like every gradient of a
//   replicated tensor computed from sharded rows (the norms'). The Model sums those over the TP
//   group once per step (Model::backward), so they end up complete and equal on every rank.
// Each is one collective of [N, C] elements per linear and direction, the same bytes as the
// all-reduce it replaces (an all-reduce is a reduce-scatter plus an all-gather), plus the
// backward's re-gather of the column-parallel input. The whole-row tensors live in two shared
// [N, C] buffers (SequenceParallelScratch, one per Model), never per layer. Every SP-crossing
// tensor is C (hidden) wide: the column-parallel inputs (q|k|v, fc1, gate|up) and the row-parallel
// outputs (proj, fc2, down). LoRA needs nothing of its own: the adapter sees the gathered input
// and the whole-row output gradient, so the TP rules above hold unchanged (its dropout mask is
// keyed by the whole-row token index).
//
// Backward collectives overlapped (always on; Megatron's "async tensor-model-parallel all-reduce"
// and its sequence-parallel backward). A column-parallel backward's two GEMMs are independent:
// dinp = dout·W reads dout and the weight, dW += doutᵀ·x (and db += Σ_rows dout) reads dout and
// the input. So the collectives are started on the comm stream (Comm::*_start) and waited for,
// device-side, by exactly the GEMM that needs their result, instead of blocking between the GEMMs:
// - TP without SP: dinp GEMM; start the all-reduce of dinp; weight-gradient GEMM (it runs while
//   dinp is summed); wait for the all-reduce.
// - SP, blocking path (tp_comm_overlap off): start the all-gather of the input rows; dinp GEMM
//   (it runs while the input is gathered); start the reduce-scatter of dinp; wait for the gather;
//   weight-gradient GEMM (it runs while dinp is reduce-scattered); wait for the reduce-scatter.
// The GEMMs are the two halves of the one linear_bwd call they replace, in its order, and the
// collectives are the blocking ones' work: the results are bitwise those of the serialized
// order. Only the plain path splits (Linear::splits_bwd): FP8 (its casts of dy serve both GEMMs),
// an adapter (its dh all-reduce sits between them) and the epilogues on dinp (which column-
// parallel linears under TP refuse anyway) keep the one call between blocking collectives. The
// row-parallel backward has no collective after its GEMMs (without SP) or needs the gathered dout
// for both (with SP), so it has nothing to hide here; the forward's collectives feed or follow
// their one GEMM directly (hidden only by the overlap below).
//
// Communication overlap without sequence parallelism (parallelism.tp_comm_overlap with
// sequence_parallel off; the non-SP form of Megatron's / torchtitan's TP overlap). What plain TP
// still exposes is the forward all-reduce of every row-parallel output (attention's out-projection,
// fc2). With the overlap, RowParallelLinear::fwd splits the N rows into k chunks
// (parallelism.tp_overlap_chunks; chunk i holds rows [i·N/k, (i+1)·N/k), integer division, so
// sizes differ by at most one row) and pipelines them (Linear::chunked_row_fwd, linear_overlap.cpp):
//   GEMM chunk 0; start all-reduce 0; GEMM chunk 1; start all-reduce 1; ...; wait for every one.
// Each start forks the comm stream after the GEMM just issued (NCCL: an event recorded on the
// compute stream), so chunk i is summed while chunk i+1's GEMM runs, and only the last chunk's
// all-reduce stays exposed. The bias is added per chunk, on TP rank 0 only as before; a SwiGLU
// input (LinearFwd::swiglu_pre) is materialised first, over all rows, then chunked. Each output
// row is the same GEMM row on the same operands (bit for bit on CPU; cuBLASLt may pick another
// algorithm for fewer rows), and the group sums the same partials: with two ranks (a + b is
// commutative) the CPU output is bitwise the unchunked one's; with more, a ring or tree all-reduce
// may sum an element's partials in an order that depends on its position in the buffer, so
// chunking can change the last bit (the parity tests compare against one process).
//
// Communication overlap (parallelism.tp_comm_overlap, with sequence parallelism; Megatron's /
// Transformer Engine's ring-exchange "TP comm overlap", torchtitan's async TP): the collectives
// above no longer block the compute stream before or after the GEMM; each is split into the t row
// blocks of the TP ranks and pipelined with the GEMM of the block at hand (linear_overlap.cpp).
// One ring step (send one block to rank+1, receive one from rank-1, on the comm stream) runs while
// the GEMM of the block already here runs on the compute stream; the compute stream waits,
// device-side, for exactly the block it needs next. So t blocks cost t GEMMs of N/t rows and t-1
// exchanges of N/t rows (the bytes of the collective), and only one block's time is not hidden.
// - Column-parallel forward (all-gather + GEMM): the own block first, straight from the shard;
//   output rows land where the whole-row GEMM writes them.
// - Row-parallel forward (GEMM + reduce-scatter): block b's partial sum travels the ring
//   b+1 → … → b, each rank adding its partial (the add kernel) before passing it on.
// - Column-parallel backward: the dinp GEMM per block with the reduce-scatter ring as above, while
//   the input is regathered (one all_gather_start, not kept from the forward: the gathered input is
//   the shared buffer, not a per-layer tensor); the weight gradient runs during the last exchange.
// - Row-parallel backward: dout's blocks arrive around the ring while each held block's dinp
//   (with its dGELU epilogue and bias-sum) is computed; then the weight gradient on the whole dout.
// Same math as the blocking path per row, with two differences in rounding: a reduce-scatter sums
// in ring order (one add per step) and the fused bias-sum of dinp accumulates block by block. The
// resolver refuses the overlap (both forms) with LoRA adapters and FP8 (their per-call state, the
// adapter dropout's first row and FP8's per-tensor amax, would change with the blocks).
#pragma once

#include <cstdint>

#include "core/parallel/comm.hpp"
#include "kernels/ops.hpp"

namespace recipe::core {

class Linear;

// One linear's parameters as bound from the ParamStore: weight [out, in] and bias [out]
// (undefined for models without biases), and its LoRA adapter lora_a [r, in], lora_b [out, r]
// (undefined without one). Compute-dtype weights, or their f32 gradients (undefined for a frozen
// tensor).
struct LinearTensors {
  kernels::Tensor w, b, lora_a, lora_b;
};

// What the adapters of a model share: their scale s, two [N, r] scratch tensors (compute dtype)
// for h = s·d(x)·Aᵀ and its gradient, and the adapter dropout's state (see the top of the file).
struct LoraScratch {
  kernels::Tensor h, dh;
  // [N, max adapted in-features of this rank] (compute dtype), the dropped input and later the
  // dropped input gradient of whichever linear runs; undefined when dropout = 0.
  kernels::Tensor dropped;
  float scale = 0.f;
  float dropout = 0.f;    // peft.dropout
  bool training = false;  // dropout applies (a training forward or a backward); set by the Model
  int64_t first_row = 0;  // global token index of row 0 of the micro-batch running now
};

// Sequence parallelism's whole-row buffers (see the top of the file), each [N, C] in the compute
// dtype, shared by every linear of a model and by its embedding and classifier; each is live only
// inside one call.
struct SequenceParallelScratch {
  kernels::Tensor full;       // a gathered input or output gradient, or a row-parallel partial output
  kernels::Tensor full_grad;  // a column-parallel input gradient before its reduce-scatter
};

// What the FP8 linears of a model share (see the top of the file): byte buffers for the quantized
// operands of whichever linear runs now (typed views are taken per call), the amax and inverse
// scales, and the formats.
struct Fp8Scratch {
  kernels::Tensor x, g, g_t;  // raw bytes (numel = capacity in elements of one byte)
  kernels::Tensor w_t;        // raw bytes: an FP8-only frozen weight's transpose (undefined without)
  kernels::Tensor stats;      // f32 [64]: 16-byte cells, see above
  kernels::DType fwd = kernels::DType::e4m3, bwd = kernels::DType::e5m2;
  bool fast_accum_forward = true;  // fp8.fast_accum_forward
  // Inside a pass of micro-batches (Model::fp8_weight_pass): a weight cast stays valid until the
  // pass ends. Outside one, every use recasts.
  bool cache_weights = false;
  // Delayed scaling (see the top of the file): on for fp8.scaling = "delayed"; record_amax inside
  // a pass that computes gradients; history_ready once the histories hold a step (else current
  // scaling seeds them).
  bool delayed = false, record_amax = false, history_ready = false;
  // Delayed scaling casts an operand inside the kernel that produces it where one can (the
  // SwiGLU backward: LinearBwd::swiglu_pre), bit for bit what the separate cast gives. Always on;
  // tests turn it off (Model::fp8_fuse_producers) to compare the two.
  bool fuse_producers = true;
};

// Delayed scaling: an FP8 linear's operand roles, and its cells (f32 [1] views of 16-byte cells)
// in the model's history buffers: the amax each role's scale comes from, and the step's amax the
// casts record into.
enum Fp8Role { fp8_x = 0, fp8_w = 1, fp8_dy = 2 };
struct Fp8DelayedCells {
  kernels::Tensor scale_amax[3], amax[3];  // by Fp8Role
};

// One FP8 linear's weight in the forward format, as stored and transposed, with its amax and
// inverse scale (cells 0 and 1, 16 bytes each); `valid` (host side) says they hold this pass's W.
// frozen: the weight is held only in FP8 (see the top of the file): wq is the parameter itself,
// cast once (valid from then on), and wtq is undefined (the backward transposes wq into w_t).
struct Fp8WeightCache {
  kernels::Tensor wq, wtq;  // [out, in], [in, out] in the forward format
  kernels::Tensor stats;    // f32 [8]
  bool valid = false;
  bool frozen = false;
};

// The tensor-parallel group as a linear sees it. size 1 (comm may be null): no TP, every
// reduction is skipped.
struct TpGroup {
  Comm* comm = nullptr;
  int rank = 0, size = 1;
  // Sequence parallelism's buffers; null: sequence parallelism is off.
  const SequenceParallelScratch* sp = nullptr;
  // parallelism.tp_comm_overlap (see the top of the file): with sequence parallelism its
  // collectives run as rings pipelined with the GEMMs; without it the row-parallel forward's
  // all-reduce is pipelined with its GEMM in `overlap_chunks` row chunks
  // (parallelism.tp_overlap_chunks, ≥ 1; the rings always take `size` blocks).
  bool overlap = false;
  int overlap_chunks = 2;
  // Sums t in place over the group (nothing to do for a group of one).
  void sum(kernels::Tensor t) const;
  bool sequence_parallel() const { return sp != nullptr && size > 1; }
  // The first size·rows(shard) rows of `buffer` (viewed [rows, width]) ← the group's shards
  // [rows, width] in rank order (all-gather); returns that view.
  kernels::Tensor gather_rows(kernels::Tensor shard, kernels::Tensor buffer) const;
  // shard [rows, width] ← this rank's rows of Σ_group full [size·rows, width] (reduce-scatter).
  void sum_scatter_rows(kernels::Tensor shard, kernels::Tensor full) const;
  // The first `rows` rows of `buffer`, viewed [rows, width].
  static kernels::Tensor leading(kernels::Tensor buffer, int64_t rows, int64_t width);
  // Element-wise max over the group, in place (FP8 amax of a sharded tensor).
  void max(kernels::Tensor t) const;
};

// Row counts: N = all token rows of the micro-batch. Under sequence parallelism the column-
// parallel input (and its gradient) and the row-parallel output (and its gradient) hold this
// rank's N/t rows instead (see the top of the file).
struct LinearFwd {
  kernels::Tensor out{};  // [N, out features of this rank] (row-parallel: summed over the group)
  kernels::Tensor inp{};  // [N, in features of this rank]
  // Optional (column-parallel only): receives the affine result, and out = gelu(pre_gelu) (the
  // fused GELU epilogue of fc1).
  kernels::Tensor pre_gelu{};
  // Optional (row-parallel only): inp is not computed yet; it is swiglu(swiglu_pre) (fc2 after the
  // SwiGLU, swiglu_pre = fc1's output gate_up), written into inp here (the block keeps it). An FP8
  // linear with delayed scaling, its history ready and no adapter casts it in the same kernel
  // (fp8_swiglu_fwd_quantize) instead of reading it again.
  kernels::Tensor swiglu_pre{};
};

struct LinearBwd {
  kernels::Tensor dinp{};  // d(input), overwritten (column-parallel: summed over the group)
  kernels::Tensor dout{};  // d(output)
  // The forward's input; with rebuild_input, the buffer it is rebuilt into before the weight
  // gradient reads it.
  kernels::Tensor inp{};
  // Optional (row-parallel only): the input was gelu(gelu_pre), so dinp also gets the dGELU
  // epilogue and becomes the gradient of the previous linear's output.
  kernels::Tensor gelu_pre{};
  // The input was not kept (trainer.recompute gelu / norm): rebuild inp = gelu(gelu_pre) inside the
  // backward (gelu_rebuild_linear_bwd, which a backend may fuse into the dinp GEMM), or
  // inp = swiglu(swiglu_pre) in the SwiGLU backward's pass (below). Needs gelu_pre or swiglu_pre.
  bool rebuild_input = false;
  // Optional (row-parallel, or no TP): dinp (after the dGELU epilogue, if any) is the gradient of
  // that linear's output, so its bias gradient Σ_rows dinp is summed here in the same pass
  // (linear_bwd's dinp_sum, the dGELU_BGRAD epilogue on CUDA); that linear's own backward then
  // passes bias_grad_done.
  const Linear* dinp_is_output_grad_of = nullptr;
  // This linear's bias gradient was already accumulated by whoever held the rows of dout (the
  // norm backward's dinp_sum, or the next linear's dinp_is_output_grad_of): skip the column sum.
  bool bias_grad_done = false;
  // The SwiGLU between fc1 and fc2 (gate_up [N, 2F] = fc1's output, act [N, F] = swiglu(gate_up)
  // = fc2's input); swiglu_pre is gate_up, swiglu_dact [N, F] is d(act). Either linear may own the
  // SwiGLU backward dgate_up = swiglu_bwd(d(act), gate_up):
  // - Row-parallel (fc2, as LinearFwd::swiglu_pre): inp was swiglu(swiglu_pre). The dinp GEMM
  //   writes d(act) into swiglu_dact, then one pass over gate_up (swiglu_bwd_rebuild) writes dinp =
  //   dgate_up [N, 2F], the gradient of fc1's output, and with rebuild_input the input inp =
  //   swiglu(gate_up), which the weight gradient reads after it. Valid under TP: fc2's dinp is this
  //   rank's complete slice, and the SwiGLU is element-wise on it. Takes no gelu_pre and no
  //   dinp_is_output_grad_of. With an adapter or in FP8 the steps are the separate ops (rebuild,
  //   the whole backward into swiglu_dact, swiglu_bwd into dinp).
  // - Column-parallel (fc1): dout is not computed yet: the output gradient is swiglu_bwd(
  //   swiglu_dact, swiglu_pre), with swiglu_dact already written. The bf16 path writes it into dout
  //   first. An FP8 linear with delayed scaling, its history ready, no adapter and no bias gradient
  //   to sum casts it straight out of the SwiGLU backward (both layouts, one kernel:
  //   fp8_quantize_swiglu_bwd); dout is then never written, only its shape is read. The block uses
  //   this form only where that cast applies (casts_swiglu_grad), the row-parallel one otherwise.
  kernels::Tensor swiglu_pre{}, swiglu_dact{};
};

// What both kinds share: the tensors and the backend calls of the local affine map
// out = inp·Wᵀ (+ b). The kinds add their reductions around it.
class Linear {
 public:
  // The bias gradient (f32 [out], undefined without bias), for a fused path that sums the rows of
  // this linear's output gradient elsewhere (see LinearBwd::bias_grad_done).
  kernels::Tensor bias_grad() const { return grad_.b; }
  const LinearTensors& weights() const { return w_; }
  const LinearTensors& grads() const { return grad_; }
  // Runs this linear's GEMMs in FP8 through the shared scratch and its own weight cache (null:
  // bf16, the default).
  // delayed: this linear's history cells (delayed scaling only, else null).
  void use_fp8(const Fp8Scratch* scratch, Fp8WeightCache* weight, const Fp8DelayedCells* delayed = nullptr) {
    fp8_ = scratch;
    fp8_w_ = weight;
    fp8_d_ = delayed;
  }

 protected:
  // Sequence parallelism: the local affine map on whole rows, with the all-gathers and
  // reduce-scatters around it (see the top of the file).
  void sp_column_fwd(const LinearFwd& a) const;
  void sp_column_bwd(const LinearBwd& a) const;
  void sp_row_fwd(const LinearFwd& a) const;
  void sp_row_bwd(const LinearBwd& a) const;
  // Their ring forms with communication overlap (linear_overlap.cpp).
  void ring_column_fwd(const LinearFwd& a) const;
  void ring_column_bwd(const LinearBwd& a) const;
  void ring_row_fwd(const LinearFwd& a) const;
  void ring_row_bwd(const LinearBwd& a) const;
  // The row-parallel forward without sequence parallelism, with communication overlap: the GEMM
  // and the all-reduce of the output pipelined over tp_.overlap_chunks row chunks, bias on TP rank
  // 0 only (linear_overlap.cpp; see the top of the file).
  void chunked_row_fwd(const LinearFwd& a) const;

  // row_parallel: the input features are split over the TP group (which also decides how the
  // adapter reduces). dropout_key: the stream of this linear's adapter dropout mask.
  Linear(const LinearTensors& weights, const LinearTensors& grads, kernels::Backend& backend, const TpGroup& tp,
         const LoraScratch* lora, bool row_parallel, uint64_t dropout_key)
      : w_(weights),
        grad_(grads),
        be_(&backend),
        tp_(tp),
        lora_(weights.lora_a.defined() ? lora : nullptr),
        row_parallel_(row_parallel),
        dropout_key_(dropout_key) {}

  // The local affine forward with the bias given (row-parallel passes it on rank 0 only).
  // Adapters and FP8 scaling plug in here and in affine_bwd.
  void affine_fwd(const LinearFwd& a, kernels::Tensor bias) const;
  // The local backward: dinp (with the optional dGELU / rebuild / fused bias-sum epilogues, or
  // through the SwiGLU backward), dweight and dbias (+=).
  void affine_bwd(const LinearBwd& a) const;
  // Whether this backward is the plain one whose GEMMs a collective may run between (the input
  // gradient, then the weight and bias gradients, as two linear_bwd calls): no FP8, no adapter, no
  // epilogue on dinp, dinp wanted (see "Backward collectives overlapped" at the top of the file).
  bool splits_bwd(const LinearBwd& a) const;
  // affine_bwd of a row-parallel linear whose input was swiglu(a.swiglu_pre) (LinearBwd::swiglu_pre).
  void swiglu_input_bwd(const LinearBwd& a, kernels::Tensor dbias) const;
  // The adapter's terms: y += s·(d(x)·Aᵀ)·Bᵀ; and dx += ..., dA, dB += ... (see the top of the file).
  void adapter_fwd(kernels::Tensor y, kernels::Tensor x) const;
  void adapter_bwd(kernels::Tensor dx, kernels::Tensor dy, kernels::Tensor x) const;
  // d(x) into the dropout scratch (or x itself when no dropout applies now).
  kernels::Tensor adapter_input(kernels::Tensor x) const;
  // dst (+)= src ⊙ keep/(1−p) with this linear's mask over the [n, in] rows of the input.
  void apply_dropout(kernels::Tensor dst, kernels::Tensor src, bool accumulate) const;
  bool dropout_now() const { return lora_->training && lora_->dropout > 0.f; }
  // LinearBwd::swiglu_pre: whether this backward casts the output gradient straight out of the
  // SwiGLU backward (else the caller materialises dout first).
  bool fp8_fuses_swiglu_bwd(const LinearBwd& a) const;
  // LinearFwd::swiglu_pre: whether this forward computes its input and its FP8 cast in one kernel.
  bool fp8_fuses_swiglu_fwd() const;
  // The FP8 forms of affine_fwd / affine_bwd (see the top of the file).
  void fp8_affine_fwd(const LinearFwd& a, kernels::Tensor bias) const;
  void fp8_affine_bwd(const LinearBwd& a, kernels::Tensor dbias, kernels::Tensor dinp_sum) const;
  // amax of src (max-reduced over TP when `sharded`) into cell `slot` of stats, then src cast into
  // out ([rows, cols]) and/or out_t ([cols, rows]) with the inverse scale into cell slot + 1.
  // Delayed scaling: the scale from the role's history instead (once it holds a step), and src's
  // amax recorded into the role's cell when `record` and the pass records.
  void fp8_cast(kernels::Tensor src, kernels::Tensor out, kernels::Tensor out_t, kernels::Tensor stats, int slot,
                bool sharded, Fp8Role role, bool record) const;
  // The weight cache filled for this pass (cast now unless it already is; see the top of the file).
  const Fp8WeightCache& fp8_weight() const;

  LinearTensors w_, grad_;
  kernels::Backend* be_;
  TpGroup tp_;
  const LoraScratch* lora_;  // null: no adapter
  bool row_parallel_;
  uint64_t dropout_key_;
  const Fp8Scratch* fp8_ = nullptr;         // null: bf16 GEMMs
  Fp8WeightCache* fp8_w_ = nullptr;         // this linear's, owned by the Model
  const Fp8DelayedCells* fp8_d_ = nullptr;  // delayed scaling: this linear's, owned by the Model
};

class ColumnParallelLinear final : public Linear {
 public:
  ColumnParallelLinear(const LinearTensors& weights, const LinearTensors& grads, kernels::Backend& backend,
                       const TpGroup& tp, const LoraScratch* lora = nullptr, uint64_t dropout_key = 0)
      : Linear(weights, grads, backend, tp, lora, false, dropout_key) {}
  // out = inp·Wᵀ + b (this rank's output features); no communication.
  void fwd(const LinearFwd& a) const;
  // The local backward, then dinp summed over the TP group.
  void bwd(const LinearBwd& a) const;
  // Whether bwd(a), a.swiglu_pre defined, casts the output gradient to FP8 straight out of the
  // SwiGLU backward (LinearBwd::swiglu_pre) instead of materialising it.
  bool casts_swiglu_grad(const LinearBwd& a) const { return fp8_fuses_swiglu_bwd(a); }
};

class RowParallelLinear final : public Linear {
 public:
  RowParallelLinear(const LinearTensors& weights, const LinearTensors& grads, kernels::Backend& backend,
                    const TpGroup& tp, const LoraScratch* lora = nullptr, uint64_t dropout_key = 0)
      : Linear(weights, grads, backend, tp, lora, true, dropout_key) {}
  // out = Σ_group inp_local·W_localᵀ, + b added by TP rank 0 only (with tp_comm_overlap and no
  // sequence parallelism: in row chunks, each chunk's sum under the next chunk's GEMM).
  void fwd(const LinearFwd& a) const;
  // The local backward; no communication. With swiglu_pre, dinp is the SwiGLU's input gradient
  // (LinearBwd::swiglu_pre).
  void bwd(const LinearBwd& a) const;
};

}  // namespace recipe::core
