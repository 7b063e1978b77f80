// Tensor-parallel communication overlap (parallelism.tp_comm_overlap; linear.hpp). Without
// sequence parallelism: the row-parallel forward's GEMM and output all-reduce pipelined over row
// chunks (chunked_row_fwd). With it: the ring forms of the sequence-parallel linears, which
// pipeline each all-gather / reduce-scatter with the GEMM beside it, one row block (one TP rank's
// N/t token rows) at a time. Ring neighbours:
// next = rank+1, prev = rank-1 (mod t); every step sends one block to next and receives one from
// prev (Comm::send_recv_start on the comm stream) while the compute stream runs the GEMM of the
// block it already holds, and the compute stream waits (device-side) only for the block it needs
// next. t-1 steps move the same bytes as the NCCL all-gather / reduce-scatter they replace. Each
// function waits for every op it started and ends with wait_all(), which then joins nothing new
// (NCCL: one more event wait) but recycles the ops' events (NCCL) and requests (MPI).
#include "core/model/linear.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace recipe::core {

using kernels::Tensor;

namespace {

Tensor matrix(const Tensor& t, int64_t width) { return t.view({t.numel() / width, width}); }
int ring(int i, int t) { return ((i % t) + t) % t; }
// Rows [block·m, (block+1)·m), or undefined for an undefined tensor.
Tensor block_rows(const Tensor& t, int block, int64_t m) { return t.defined() ? t.rows(block * m, m) : Tensor(); }

// The all-gather ring. At step s this rank holds block j = rank-s (its own, `shard`, at s = 0) and
// passes it to next while block j-1 arrives from prev into `full` (rows of m); use(held, j) runs
// on the compute stream meanwhile, and the next step waits for the block it needs.
template <class Use>
void gather_ring(Comm& comm, int t, int r, const Tensor& shard, const Tensor& full, int64_t m, Use use) {
  const int next = ring(r + 1, t), prev = ring(r - 1, t);
  for (int s = 0; s < t; ++s) {
    const int j = ring(r - s, t);
    const Tensor held = s == 0 ? shard : full.rows(j * m, m);
    Comm::Op moved;
    if (s + 1 < t) moved = comm.send_recv_start(held, next, full.rows(ring(j - 1, t) * m, m), prev);
    use(held, j);
    comm.wait(moved);
  }
  comm.wait_all();  // every op was waited: this only recycles their events / requests
}

// The reduce-scatter ring. Block b's partial sums travel b+1 → b+2 → … → b: at step s this rank
// writes its partial of block b = rank-1-s into partial's rows b (compute(p, b, last)), adds the
// running sum received from prev and sends the result to next while the next block's partial is
// computed; at the last step b is its own block and partial + received sum is `out`. `out` (this
// rank's rows) is the receive buffer until then: each receive is consumed by the add before the
// next one starts.
template <class Compute>
void reduce_ring(Comm& comm, kernels::Backend& be, int t, int r, const Tensor& partial, const Tensor& out, int64_t m,
                 Compute compute) {
  const int next = ring(r + 1, t), prev = ring(r - 1, t);
  Comm::Op moved;
  for (int s = 0; s < t; ++s) {
    const int b = ring(r - 1 - s, t);
    const Tensor p = partial.rows(b * m, m);
    compute(p, b, s + 1 == t);
    if (s > 0) {
      comm.wait(moved);
      be.add(s + 1 < t ? p : out, p, out);
    }
    if (s + 1 < t) moved = comm.send_recv_start(p, next, out, prev);
  }
  comm.wait_all();
}

}  // namespace

