#include "core/model/param_layout.hpp"

#include <cmath>
#include <stdexcept>

namespace recipe::core {

const char* init_kind_name(InitKind k) {
  switch (k) {
    case InitKind::normal:
      return "normal";
    case InitKind::normal_output:
      return "normal_output";
    case InitKind::zeros:
      return "zeros";
    case InitKind::ones:
      return "ones";
  }
  return "?";
}

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

  void add(std::string name, std::vector<int64_t> shape, ShardRange shard, bool decay, InitKind init, double std) {
    ParamSpec p;
    p.name = std::move(name);
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
    for (int64_t d : p.local_shape) p.numel *= d;
    p.offset = cursor_;
    cursor_ += p.numel;
    p.weight_decay = decay;
    p.init = init;
    p.init_std = (init == InitKind::normal || init == InitKind::normal_output) ? std : 0.0;
    p.ready_phase = phase_;
    layout_.params.push_back(std::move(p));
  }
  // A single tensor is a pack of one.
  void add_alone(std::string name, std::vector<int64_t> shape, ShardRange shard, bool decay, InitKind init,
                 double std) {
    start_pack();
    add(std::move(name), std::move(shape), shard, decay, init, std);
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
  const int first_layer = o.first_layer;
  const int num_layers = o.num_layers < 0 ? s.layers : o.num_layers;
  if (first_layer < 0 || num_layers < 0 || first_layer + num_layers > s.layers)
    throw std::invalid_argument("build_param_layout: stage layers [" + std::to_string(first_layer) + ", " +
                                std::to_string(first_layer + num_layers) + ") outside the model's " +
                                std::to_string(s.layers) + " layers");
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
  divisible(s.heads, "model.num_attention_heads");
  divisible(s.ffn, "model.ffn_hidden_size");
  divisible(s.padded_vocab, "model.padded_vocab_size");
  if (s.kv_heads % tp != 0 && tp % s.kv_heads != 0)
    throw std::invalid_argument("model.num_kv_heads=" + std::to_string(s.kv_heads) +
                                " and parallelism.tp=" + std::to_string(tp) + ": one must divide the other");

  ParamLayout L;
  L.tp_size = tp;
  L.tp_rank = tp_rank;
  L.first_layer = first_layer;
  L.num_layers = num_layers;
  L.first_stage = o.first_stage;
  L.last_stage = o.last_stage;
  L.align = o.align;
  Builder b(L, o.align);
  const int last_layer = first_layer + num_layers - 1;
  const int embedding_phase = num_layers + 1;
  auto layer_phase = [&](int l) { return 1 + (last_layer - l); };
  const int layer_end = first_layer + num_layers;

  const int64_t C = s.hidden, D = s.head_dim, F = s.ffn, Vp = s.padded_vocab;
  const double std = s.init_std;
  const double out_std = s.init_std / std::sqrt(2.0 * s.layers);
  const ShardRange none{};
  auto cols = [&](int64_t rows) {  // column-parallel: my slice of dim 0
    return tp == 1 ? none : ShardRange{0, tp_rank * (rows / tp), rows / tp};
  };
  auto rows_in = [&](int64_t in) {  // row-parallel: my slice of dim 1
    return tp == 1 ? none : ShardRange{1, tp_rank * (in / tp), in / tp};
  };
  auto bias_cols = [&](int64_t n) { return tp == 1 ? none : ShardRange{0, tp_rank * (n / tp), n / tp}; };
  // kv heads: split when tp divides them, else the single kv head my q heads attend with.
  ShardRange kv_shard = none;
  if (tp > 1) {
    if (s.kv_heads % tp == 0)
      kv_shard = ShardRange{0, tp_rank * (s.kv_dim() / tp), s.kv_dim() / tp};
    else
      kv_shard = ShardRange{0, int64_t(tp_rank / (tp / s.kv_heads)) * D, D};
  }

  const std::string emb_word = "embedding.word.weight", emb_pos = "embedding.position.weight";
  const bool decay_emb = opt.decay_embeddings;
  // The tied word embedding of the last stage is final only after the embedding-group sum, which
  // runs once the whole backward is done: it shares the embedding phase.
  auto add_embeddings = [&] {
    b.set_phase(embedding_phase);
    if (o.first_stage || (o.last_stage && s.tied))
      b.add_alone(emb_word, {Vp, C}, cols(Vp), decay_emb, InitKind::normal, std);
    if (o.first_stage && s.learned_positions)
      b.add_alone(emb_pos, {s.max_positions, C}, none, decay_emb, InitKind::normal, std);
  };
  auto add_lm_head = [&] {
    b.set_phase(0);
    if (o.last_stage && !s.tied) b.add_alone("lm_head.weight", {Vp, C}, cols(Vp), decay_emb, InitKind::normal, std);
  };

  // ---- decay group ----
  L.decay_begin = 0;
  if (decay_emb) add_embeddings();
  for (int l = first_layer; l < layer_end; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    b.set_phase(layer_phase(l));
    b.start_pack();
    b.add(p + "attention.q.weight", {s.q_dim(), C}, cols(s.q_dim()), true, InitKind::normal, std);
    b.add(p + "attention.k.weight", {s.kv_dim(), C}, kv_shard, true, InitKind::normal, std);
    b.add(p + "attention.v.weight", {s.kv_dim(), C}, kv_shard, true, InitKind::normal, std);
    b.add_alone(p + "attention.proj.weight", {C, s.q_dim()}, rows_in(s.q_dim()), true, InitKind::normal_output,
                out_std);
    if (s.gelu) {
      b.add_alone(p + "mlp.fc1.weight", {F, C}, cols(F), true, InitKind::normal, std);
      b.add_alone(p + "mlp.fc2.weight", {C, F}, rows_in(F), true, InitKind::normal_output, out_std);
    } else {
      b.start_pack();
      b.add(p + "mlp.gate.weight", {F, C}, cols(F), true, InitKind::normal, std);
      b.add(p + "mlp.up.weight", {F, C}, cols(F), true, InitKind::normal, std);
      b.add_alone(p + "mlp.down.weight", {C, F}, rows_in(F), true, InitKind::normal_output, out_std);
    }
  }
  if (decay_emb) add_lm_head();
  b.start_pack();
  L.decay_numel = b.cursor() - L.decay_begin;

  // ---- no-decay group ----
  L.nodecay_begin = b.cursor();
  if (!decay_emb) add_embeddings();
  auto add_norm = [&](const std::string& prefix) {
    b.add_alone(prefix + ".weight", {C}, none, false, InitKind::ones, 0);
    if (s.norm_bias()) b.add_alone(prefix + ".bias", {C}, none, false, InitKind::zeros, 0);
  };
  for (int l = first_layer; l < layer_end; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    b.set_phase(layer_phase(l));
    add_norm(p + "attention_norm");
    if (s.bias) {
      b.start_pack();
      b.add(p + "attention.q.bias", {s.q_dim()}, bias_cols(s.q_dim()), false, InitKind::zeros, 0);
      b.add(p + "attention.k.bias", {s.kv_dim()}, kv_shard, false, InitKind::zeros, 0);
      b.add(p + "attention.v.bias", {s.kv_dim()}, kv_shard, false, InitKind::zeros, 0);
      b.add_alone(p + "attention.proj.bias", {C}, none, false, InitKind::zeros, 0);
    }
    add_norm(p + "mlp_norm");
    if (s.bias) {
      if (s.gelu) {
        b.add_alone(p + "mlp.fc1.bias", {F}, bias_cols(F), false, InitKind::zeros, 0);
        b.add_alone(p + "mlp.fc2.bias", {C}, none, false, InitKind::zeros, 0);
      } else {
        b.start_pack();
        b.add(p + "mlp.gate.bias", {F}, bias_cols(F), false, InitKind::zeros, 0);
        b.add(p + "mlp.up.bias", {F}, bias_cols(F), false, InitKind::zeros, 0);
        b.add_alone(p + "mlp.down.bias", {C}, none, false, InitKind::zeros, 0);
      }
    }
  }
  if (o.last_stage) {
    b.set_phase(0);
    add_norm("final_norm");
  }
  if (!decay_emb) add_lm_head();
  b.start_pack();
  L.nodecay_numel = b.cursor() - L.nodecay_begin;
  L.total_numel = b.cursor();
  return L;
}

}  // namespace recipe::core
