// The model's context-parallel pieces (ring_attention.hpp): the local shape, the global positions
// of the local rows (RoPE's angles, and the rows of the learned position table that embedding_fwd
// reads and embedding_bwd accumulates into: the table and its gradient themselves, no copies), and
// ring attention. With one CP rank each is the plain path: attention_fwd/bwd, RoPE by t (or the
// packed positions), wpe row t.
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
  const int T = s_.seq;
  cp_.ring = std::make_unique<RingAttention>(
      be_, *cp,
      kernels::AttentionShape{.B = B_, .T = T, .Hq = ls_.arch.heads, .Hkv = ls_.arch.kv_heads, .D = s_.arch.head_dim});
  cp_.buf = be_.alloc(size_t(B_) * size_t(T) * sizeof(int32_t));
  cp_.positions = Tensor(cp_.buf, DType::i32, be_.device(), {int64_t(B_), int64_t(T)});
  std::vector<int32_t> host(size_t(B_) * size_t(T));
  for (int b = 0; b < B_; ++b)
    for (int t = 0; t < T; ++t)
      host[size_t(b) * size_t(T) + size_t(t)] = int32_t(cp_global_position(cp_.size, cp_.rank, t, T));
  be_.from_host(cp_.positions, host.data());
}

// Row 0 of the positions: every sample's row t has the same global position.
Tensor Model::position_rows() const {
  if (!cp_.positions.defined()) return {};
  return Tensor(cp_.positions.ptr, DType::i32, be_.device(), {int64_t(s_.seq)});
}

kernels::RopeArgs Model::rope_args(const Activations& A, Tensor qkv, const kernels::AttentionShape& att) const {
  return {.qkv = qkv,
          .positions = s_.packed ? A.positions : cp_.positions,
          .shape = att,
          .inv_freq = rope_->inv_freq(),
          .max_positions = s_.seq * cp_.size};
}

void Model::attention_fwd(const Activations& A, const LayerActs& a, Tensor qkv, const kernels::AttentionShape& att) {
  if (cp_.ring)
    cp_.ring->forward(a.atty, a.lse, qkv);
  else
    be_.attention_fwd({.out = a.atty, .lse = a.lse, .qkv = qkv, .positions = A.positions, .shape = att});
}

void Model::attention_bwd(const Activations& A, const LayerActs& a, Tensor qkv, const kernels::AttentionShape& att) {
  if (cp_.ring)
    cp_.ring->backward(A.dqkv, A.datty, qkv, a.atty, a.lse);
  else
    be_.attention_bwd({.dqkv = A.dqkv,
                       .dout = A.datty,
                       .qkv = qkv,
                       .out = a.atty,
                       .lse = a.lse,
                       .positions = A.positions,
                       .shape = att});
}

}  // namespace recipe::core