// GEMM + all-reduce in row chunks (no sequence parallelism). Chunk i's rows [i·N/k, (i+1)·N/k)
// of the output are computed, then their sum over the group is started (on the comm stream, after
// the GEMM just issued) while the next chunk's GEMM runs; the compute stream waits for every sum
// before the output is read. Each output row is the unchunked GEMM's row; the bias is added per
// chunk by TP rank 0 only. A group of fewer rows than chunks takes one row per chunk.
void Linear::chunked_row_fwd(const LinearFwd& a) const {
  // The resolver refuses the overlap with both: an adapter's scratch and dropout rows, and FP8's
  // per-call amax, are whole-call state.
  if (fp8_ || lora_) throw std::logic_error("Linear::chunked_row_fwd: not with FP8 or LoRA (the resolver refuses it)");
  const int64_t in = w_.w.dim(1), out = w_.w.dim(0);
  const Tensor x = matrix(a.inp, in), y = matrix(a.out, out);
  const int64_t rows = x.dim(0), chunks = std::clamp<int64_t>(tp_.overlap_chunks, 1, std::max<int64_t>(rows, 1));
  const Tensor bias = tp_.rank == 0 ? w_.b : Tensor();
  std::vector<Comm::Op> summed;
  summed.reserve(size_t(chunks));
  for (int64_t i = 0; i < chunks; ++i) {
    const int64_t first = i * rows / chunks, count = (i + 1) * rows / chunks - first;
    const Tensor yi = y.rows(first, count);
    affine_fwd({.out = yi, .inp = x.rows(first, count)}, bias);
    summed.push_back(tp_.comm->all_reduce_sum_start(yi));
  }
  for (const Comm::Op& op : summed) tp_.comm->wait(op);
  tp_.comm->wait_all();  // every op was waited: this only recycles their events / requests
}

// All-gather + GEMM. At step s this rank holds block j = rank-s (its own at s = 0, read from the
// shard itself) and passes it on while receiving block j-1 into the gathered buffer; the GEMM of
// block j writes output rows j, so the output equals the unchunked GEMM's row for row.
void Linear::ring_column_fwd(const LinearFwd& a) const {
  const int64_t in = w_.w.dim(1), out = w_.w.dim(0);
  const Tensor shard = matrix(a.inp, in);
  const int64_t m = shard.dim(0);
  const Tensor full = TpGroup::leading(tp_.sp->full, m * tp_.size, in);
  const Tensor y = matrix(a.out, out);
  const Tensor pre = a.pre_gelu.defined() ? matrix(a.pre_gelu, out) : Tensor();
  gather_ring(*tp_.comm, tp_.size, tp_.rank, shard, full, m, [&](const Tensor& held, int j) {
    affine_fwd({.out = y.rows(j * m, m), .inp = held, .pre_gelu = block_rows(pre, j, m)}, w_.b);
  });
}

// GEMM + reduce-scatter. Block b's partial sums travel the ring b+1 → b+2 → … → b: at step s this
// rank computes its partial of block b = rank-1-s, adds the running sum received from prev, and
// sends the result to next while the GEMM of the next block runs; at the last step b is its own
// block, and partial + received sum is the output. The output tensor (this rank's rows) is the
// receive buffer until then: each receive is consumed by the add before the next one is started.
void Linear::ring_row_fwd(const LinearFwd& a) const {
  const int t = tp_.size, r = tp_.rank;
  const int64_t in = w_.w.dim(1), out = w_.w.dim(0);
  const Tensor x = matrix(a.inp, in);
  const int64_t m = x.dim(0) / t;
  const Tensor partial = TpGroup::leading(tp_.sp->full, m * t, out);
  reduce_ring(*tp_.comm, *be_, t, r, partial, matrix(a.out, out), m, [&](const Tensor& p, int b, bool) {
    affine_fwd({.out = p, .inp = x.rows(b * m, m)}, r == 0 ? w_.b : Tensor());  // bias on rank 0 only
  });
}

