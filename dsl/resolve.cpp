// resolve(): config tree + executor facts → a fully derived, fully checked plan::Plan. The steps live in
// resolve_fields.cpp, resolve_family.cpp, resolve_derive.cpp, resolve_checks.cpp, resolve_files.cpp and
// resolve_executable.cpp; this file orders them.
#include <charconv>
#include <numeric>

#include "dsl/resolve_internal.hpp"

namespace recipe::dsl {

namespace detail {

Origin ResolveContext::origin(const std::string& path) const {
  if (auto it = fact_origins.find(path); it != fact_origins.end()) return it->second;
  std::string p = path;
  while (!p.empty()) {
    if (auto it = tree.origins.find(p); it != tree.origins.end()) return it->second;
    const auto dot = p.find_last_of('.');
    if (dot == std::string::npos) break;
    p.resize(dot);
  }
  // Set in the tree but with no recorded origin (a hand-built tree): unknown, not "default".
  if (tree.root.is_object()) {
    const auto dot = path.find('.');
    const std::string section = path.substr(0, dot);
    if (auto it = tree.root.find(section); it != tree.root.end()) {
      if (dot == std::string::npos) return Origin{};
      if (it->is_object() && it->contains(path.substr(dot + 1))) return Origin{};
    }
  }
  return Origin{"default", 0};
}

void ResolveContext::violation(const std::string& path, std::string message, std::string fix,
                               const std::string& origin_path) {
  // A path can be an unknown key of any length, and messages quote values: all bounded.
  out.violations.push_back(Violation{shown_value(path), bounded_message(message), bounded_message(fix),
                                     origin(origin_path.empty() ? path : origin_path)});
}

std::string fmt_double(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

int gcd_int(int a, int b) { return std::gcd(a, b); }

}  // namespace detail

ResolveResult resolve(const ConfigTree& tree, const ExecutorFacts& facts) {
  ResolveResult result;
  detail::ResolveContext ctx(tree, facts, result);
  detail::read_tree(ctx);
  detail::derive_family(ctx);  // before every derivation that reads the architecture flags
  detail::check_ranges(ctx);
  detail::check_names(ctx);
  detail::derive_execution(ctx);
  detail::derive_model(ctx);
  detail::check_relations(ctx);
  detail::check_files(ctx);       // reads the files the plan names (dsl/resolve_files.cpp)
  detail::check_executable(ctx);  // after the rules, so a key's own rule is reported first
  detail::check_fp8(ctx);
  detail::check_gpu_capability(ctx);
  detail::derive_and_check_memory(ctx);
  detail::check_host_memory(ctx);
  return result;
}

}  // namespace recipe::dsl
