#include "dsl/tree_merge.hpp"

#include <algorithm>
#include <array>
#include <set>
#include <unordered_map>

namespace recipe::dsl::load_detail {
namespace {

constexpr std::array<const char*, 12> kSectionOrder = {"model",   "data",     "optimizer",   "schedule",
                                                       "trainer", "fp8",      "parallelism", "checkpoint",
                                                       "peft",    "executor", "kernels",     "experiment"};

int top_level_rank(const std::string& key) {
  if (key == "mode") return 0;
  for (std::size_t i = 0; i < kSectionOrder.size(); ++i)
    if (key == kSectionOrder[i]) return static_cast<int>(i) + 1;
  return static_cast<int>(kSectionOrder.size()) + 1;
}

void sort_object(Json& node, bool top_level) {
  if (node.is_array()) {
    for (auto& element : node) sort_object(element, false);
    return;
  }
  if (!node.is_object()) return;
  std::vector<std::pair<std::string, Json>> items;
  for (auto& [key, value] : node.items()) items.emplace_back(key, std::move(value));
  std::stable_sort(items.begin(), items.end(), [top_level](const auto& a, const auto& b) {
    if (top_level) {
      int ra = top_level_rank(a.first), rb = top_level_rank(b.first);
      if (ra != rb) return ra < rb;
    }
    return a.first < b.first;
  });
  Json sorted = Json::object();
  for (auto& [key, value] : items) {
    sort_object(value, false);
    append_new_key(sorted, std::move(key), std::move(value));
  }
  node = std::move(sorted);
}

void merge_node(Json& base, const Json& over, const std::string& prefix, ConfigTree& tree,
                const std::map<std::string, Origin>& over_origins, int depth) {
  if (depth > kMaxTreeDepth)
    throw RecipeError(prefix + " is nested more than " + std::to_string(kMaxTreeDepth) + " tables deep");
  // Position of each key of `base`, so merging N keys is O(N) rather than a linear search each.
  Json::object_t::Container& items = base.get_ref<Json::object_t&>();  // by position, not by key
  std::unordered_map<std::string, std::size_t> at;
  at.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) at.emplace(items[i].first, i);
  for (const auto& [key, value] : over.items()) {
    const std::string path = join_path(prefix, key);
    const auto found = at.find(key);
    if (found != at.end() && value.is_object() && items[found->second].second.is_object()) {
      merge_node(items[found->second].second, value, path, tree, over_origins, depth + 1);
      continue;
    }
    if (found != at.end()) {
      items[found->second].second = value;
    } else {
      at.emplace(key, items.size());
      append_new_key(base, key, value);
    }
    for_each_leaf(
        value,
        [&](const std::string& leaf, const Json&) {
          if (auto it = over_origins.find(leaf); it != over_origins.end()) tree.origins[leaf] = it->second;
        },
        path);
  }
}

}  // namespace

void append_new_key(Json& object, std::string key, Json value) {
  // ordered_map is a std::vector of pairs; its own insert would first search for the key.
  object.get_ref<Json::object_t&>().emplace_back(std::move(key), std::move(value));
}

bool is_utf8(const std::string& s) {
  // nlohmann's strict dump is the check, so the rule is exactly what serializing the tree needs.
  try {
    (void)Json(s).dump();
    return true;
  } catch (const Json::type_error&) {
    return false;
  }
}

std::string join_path(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

void canonicalize(Json& root) { sort_object(root, true); }

void for_each_leaf(const Json& node, const std::function<void(const std::string&, const Json&)>& fn,
                   const std::string& prefix) {
  if (!node.is_object()) {
    fn(prefix, node);
    return;
  }
  for (const auto& [key, value] : node.items()) for_each_leaf(value, fn, join_path(prefix, key));
}

void merge_into(ConfigTree& base, const Json& over, const std::map<std::string, Origin>& over_origins) {
  merge_node(base.root, over, "", base, over_origins, 0);
  prune_origins(base);
  canonicalize(base.root);
}

void prune_origins(ConfigTree& tree) {
  std::set<std::string> leaves;
  for_each_leaf(tree.root, [&](const std::string& path, const Json&) { leaves.insert(path); });
  std::erase_if(tree.origins, [&](const auto& entry) { return !leaves.count(entry.first); });
}

}  // namespace recipe::dsl::load_detail
