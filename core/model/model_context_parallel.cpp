// The model's context-parallel pieces (ring_attention.hpp): the local shape, the global positions
// of the local rows (RoPE), the learned position rows they read, and ring attention. With one CP
// rank each is the plain path: attention_fwd/bwd, RoPE by t (or the packed positions), wpe as
// stored.
#include <stdexcept>
#include <string>
#include <vector>

#include "core/model/model.hpp"
#include "core/model/ring_attention.hpp"

namespace recipe::core {

using kernels::DType;
using kernels::Tensor;

ModelShape Model::cp_local_shape(const ModelShape& global, const Comm* cp) {
  ModelShape s = global;
  const int n = cp ? cp->size() : 1;
  if (n > 1) {
    // The resolver keeps seq % (2·cp) == 0; the chunk arithmetic below indexes by it.
    if (global.seq % (2 * n) != 0)
      throw std::invalid_argument("model.seq_length=" + std::to_string(global.seq) +
                                  " is not a multiple of 2·parallelism.cp=" + std::to_string(2 * n));
    s.seq = global.seq / n;
  }
  return s;
}

void Model::setup_context_parallel(Comm* cp) {
  if (!cp || cp->size() == 1) return;
  cp_.size = cp->size();
  cp_.rank = cp->rank();
  const int T = s_.seq, C = s_.hidden;
  cp_.ring = std::make_unique<RingAttention>(
      be_, *cp, kernels::AttentionShape{.B = B_, .T = T, .Hq = ls_.heads, .Hkv = ls_.kv_heads, .D = s_.head_dim});
  const bool wpe = first_stage_ && w_.position.defined();
  const size_t pos_bytes = size_t(B_) * size_t(T) * sizeof(int32_t);
  const size_t wpe_bytes = wpe ? size_t(T) * size_t(C) * kernels::dtype_size(w_.position.dtype) : 0;
  const size_t dwpe_bytes = wpe ? size_t(T) * size_t(C) * sizeof(float) : 0;
  auto align = [](size_t n) { return (n + 255) / 256 * 256; };
  cp_.buf = be_.alloc(align(pos_bytes) + align(wpe_bytes) + dwpe_bytes);
  char* p = static_cast<char*>(cp_.buf);
  cp_.positions = Tensor(p, DType::i32, be_.device(), {int64_t(B_), int64_t(T)});
  std::vector<int32_t> host(size_t(B_) * size_t(T));
  for (int b = 0; b < B_; ++b)
    for (int t = 0; t < T; ++t)
      host[size_t(b) * size_t(T) + size_t(t)] = int32_t(cp_global_position(cp_.size, cp_.rank, t, T));
  be_.from_host(cp_.positions, host.data());
  if (wpe) {
    cp_.wpe = Tensor(p + align(pos_bytes), w_.position.dtype, be_.device(), {int64_t(T), int64_t(C)});
    cp_.dwpe = Tensor(p + align(pos_bytes) + align(wpe_bytes), DType::f32, be_.device(), {int64_t(T), int64_t(C)});
  }
}

Tensor Model::rope_positions(const Activations& A) const { return s_.packed ? A.positions : cp_.positions; }

void Model::attention_fwd(const Activations& A, const LayerActs& a, const kernels::AttentionShape& att) {
  if (cp_.ring)
    cp_.ring->forward(a.atty, a.lse, a.qkv);
  else
    be_.attention_fwd({.out = a.atty, .lse = a.lse, .qkv = a.qkv, .positions = A.positions, .shape = att});
}

void Model::attention_bwd(const Activations& A, const LayerActs& a, const kernels::AttentionShape& att) {
  if (cp_.ring)
    cp_.ring->backward(A.dqkv, A.datty, a.qkv, a.atty, a.lse);
  else
    be_.attention_bwd({.dqkv = A.dqkv,
                       .dout = A.datty,
                       .qkv = a.qkv,
                       .out = a.atty,
                       .lse = a.lse,
                       .positions = A.positions,
                       .shape = att});
}

// The local rows are two runs of the table: chunk r at rows r·c.., chunk 2cp−1−r at (2cp−1−r)·c..
Tensor Model::position_table() {
  if (!cp_.wpe.defined()) return w_.position;
  const int c = s_.seq / 2;
  be_.copy(cp_.wpe.rows(0, c), w_.position.rows(int64_t(cp_.rank) * c, c));
  be_.copy(cp_.wpe.rows(c, c), w_.position.rows(int64_t(2 * cp_.size - 1 - cp_.rank) * c, c));
  return cp_.wpe;
}

Tensor Model::position_grad_begin() {
  if (!cp_.dwpe.defined() || !g_.position.defined()) return g_.position;
  be_.zero(cp_.dwpe);
  return cp_.dwpe;
}

void Model::position_grad_end() {
  if (!cp_.dwpe.defined() || !g_.position.defined()) return;
  const int c = s_.seq / 2;
  const int64_t first[2] = {int64_t(cp_.rank) * c, int64_t(2 * cp_.size - 1 - cp_.rank) * c};
  for (int i = 0; i < 2; ++i) {
    Tensor g = g_.position.rows(first[i], c);
    be_.add(g, g, cp_.dwpe.rows(int64_t(i) * c, c));
  }
}

}  // namespace recipe::core
