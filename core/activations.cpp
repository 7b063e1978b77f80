#include "core/activations.hpp"

#include <algorithm>

namespace recipe::core {

using kernels::DType;
using kernels::Tensor;

Tensor Carver::take(DType t, std::initializer_list<int64_t> shape) {
  constexpr size_t kAlign = 256;
  used_ = (used_ + kAlign - 1) / kAlign * kAlign;
  Tensor x(nullptr, t, device_, shape);
  if (base_) x.ptr = reinterpret_cast<void*>(base_ + used_);
  used_ += x.bytes();
  return x;
}

int64_t classifier_chunk_rows(int64_t rows, int64_t padded_vocab, DType act) {
  constexpr int64_t kBudget = int64_t(64) << 20;
  int64_t per_row = padded_vocab * int64_t(kernels::dtype_size(act));
  return std::clamp<int64_t>(kBudget / std::max<int64_t>(1, per_row), 1, rows);
}

namespace {

void carve_layer(Carver& c, LayerActs& a, const ModelShape& s, int B, DType act, bool with_residual) {
  const int64_t N = int64_t(B) * s.seq, C = s.hidden;
  if (with_residual) a.residual = c.take(act, {N, C});
  a.ln1 = c.take(act, {N, C});
  if (s.layernorm) a.ln1_mean = c.take(DType::f32, {N});
  a.ln1_rstd = c.take(DType::f32, {N});
  a.qkv = c.take(act, {N, s.qkv_dim()});
  a.atty = c.take(act, {N, s.q_dim()});
  a.lse = c.take(DType::f32, {int64_t(B), int64_t(s.heads), int64_t(s.seq)});
  a.residual2 = c.take(act, {N, C});
  a.ln2 = c.take(act, {N, C});
  if (s.layernorm) a.ln2_mean = c.take(DType::f32, {N});
  a.ln2_rstd = c.take(DType::f32, {N});
  a.fc_pre = c.take(act, {N, s.fc_in_rows()});
  a.fc_act = c.take(act, {N, int64_t(s.ffn)});
}

}  // namespace

void carve_activations(Carver& c, Activations& acts, const ModelShape& s, int B, bool recompute,
                       DType act) {
  const int64_t N = int64_t(B) * s.seq, C = s.hidden;
  acts.recompute = recompute;
  acts.saved.assign(size_t(s.layers), LayerActs{});
  for (auto& a : acts.saved) {
    if (recompute)
      a.residual = c.take(act, {N, C});
    else
      carve_layer(c, a, s, B, act, true);
  }
  acts.scratch = LayerActs{};
  if (recompute) carve_layer(c, acts.scratch, s, B, act, false);

  acts.final_residual = c.take(act, {N, C});
  acts.lnf = c.take(act, {N, C});
  if (s.layernorm) acts.lnf_mean = c.take(DType::f32, {N});
  acts.lnf_rstd = c.take(DType::f32, {N});
  acts.proj_out = c.take(act, {N, C});
  acts.chunk_rows = classifier_chunk_rows(N, s.padded_vocab, act);
  acts.logits = c.take(act, {acts.chunk_rows, int64_t(s.padded_vocab)});
  acts.inputs = c.take(DType::i32, {N});
  acts.targets = c.take(DType::i32, {N});

  acts.dresidual = c.take(act, {N, C});
  acts.dln = c.take(act, {N, C});
  acts.datty = c.take(act, {N, s.q_dim()});
  acts.dqkv = c.take(act, {N, s.qkv_dim()});
  acts.dfc = c.take(act, {N, s.fc_in_rows()});
  if (!s.gelu) acts.dfc_act = c.take(act, {N, int64_t(s.ffn)});
}

}  // namespace recipe::core
