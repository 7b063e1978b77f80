// Reading a family's tensor table: which table a shape uses, which rows it has, their shapes and
// names (see tensor_table.hpp).
#include "family/tensor_table.hpp"

#include <stdexcept>
#include <utility>

#include "family/family.hpp"
#include "family/registry.hpp"

namespace recipe::core {

namespace {

std::string with_layer(const char* pattern, int layer) {
  std::string s = pattern;
  const auto at = s.find("{}");
  if (at != std::string::npos) {
    if (layer < 0) throw std::logic_error(std::string("tensor pattern ") + pattern + " needs a layer number");
    s.replace(at, 2, std::to_string(layer));
  }
  return s;
}

}  // namespace

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
    case InitKind::kaiming_uniform:
      return "kaiming_uniform";
  }
  return "?";
}

std::span<const TensorDecl> tensor_table(const ArchShape& s) {
  if (!s.family) throw std::logic_error("a model shape without a family: build it with model_shape() (model.arch)");
  return s.family->tensors;
}

bool present(const TensorDecl& d, const ArchShape& s, const Adapters& a) {
  const unsigned r = d.requires_;
  if ((r & needs_bias) && !s.bias) return false;
  if ((r & needs_norm_bias) && !s.norm_bias()) return false;
  if ((r & needs_learned_positions) && !s.learned_positions) return false;
  if ((r & needs_untied) && s.tied) return false;
  if ((r & needs_gelu) && !s.gelu) return false;
  if ((r & needs_swiglu) && s.gelu) return false;
  if ((r & needs_qk_norm) && !s.qk_norm) return false;
  const std::pair<unsigned, unsigned> lora[] = {{needs_lora_qkv, lora_qkv},
                                                {needs_lora_proj, lora_proj},
                                                {needs_lora_mlp_in, lora_mlp_in},
                                                {needs_lora_mlp_out, lora_mlp_out}};
  for (const auto& [need, target] : lora)
    if ((r & need) && !(a.any() && (a.targets & target))) return false;
  return true;
}

bool is_adapter(const TensorDecl& d) { return d.part == Part::lora_a || d.part == Part::lora_b; }

bool trainable(const TensorDecl& d, const Adapters& a) { return !a.any() || is_adapter(d); }

int64_t dim_size(Dim dim, const ArchShape& s, const Adapters& a) {
  switch (dim) {
    case Dim::hidden:
      return s.hidden;
    case Dim::q_dim:
      return s.q_dim();
    case Dim::kv_dim:
      return s.kv_dim();
    case Dim::head_dim:
      return s.head_dim;
    case Dim::ffn:
      return s.ffn;
    case Dim::padded_vocab:
      return s.padded_vocab;
    case Dim::max_positions:
      return s.max_positions;
    case Dim::lora_rank:
      return a.rank;
  }
  return 0;
}

std::vector<int64_t> global_shape(const TensorDecl& d, const ArchShape& s, const Adapters& a) {
  std::vector<int64_t> shape;
  for (Dim dim : d.dims) shape.push_back(dim_size(dim, s, a));
  return shape;
}

int64_t global_numel(const TensorDecl& d, const ArchShape& s, const Adapters& a) {
  int64_t n = 1;
  for (Dim dim : d.dims) n *= dim_size(dim, s, a);
  return n;
}

int shard_dim(Shard shard) {
  switch (shard) {
    case Shard::replicated:
      return -1;
    case Shard::column:
    case Shard::vocab_rows:
      return 0;
    case Shard::row:
      return 1;
  }
  return -1;
}

std::string tensor_name(const TensorDecl& d, int layer) { return with_layer(d.name, layer); }

std::string hf_tensor_name(const TensorDecl& d, int column, int layer) {
  const HfName h = d.hf_name(column);
  if (!h.name) throw std::logic_error(std::string(d.name) + " has no Hugging Face name in this architecture");
  return with_layer(h.name, layer);
}

const std::string& word_embedding_name() {
  static const std::string name = [] {
    for (const TensorDecl& d : families().front()->tensors)
      if (d.role == Role::word_embedding) return std::string(d.name);
    throw std::logic_error("the first family's table has no word embedding");
  }();
  return name;
}

}  // namespace recipe::core
