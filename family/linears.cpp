// The flat linear list (linears.hpp), read from the tensor table.
#include "family/linears.hpp"

#include <algorithm>

namespace recipe::core {

namespace {

// How the rest of the engine names each linear role: the LoraTarget bit of peft.target_modules /
// fp8.linears, and the engine's key (RNG streams). A role absent here is no block linear.
struct RoleName {
  Role role;
  unsigned bit;
  const char* key;
};
constexpr RoleName kRoleNames[] = {{Role::qkv, lora_qkv, "qkv"},
                                   {Role::attention_out, lora_proj, "proj"},
                                   {Role::mlp_in, lora_mlp_in, "fc_in"},
                                   {Role::mlp_out, lora_mlp_out, "fc_out"}};

const RoleName* role_name(Role role) {
  for (const RoleName& r : kRoleNames)
    if (r.role == role) return &r;
  return nullptr;
}

bool is_linear_weight(const TensorDecl& d) {
  return d.scope == Scope::layer && d.part == Part::weight && (d.shard == Shard::column || d.shard == Shard::row);
}

}  // namespace

unsigned linear_bit(Role role) {
  const RoleName* r = role_name(role);
  return r ? r->bit : 0u;
}

std::vector<BlockLinear> block_linears(const ArchShape& s) {
  std::vector<BlockLinear> out;
  for (const TensorDecl& d : tensor_table(s)) {
    if (!is_linear_weight(d) || !present(d, s)) continue;
    if (std::any_of(out.begin(), out.end(), [&](const BlockLinear& b) { return b.role == d.role; })) continue;
    const RoleName* r = role_name(d.role);
    out.push_back({d.role, d.shard, r ? r->bit : 0u, r ? r->key : ""});
  }
  return out;
}

std::vector<LinearRef> linear_list(const ArchShape& s, int first_layer, int layers) {
  const std::vector<BlockLinear> per_layer = block_linears(s);
  std::vector<LinearRef> list;
  list.reserve(size_t(layers) * per_layer.size());
  for (int l = 0; l < layers; ++l)
    for (const BlockLinear& b : per_layer) list.push_back({first_layer + l, int64_t(list.size()), b});
  return list;
}

LinearFeatures linear_features(const ArchShape& s, Role role, int tp) {
  LinearFeatures f;
  Shard shard = Shard::replicated;
  for (const TensorDecl& d : tensor_table(s)) {
    if (!is_linear_weight(d) || d.role != role || !present(d, s)) continue;
    const std::vector<int64_t> shape = global_shape(d, s);
    f.out += shape.at(0);
    f.in = shape.at(1);
    shard = d.shard;
  }
  tp = std::max(1, tp);
  if (shard == Shard::column) f.out /= tp;
  if (shard == Shard::row) f.in /= tp;
  return f;
}

}  // namespace recipe::core
