#include "core/model/activations.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace recipe::core {

using kernels::DType;
using kernels::Tensor;

namespace {
constexpr size_t kAlign = 256;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
size_t tensor_bytes(DType t, int64_t numel) { return size_t(numel) * kernels::dtype_size(t); }
}  // namespace

void Carver::record(const char* what, size_t bytes) {
  for (auto& e : entries_)
    if (e.name == what && e.bytes == bytes) {
      ++e.count;
      return;
    }
  entries_.push_back({what, bytes, 1});
}

Tensor Carver::take(DType t, std::initializer_list<int64_t> shape, const char* what) {
  Tensor x(nullptr, t, device_, shape);
  if (base_) x.ptr = base_ + used_;
  const size_t bytes = align_up(x.bytes());
  used_ += bytes;
  record(what, bytes);
  return x;
}

size_t Carver::reserve(size_t bytes, const char* what) {
  const size_t offset = used_;
  bytes = align_up(bytes);
  used_ += bytes;
  record(what, bytes);
  return offset;
}

Tensor Carver::at(size_t offset, DType t, std::initializer_list<int64_t> shape) const {
  Tensor x(nullptr, t, device_, shape);
  if (base_) x.ptr = base_ + offset;
  return x;
}

namespace {

// With `share_ln` / `share_fc_act`, acts.shared_ln / acts.shared_fc_act stand in for the layer's ln1
// and ln2 / fc_act. (Flags, not defined(): a measuring carver hands out null tensors.)
// R = this rank's rows of the residual stream: N, or N / sp under sequence parallelism (the
// residual, the norms and their statistics); the tensors between the linears keep all N rows.
void carve_layer(Carver& c, LayerActs& a, const Activations& acts, const ModelShape& s, int B, DType act,
                 bool with_residual, bool share_ln, bool share_fc_act) {
  const int64_t N = int64_t(B) * s.seq, R = N / s.sequence_parallel, C = s.arch.hidden;
  if (with_residual) a.residual = c.take(act, {R, C}, "residual");
  a.ln1 = share_ln ? acts.shared_ln : c.take(act, {R, C}, "ln1");
  if (s.arch.layernorm) a.ln1_mean = c.take(DType::f32, {R}, "ln1_mean");
  a.ln1_rstd = c.take(DType::f32, {R}, "ln1_rstd");
  a.qkv = c.take(act, {N, s.arch.qkv_dim()}, "qkv");
  a.atty = c.take(act, {N, s.arch.q_dim()}, "atty");
  a.lse = c.take(DType::f32, {int64_t(B), int64_t(s.arch.heads), int64_t(s.seq)}, "lse");
  a.residual2 = c.take(act, {R, C}, "residual2");
  a.ln2 = share_ln ? acts.shared_ln : c.take(act, {R, C}, "ln2");
  if (s.arch.layernorm) a.ln2_mean = c.take(DType::f32, {R}, "ln2_mean");
  a.ln2_rstd = c.take(DType::f32, {R}, "ln2_rstd");
  a.fc_pre = c.take(act, {N, s.arch.fc_in_rows()}, "fc_pre");
  a.fc_act = share_fc_act ? acts.shared_fc_act : c.take(act, {N, int64_t(s.arch.ffn)}, "fc_act");
}

// The buffers every slot shares: the transient region (see the header) and the norm scratch.
void carve_shared(Carver& c, Activations& acts, const ModelShape& s, int B, Recompute level, DType act) {
  const int64_t N = int64_t(B) * s.seq, R = N / s.sequence_parallel, C = s.arch.hidden, F = s.arch.ffn,
                FI = s.arch.fc_in_rows();
  const int64_t Vl = s.arch.padded_vocab;

  const bool act_shared = level != Recompute::none;
  const size_t fc_act_end = act_shared ? align_up(tensor_bytes(act, N * F)) : 0;
  const size_t dfc_act_off = align_up(fc_act_end + tensor_bytes(act, N * FI));
  const size_t mlp_end = s.arch.gelu ? dfc_act_off : dfc_act_off + tensor_bytes(act, N * F);
  const size_t proj_end = fc_act_end + tensor_bytes(act, R * C);
  const size_t dqkv_off = align_up(tensor_bytes(act, N * s.arch.q_dim()));
  const size_t attn_end = dqkv_off + tensor_bytes(act, N * s.arch.qkv_dim());
  // The resolver derived the chunk (plan::classifier_chunk_rows over these same buffer sizes). The
  // logits view and the classifier's chunk loop index by it, so an unresolved shape must not pass.
  if (s.classifier_chunk_rows < 1)
    throw std::logic_error("activation arena: the plan is not resolved (trainer.classifier_chunk_rows)");
  acts.chunk_rows = std::min<int64_t>(s.classifier_chunk_rows, N);
  const size_t logits_end = tensor_bytes(act, acts.chunk_rows * Vl);
  const size_t region = std::max({mlp_end, proj_end, attn_end, logits_end});

  const size_t base = c.reserve(region, "transient region (logits chunk | fc_act, dfc, proj_out | datty, dqkv)");
  acts.logits = c.at(base, act, {acts.chunk_rows, Vl});
  acts.shared_fc_act = act_shared ? c.at(base, act, {N, F}) : Tensor();
  acts.dfc = c.at(base + fc_act_end, act, {N, FI});
  if (!s.arch.gelu) acts.dfc_act = c.at(base + dfc_act_off, act, {N, F});
  acts.proj_out = c.at(base + fc_act_end, act, {R, C});
  acts.datty = c.at(base, act, {N, s.arch.q_dim()});
  acts.dqkv = c.at(base + dqkv_off, act, {N, s.arch.qkv_dim()});

  acts.shared_ln = level == Recompute::norm ? c.take(act, {R, C}, "ln (shared, recomputed)") : Tensor();
  // Sequence parallelism's two whole-row buffers (core/model/linear.hpp: SequenceParallelScratch).
  // Their own region: inside one linear call they sit beside tensors of the transient region.
  if (s.sequence_parallel > 1) {
    acts.sp_full = c.take(act, {N, C}, "sequence-parallel whole rows");
    acts.sp_full_grad = c.take(act, {N, C}, "sequence-parallel whole rows");
  }
  acts.scratch = LayerActs{};
  if (level == Recompute::full) carve_layer(c, acts.scratch, acts, s, B, act, false, false, true);
}

void copy_shared(Activations& acts, const Activations& from) {
  acts.chunk_rows = from.chunk_rows;
  acts.logits = from.logits;
  acts.dfc = from.dfc;
  acts.dfc_act = from.dfc_act;
  acts.proj_out = from.proj_out;
  acts.datty = from.datty;
  acts.dqkv = from.dqkv;
  acts.scratch = from.scratch;
  acts.shared_ln = from.shared_ln;
  acts.shared_fc_act = from.shared_fc_act;
  acts.sp_full = from.sp_full;
  acts.sp_full_grad = from.sp_full_grad;
}

}  // namespace

