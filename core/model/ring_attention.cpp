// Ring attention over the CP group (see ring_attention.hpp).
#include "core/model/ring_attention.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace recipe::core {

using kernels::Tensor;

namespace {
// The ring buffer `buf` seen with the shape of `like` (the op tensors' own shapes).
Tensor shaped_like(const Tensor& buf, const Tensor& like) {
  Tensor t = like;
  t.ptr = buf.ptr;
  return t;
}
}  // namespace

RingBlock ring_block(int cp, int rank, int step, int T_local) {
  const int c = T_local / 2;
  if (step == 0) return {.q_begin = 0, .q_len = T_local, .k_begin = 0, .k_len = T_local, .causal = true};
  const int src = ((rank - step) % cp + cp) % cp;
  if (src < rank) return {.q_begin = 0, .q_len = T_local, .k_begin = 0, .k_len = c};
  return {.q_begin = c, .q_len = c, .k_begin = 0, .k_len = T_local};
}

size_t RingAttention::buffer_bytes(const kernels::AttentionShape& s, kernels::DType act) {
  const size_t one = size_t(s.B) * size_t(s.T) * size_t(s.Hq + 2 * s.Hkv) * size_t(s.D) * kernels::dtype_size(act);
  return 4 * one;
}

RingAttention::RingAttention(kernels::Backend& backend, Comm& cp, const kernels::AttentionShape& shape)
    : be_(backend), cp_(cp), shape_(shape) {
  if (shape.T % 2 != 0)
    throw std::invalid_argument("RingAttention: the local sequence (" + std::to_string(shape.T) +
                                " tokens) must hold two equal chunks");
  // The blocks this rank runs, chosen (and their workspace sized) now, so a block the backend
  // cannot run is said at start, not by the first step.
  std::vector<kernels::AttentionBlockShape> blocks;
  for (int i = 0; i < cp.size(); ++i) {
    const RingBlock b = ring_block(cp.size(), cp.rank(), i, shape.T);
    blocks.push_back({.q_len = b.q_len, .k_len = b.k_len, .causal = b.causal});
  }
  be_.prepare_attention_blocks(shape, blocks);
  const kernels::DType act = be_.act_dtype();
  const size_t total = buffer_bytes(shape, act);
  buf_ = be_.alloc(total);
  const int64_t rows = int64_t(shape.B) * shape.T, row = int64_t(shape.Hq + 2 * shape.Hkv) * shape.D;
  for (int i = 0; i < 4; ++i) {
    Tensor t(static_cast<char*>(buf_) + size_t(i) * (total / 4), act, be_.device(), {rows, row});
    (i < 2 ? kv_[i] : dkv_[i - 2]) = t;
  }
}

RingAttention::~RingAttention() { be_.free(buf_); }

void RingAttention::forward(Tensor out, Tensor lse, Tensor qkv) {
  const int cp = cp_.size(), r = cp_.rank();
  const int next = (r + 1) % cp, prev = (r - 1 + cp) % cp;
  Tensor kv = qkv;
  for (int i = 0; i < cp; ++i) {
    const RingBlock b = ring_block(cp, r, i, shape_.T);
    be_.attention_block_fwd({.out = out,
                             .lse = lse,
                             .qkv = qkv,
                             .kv = kv,
                             .shape = shape_,
                             .q_begin = b.q_begin,
                             .q_len = b.q_len,
                             .k_begin = b.k_begin,
                             .k_len = b.k_len,
                             .causal = b.causal,
                             .merge = i > 0});
    if (i + 1 == cp) break;
    Tensor recv = shaped_like(kv_[i % 2], qkv);
    cp_.send_recv(kv, next, recv, prev);
    kv = recv;
  }
}

void RingAttention::backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse) {
  const int cp = cp_.size(), r = cp_.rank();
  const int next = (r + 1) % cp, prev = (r - 1 + cp) % cp;
  Tensor kv = qkv;
  Tensor dkv = shaped_like(dkv_[0], dqkv);
  be_.zero(dqkv);  // the blocks accumulate dq into its q heads; its k and v heads stay zero
  be_.zero(dkv);   // this rank's dK/dV, accumulated around the ring (its q heads stay zero)
  for (int i = 0; i < cp; ++i) {
    const RingBlock b = ring_block(cp, r, i, shape_.T);
    be_.attention_block_bwd({.dq = dqkv,
                             .dkv = dkv,
                             .dout = dout,
                             .qkv = qkv,
                             .kv = kv,
                             .out = out,
                             .lse = lse,
                             .shape = shape_,
                             .q_begin = b.q_begin,
                             .q_len = b.q_len,
                             .k_begin = b.k_begin,
                             .k_len = b.k_len,
                             .causal = b.causal});
    // dK/dV moves on with its K/V; after the last block this hop brings rank r's own home.
    Tensor drecv = shaped_like(dkv_[(i + 1) % 2], dqkv);
    cp_.send_recv(dkv, next, drecv, prev);
    dkv = drecv;
    if (i + 1 == cp) break;
    Tensor recv = shaped_like(kv_[i % 2], qkv);
    cp_.send_recv(kv, next, recv, prev);
    kv = recv;
  }
  be_.add(dqkv, dqkv, dkv);
}

}  // namespace recipe::core
