#include "core/model/param_layout.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "family/linears.hpp"

namespace recipe::core {

int64_t ParamSpec::global_index(int64_t i) const {
  if (shard_dim < 0) return i;
  // Row-major: split i into (outer, along, inner) around shard_dim, then shift `along`.
  int64_t inner = 1;
  for (size_t d = shard_dim + 1; d < local_shape.size(); ++d) inner *= local_shape[d];
  int64_t along = (i / inner) % shard_size;
  int64_t outer = i / (inner * shard_size);
  int64_t global_along = global_shape[shard_dim];
  return (outer * global_along + shard_begin + along) * inner + i % inner;
}

const ParamSpec* ParamLayout::find(std::string_view name) const {
  for (const auto& p : params)
    if (p.name == name) return &p;
  return nullptr;
}

const ParamSpec& ParamLayout::get(std::string_view name) const {
  if (const ParamSpec* p = find(name)) return *p;
  throw std::out_of_range("no parameter named \"" + std::string(name) + "\" in this model");
}

int64_t ParamLayout::num_params() const {
  int64_t n = 0;
  for (const auto& p : params) n += p.numel;
  return n;
}

std::vector<const ParamSpec*> ParamLayout::bound(Role role, Part part, int layer) const {
  std::vector<const ParamSpec*> r;
  for (const auto& p : params)
    if (p.decl && p.decl->role == role && p.decl->part == part && p.layer == layer) r.push_back(&p);
  std::sort(r.begin(), r.end(), [](const ParamSpec* a, const ParamSpec* b) { return a->offset < b->offset; });
  return r;
}

namespace {

struct ShardRange {
  int dim = -1;
  int64_t begin = 0, size = 0;
};

class Builder {
 public:
  Builder(ParamLayout& layout, int64_t align) : layout_(layout), align_(align) {}

  void start_pack() { cursor_ = (cursor_ + align_ - 1) / align_ * align_; }
  void set_phase(int phase) { phase_ = phase; }

  void add(const TensorDecl& d, int layer, std::vector<int64_t> shape, ShardRange shard, bool decay, double std,
           bool trainable, bool fp8 = false) {
    const InitKind init = d.init;
    ParamSpec p;
    p.name = tensor_name(d, layer);
    p.decl = &d;
    p.layer = layer;
    p.global_shape = shape;
    p.local_shape = shape;
    if (shard.dim >= 0) {
      p.shard_dim = shard.dim;
      p.shard_begin = shard.begin;
      p.shard_size = shard.size;
      p.local_shape[shard.dim] = shard.size;
    } else {
      p.shard_size = shape[0];
    }
    p.numel = 1;
    for (int64_t n : p.local_shape) p.numel *= n;
    p.offset = cursor_;
    cursor_ += p.numel;
    p.weight_decay = decay;
    p.init = init;
    p.init_std =
        (init == InitKind::normal || init == InitKind::normal_output || init == InitKind::kaiming_uniform) ? std : 0.0;
    p.ready_phase = phase_;
    p.trainable = trainable;
    p.fp8 = fp8;
    layout_.params.push_back(std::move(p));
  }
  int64_t cursor() const { return cursor_; }

