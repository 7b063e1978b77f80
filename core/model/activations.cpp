#include "core/model/activations.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>

namespace recipe::core {

using kernels::DType;
using kernels::Tensor;

namespace {
constexpr size_t kAlign = 256;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
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

Tensor shaped(void* p, DType t, kernels::Device d, const std::vector<int64_t>& shape) {
  if (shape.size() > 4) throw std::logic_error("activation arena: a buffer of more than 4 dims");
  Tensor x(p, t, d, {});
  for (int64_t n : shape) x.dims[size_t(x.ndim++)] = n;
  return x;
}

DType dtype_of(ActDType t, DType act) {
  switch (t) {
    case ActDType::act:
      return act;
    case ActDType::f32:
      return DType::f32;
    case ActDType::i32:
      return DType::i32;
  }
  throw std::logic_error("activation arena: unknown dtype");
}

// The tensor a declared key names: a layer's own (LayerActs) or the slot's / rank's (Activations).
// A layer key at rank scope is the full-recompute scratch set's.
Tensor* layer_field(LayerActs& a, std::string_view key) {
  struct F {
    std::string_view key;
    Tensor LayerActs::*field;
  };
  static constexpr F fields[] = {{"residual", &LayerActs::residual}, {"ln1", &LayerActs::ln1},
                                 {"ln1_mean", &LayerActs::ln1_mean}, {"ln1_rstd", &LayerActs::ln1_rstd},
                                 {"qkv", &LayerActs::qkv},           {"atty", &LayerActs::atty},
                                 {"lse", &LayerActs::lse},           {"residual2", &LayerActs::residual2},
                                 {"ln2", &LayerActs::ln2},           {"ln2_mean", &LayerActs::ln2_mean},
                                 {"ln2_rstd", &LayerActs::ln2_rstd}, {"fc_pre", &LayerActs::fc_pre},
                                 {"fc_act", &LayerActs::fc_act}};
  for (const F& f : fields)
    if (f.key == key) return &(a.*f.field);
  return nullptr;
}

Tensor& acts_field(Activations& a, std::string_view key) {
  struct F {
    std::string_view key;
    Tensor Activations::*field;
  };
  static constexpr F fields[] = {{"final_residual", &Activations::final_residual},
                                 {"lnf", &Activations::lnf},
                                 {"lnf_mean", &Activations::lnf_mean},
                                 {"lnf_rstd", &Activations::lnf_rstd},
                                 {"proj_out", &Activations::proj_out},
                                 {"logits", &Activations::logits},
                                 {"inputs", &Activations::inputs},
                                 {"targets", &Activations::targets},
                                 {"positions", &Activations::positions},
                                 {"dresidual", &Activations::dresidual},
                                 {"dln", &Activations::dln},
                                 {"datty", &Activations::datty},
                                 {"dqkv", &Activations::dqkv},
                                 {"qkv_normed", &Activations::qkv_normed},
                                 {"dfc", &Activations::dfc},
                                 {"dfc_act", &Activations::dfc_act},
                                 {"shared_ln", &Activations::shared_ln},
                                 {"shared_fc_act", &Activations::shared_fc_act},
                                 {"sp_full", &Activations::sp_full},
                                 {"sp_full_grad", &Activations::sp_full_grad},
                                 {"loss_rowmax", &Activations::loss_rowmax},
                                 {"loss_sums", &Activations::loss_sums}};
  for (const F& f : fields)
    if (f.key == key) return a.*f.field;
  throw std::logic_error("activation arena: the declaration names an unknown buffer '" + std::string(key) + "'");
}

// The rank-scope buffers: the transient region's views, the shared ln, the whole-row buffers and
// the full-recompute scratch set.
void carve_rank(Carver& c, Activations& acts, const std::vector<ActBuffer>& decl, Recompute level, DType act) {
  acts.scratch = LayerActs{};
  for (const ActBuffer& b : decl) {
    if (b.scope != ActScope::rank) continue;
    if (!b.views.empty()) {
      const size_t base = c.reserve(size_t(b.bytes), b.label);
      for (const ActView& v : b.views)
        acts_field(acts, v.key) = c.at(base + size_t(v.offset), dtype_of(v.dtype, act), v.shape);
    } else if (Tensor* t = layer_field(acts.scratch, b.key)) {
      *t = c.take(b, act);
    } else {
      acts_field(acts, b.key) = c.take(b, act);
    }
  }
  acts.chunk_rows = acts.logits.dim(0);
  if (level == Recompute::full) acts.scratch.fc_act = acts.shared_fc_act;
}

void copy_shared(Activations& acts, const Activations& from) {
  acts.chunk_rows = from.chunk_rows;
  acts.logits = from.logits;
  acts.dfc = from.dfc;
  acts.dfc_act = from.dfc_act;
  acts.proj_out = from.proj_out;
  acts.datty = from.datty;
  acts.dqkv = from.dqkv;
  acts.qkv_normed = from.qkv_normed;
  acts.scratch = from.scratch;
  acts.shared_ln = from.shared_ln;
  acts.shared_fc_act = from.shared_fc_act;
  acts.sp_full = from.sp_full;
  acts.sp_full_grad = from.sp_full_grad;
}

}  // namespace

Tensor Carver::take(const ActBuffer& b, DType act) {
  Tensor x = shaped(nullptr, dtype_of(b.dtype, act), device_, b.shape);
  if (base_) x.ptr = base_ + used_;
  if (align_up(x.bytes()) != size_t(b.bytes))
    throw std::logic_error(std::string("activation arena: buffer '") + b.label + "' is not its declared size");
  used_ += size_t(b.bytes);
  record(b.label, size_t(b.bytes));
  return x;
}

Tensor Carver::at(size_t offset, DType t, const std::vector<int64_t>& shape) const {
  return shaped(base_ ? base_ + offset : nullptr, t, device_, shape);
}

ActivationKnobs activation_knobs(const ModelShape& s, int micro_batch, Recompute level, DType act,
                                 bool vocab_parallel_loss) {
  static_assert(int(ActRecompute::full) == int(Recompute::full) && int(ActRecompute::norm) == int(Recompute::norm) &&
                int(ActRecompute::gelu) == int(Recompute::gelu) && int(ActRecompute::none) == int(Recompute::none));
  if (s.sequence_parallel < 1 || (int64_t(micro_batch) * s.seq) % s.sequence_parallel != 0)
    throw std::logic_error("activation arena: " + std::to_string(int64_t(micro_batch) * s.seq) +
                           " token rows do not split over sequence_parallel=" + std::to_string(s.sequence_parallel) +
                           " ranks (the resolver checks micro_batch_size × seq_length % tp)");
  return {.micro_batch = micro_batch,
          .seq = s.seq,
          .hidden = s.arch.hidden,
          .heads = s.arch.heads,
          .kv_heads = s.arch.kv_heads,
          .head_dim = s.arch.head_dim,
          .ffn = s.arch.ffn,
          .padded_vocab = s.arch.padded_vocab,
          .layernorm = s.arch.layernorm,
          .gelu = s.arch.gelu,
          .qk_norm = s.arch.qk_norm,
          .packed = s.packed,
          .sequence_parallel = s.sequence_parallel,
          .recompute = ActRecompute(int(level)),
          .act_bytes = int64_t(kernels::dtype_size(act)),
          .classifier_chunk_rows = s.classifier_chunk_rows,
          .vocab_parallel_loss = vocab_parallel_loss};
}

void carve_activations(Carver& c, Activations& acts, const std::vector<ActBuffer>& decl, int layers, Recompute level,
                       DType act, const Activations* shared) {
  acts.level = level;
  if (shared)
    copy_shared(acts, *shared);
  else
    carve_rank(c, acts, decl, level, act);

  // Per layer what the level keeps; what it drops points at the rank's buffer rebuilt in backward.
  acts.saved.assign(size_t(layers), LayerActs{});
  for (LayerActs& a : acts.saved) {
    for (const ActBuffer& b : decl)
      if (b.scope == ActScope::layer) *layer_field(a, b.key) = c.take(b, act);
    if (level == Recompute::norm) a.ln1 = a.ln2 = acts.shared_ln;
    if (level == Recompute::gelu || level == Recompute::norm) a.fc_act = acts.shared_fc_act;
  }
  for (const ActBuffer& b : decl)
    if (b.scope == ActScope::slot) acts_field(acts, b.key) = c.take(b, act);
}

void carve_activations(Carver& c, Activations& acts, const ModelShape& s, int B, Recompute level, DType act,
                       const Activations* shared) {
  carve_activations(c, acts, declare_activations(activation_knobs(s, B, level, act)), s.arch.layers, level, act,
                    shared);
}

std::vector<ArenaEntry> activation_breakdown(const ModelShape& s, int micro_batch, Recompute level, DType act,
                                             int slots) {
  const std::vector<ActBuffer> decl = declare_activations(activation_knobs(s, micro_batch, level, act));
  Carver measure(nullptr, kernels::Device::cpu);
  std::vector<Activations> acts(static_cast<size_t>(slots));  // slots ≥ 1 (pipeline_slots)
  for (size_t i = 0; i < acts.size(); ++i)
    carve_activations(measure, acts[i], decl, s.arch.layers, level, act, i ? &acts[0] : nullptr);
  return measure.entries();
}

}  // namespace recipe::core