void carve_activations(Carver& c, Activations& acts, const ModelShape& s, int B, Recompute level, DType act,
                       const Activations* shared) {
  if (s.sequence_parallel < 1 || (int64_t(B) * s.seq) % s.sequence_parallel != 0)
    throw std::logic_error("activation arena: " + std::to_string(int64_t(B) * s.seq) +
                           " token rows do not split over sequence_parallel=" + std::to_string(s.sequence_parallel) +
                           " ranks (the resolver checks micro_batch_size × seq_length % tp)");
  const int64_t N = int64_t(B) * s.seq, R = N / s.sequence_parallel, C = s.arch.hidden;
  acts.level = level;
  if (shared)
    copy_shared(acts, *shared);
  else
    carve_shared(c, acts, s, B, level, act);

  acts.saved.assign(size_t(s.arch.layers), LayerActs{});
  for (auto& a : acts.saved) {
    if (level == Recompute::full)
      a.residual = c.take(act, {R, C}, "residual");
    else
      carve_layer(c, a, acts, s, B, act, true, level == Recompute::norm, level != Recompute::none);
  }

  acts.final_residual = c.take(act, {R, C}, "final_residual");
  acts.lnf = c.take(act, {R, C}, "lnf");
  if (s.arch.layernorm) acts.lnf_mean = c.take(DType::f32, {R}, "lnf_mean");
  acts.lnf_rstd = c.take(DType::f32, {R}, "lnf_rstd");
  acts.inputs = c.take(DType::i32, {N}, "inputs");
  acts.targets = c.take(DType::i32, {N}, "targets");
  if (s.packed) acts.positions = c.take(DType::i32, {N}, "positions");
  acts.dresidual = c.take(act, {R, C}, "dresidual");
  acts.dln = c.take(act, {R, C}, "dln");
}

std::vector<ArenaEntry> activation_breakdown(const ModelShape& s, int micro_batch, Recompute level, DType act,
                                             int slots) {
  Carver measure(nullptr, kernels::Device::cpu);
  std::vector<Activations> acts(static_cast<size_t>(slots));  // slots ≥ 1 (pipeline_slots)
  for (size_t i = 0; i < acts.size(); ++i)
    carve_activations(measure, acts[i], s, micro_batch, level, act, i ? &acts[0] : nullptr);
  return measure.entries();
}

}  // namespace recipe::core