// The mirror of ring_row_fwd for the partial input gradient, with the weight gradient's input
// regathered (all_gather_start) while the first blocks' dinp GEMMs run: the forward's gathered
// input is not kept (one shared buffer, not one per layer). The weight-gradient GEMM runs before
// the last block's add, so it overlaps the ring's last exchange.
void Linear::ring_column_bwd(const LinearBwd& a) const {
  const int t = tp_.size;
  const int64_t in = w_.w.dim(1), out = w_.w.dim(0);
  const Tensor shard = matrix(a.inp, in);
  const int64_t m = shard.dim(0);
  const Tensor x = TpGroup::leading(tp_.sp->full, m * t, in);
  const Comm::Op gathered = tp_.comm->all_gather_start(x, shard);
  const Tensor dy = matrix(a.dout, out);
  const Tensor partial = TpGroup::leading(tp_.sp->full_grad, m * t, in);
  const Tensor dbias = a.bias_grad_done ? Tensor() : grad_.b;
  reduce_ring(*tp_.comm, *be_, t, tp_.rank, partial, matrix(a.dinp, in), m, [&](const Tensor& p, int b, bool last) {
    // inp gives the op its shapes only (the dinp GEMM reads dout and the weight).
    be_->linear_bwd({.dinp = p, .dout = dy.rows(b * m, m), .inp = shard, .weight = w_.w});
    if (!last) return;
    tp_.comm->wait(gathered);
    be_->linear_bwd({.dweight = grad_.w, .dbias = dbias, .dout = dy, .inp = x, .weight = w_.w});
  });
}

// The mirror of ring_column_fwd for the output gradient: the blocks of dout arrive around the
// ring into the gathered buffer while each held block's dinp rows are computed (dinp is complete
// per row: no reduction); the weight gradient then reads the whole gathered dout. Through a SwiGLU
// (swiglu_pre) the blocks' rows go to swiglu_dact, and the SwiGLU backward (with the input's
// rebuild) runs once on all rows after the ring, as in the blocking path.
void Linear::ring_row_bwd(const LinearBwd& a) const {
  const int t = tp_.size, r = tp_.rank;
  const int64_t in = w_.w.dim(1), out = w_.w.dim(0);
  const Tensor shard = matrix(a.dout, out);
  const int64_t m = shard.dim(0);
  const Tensor dy = TpGroup::leading(tp_.sp->full, m * t, out);
  const Tensor x = matrix(a.inp, in);
  const bool swiglu = a.swiglu_pre.defined();
  const Tensor dx = a.dinp.defined() ? matrix(swiglu ? a.swiglu_dact : a.dinp, in) : Tensor();
  const Tensor pre = a.gelu_pre.defined() ? matrix(a.gelu_pre, in) : Tensor();
  const Tensor dinp_sum = a.dinp_is_output_grad_of ? a.dinp_is_output_grad_of->bias_grad() : Tensor();
  be_->copy(dy.rows(r * m, m), shard);  // the own block of the gathered dout, for the weight gradient
  gather_ring(*tp_.comm, t, r, shard, dy, m, [&](const Tensor& held, int j) {
    // dinp_sum accumulates over the blocks (+=, linear_bwd's contract); inp gives the shapes only.
    if (dx.defined())
      be_->linear_bwd({.dinp = dx.rows(j * m, m),
                       .dout = held,
                       .inp = x.rows(j * m, m),
                       .weight = w_.w,
                       .dinp_gelu_aux = block_rows(pre, j, m),
                       .dinp_sum = dinp_sum});
  });
  if (swiglu && dx.defined())
    be_->swiglu_bwd_rebuild(
        {.dgate_up = a.dinp, .act = a.rebuild_input ? x : Tensor(), .dout = dx, .gate_up = a.swiglu_pre});
  else if (swiglu && a.rebuild_input)
    be_->swiglu_fwd(x, a.swiglu_pre);
  else if (a.rebuild_input)
    be_->gelu_fwd(x, pre);  // the input was not kept: rebuilt for the weight gradient
  be_->linear_bwd({.dweight = grad_.w, .dout = dy, .inp = x, .weight = w_.w});
  if (a.bias_grad_done || !grad_.b.defined()) return;
  // As sp_row_bwd: Σ over this rank's rows of dout, summed over the group by the Model.
  be_->linear_bwd({.dbias = grad_.b, .dout = shard, .inp = TpGroup::leading(a.inp, m, in), .weight = w_.w});
}

}  // namespace recipe::core