 private:
  ParamLayout& layout_;
  int64_t align_;
  int64_t cursor_ = 0;
  int phase_ = 0;
};

}  // namespace

ParamLayout build_param_layout(const ModelShape& s, const plan::OptimizerConfig& opt, int tp, int tp_rank) {
  LayoutOptions o;
  o.tp_size = tp;
  o.tp_rank = tp_rank;
  return build_param_layout(s, opt, o);
}

ParamLayout build_param_layout(const ModelShape& s, const plan::OptimizerConfig& opt, const LayoutOptions& o) {
  const int tp = o.tp_size, tp_rank = o.tp_rank;
  const std::vector<LayerChunk> chunks =
      o.chunks.empty() ? std::vector<LayerChunk>{{0, s.arch.layers, true, true}} : o.chunks;
  int num_layers = 0, below = 0;
  bool first_stage = false, last_stage = false;
  for (const LayerChunk& c : chunks) {
    if (c.first_layer < below || c.num_layers < 0 || c.first_layer + c.num_layers > s.arch.layers)
      throw std::invalid_argument("build_param_layout: chunk layers [" + std::to_string(c.first_layer) + ", " +
                                  std::to_string(c.first_layer + c.num_layers) + ") outside the model's " +
                                  std::to_string(s.arch.layers) + " layers or not after the chunk before");
    below = c.first_layer + c.num_layers;
    num_layers += c.num_layers;
    first_stage = first_stage || c.first_stage;
    last_stage = last_stage || c.last_stage;
  }
  if (o.align < kParamAlign || o.align % kParamAlign != 0)
    throw std::invalid_argument("build_param_layout: align must be a multiple of " + std::to_string(kParamAlign));
  if (tp < 1 || tp_rank < 0 || tp_rank >= tp)
    throw std::invalid_argument("build_param_layout: bad tp rank " + std::to_string(tp_rank) + " of " +
                                std::to_string(tp));
  auto divisible = [&](int64_t n, const char* what) {
    if (n % tp != 0)
      throw std::invalid_argument(std::string(what) + "=" + std::to_string(n) +
                                  " is not divisible by parallelism.tp=" + std::to_string(tp));
  };
  divisible(s.arch.heads, "model.num_attention_heads");
  divisible(s.arch.kv_heads, "model.num_kv_heads");
  divisible(s.arch.ffn, "model.ffn_hidden_size");
  divisible(s.arch.padded_vocab, "model.padded_vocab_size");

  ParamLayout L;
  L.tp_size = tp;
  L.tp_rank = tp_rank;
  L.chunks = chunks;
  L.num_layers = num_layers;
  L.first_stage = first_stage;
  L.last_stage = last_stage;
  L.align = o.align;
  Builder b(L, o.align);
  const int embedding_phase = num_layers + 1;
  const double std = s.arch.init_std;
  const double out_std = s.arch.init_std / std::sqrt(2.0 * s.arch.layers);
  const std::span<const TensorDecl> table = tensor_table(s);

  // This rank's slice along the row's shard dim: an equal 1/tp share, rank by rank.
  auto shard_of = [&](const TensorDecl& d, const std::vector<int64_t>& shape) {
    const int dim = shard_dim(d.shard);
    if (tp == 1 || dim < 0) return ShardRange{};
    const int64_t share = shape[size_t(dim)] / tp;
    return ShardRange{dim, tp_rank * share, share};
  };
  auto on_this_stage = [&](const TensorDecl& d) {
    switch (d.scope) {
      case Scope::embedding:
        return first_stage;
      case Scope::embedding_and_tied_head:
        return first_stage || (last_stage && s.arch.tied);
      case Scope::layer:
        return true;
      case Scope::head:
        return last_stage;
    }
    return false;
  };

  // One group: its embedding rows, then layer by layer its layer rows, then its head rows, each
  // in table order. A row starts a new pack unless the row laid out just before it has the same
  // role and part in the same layer. The two decay groups hold the trainable rows, the frozen
  // group the others (LoRA's base), the FP8-only frozen weights (ModelShape::fp8_frozen) last.
  enum class Group { decay, no_decay, frozen, frozen_fp8 };
  auto fp8_only = [&](const TensorDecl& d) {
    if (d.part != Part::weight || trainable(d, s)) return false;
    return (s.fp8_frozen & linear_bit(d.role)) != 0;
  };
  auto lay_group = [&](Group group) {
    const bool decay_group = group == Group::decay;
    auto in_group = [&](const TensorDecl& d) {
      if (!trainable(d, s)) return group == (fp8_only(d) ? Group::frozen_fp8 : Group::frozen);
      if (group == Group::frozen || group == Group::frozen_fp8) return false;
      return d.decay == DecayGroup::embedding ? opt.decay_embeddings == decay_group
                                              : (d.decay == DecayGroup::decay) == decay_group;
    };
    const TensorDecl* prev = nullptr;
    int prev_layer = -1;
    auto lay = [&](const TensorDecl& d, int layer) {
      if (!in_group(d) || !present(d, s) || !on_this_stage(d)) return;
      if (!prev || prev->role != d.role || prev->part != d.part || prev_layer != layer) b.start_pack();
      const std::vector<int64_t> shape = global_shape(d, s);
      const double init_std = d.init == InitKind::normal_output     ? out_std
                              : d.init == InitKind::kaiming_uniform ? 1.0 / std::sqrt(double(shape.at(1)))
                                                                    : std;
      const bool frozen = group == Group::frozen || group == Group::frozen_fp8;
      b.add(d, layer, shape, shard_of(d, shape), decay_group, init_std, !frozen, group == Group::frozen_fp8);
      prev = &d;
      prev_layer = layer;
    };
    // The tied word embedding of the last stage is final only after the embedding-group sum, which
    // runs once the whole backward is done: it shares the embedding phase.
    b.set_phase(embedding_phase);
    for (const TensorDecl& d : table)
      if (d.scope == Scope::embedding || d.scope == Scope::embedding_and_tied_head) lay(d, -1);
    int above = num_layers;  // the rank's layers from l up
    for (const LayerChunk& c : chunks)
      for (int l = c.first_layer; l < c.first_layer + c.num_layers; ++l) {
        b.set_phase(above--);
        for (const TensorDecl& d : table)
          if (d.scope == Scope::layer) lay(d, l);
      }
    b.set_phase(0);
    for (const TensorDecl& d : table)
      if (d.scope == Scope::head) lay(d, -1);
    b.start_pack();
  };

  L.decay_begin = 0;
  lay_group(Group::decay);
  L.decay_numel = b.cursor() - L.decay_begin;
  L.nodecay_begin = b.cursor();
  lay_group(Group::no_decay);
  L.nodecay_numel = b.cursor() - L.nodecay_begin;
  L.trainable_numel = b.cursor();
  L.frozen_begin = b.cursor();
  lay_group(Group::frozen);
  L.fp8_begin = b.cursor();
  lay_group(Group::frozen_fp8);
  L.fp8_numel = b.cursor() - L.fp8_begin;
  L.frozen_numel = b.cursor() - L.frozen_begin;
  L.total_numel = b.cursor();
  return L;
}

}  // namespace recipe::core
