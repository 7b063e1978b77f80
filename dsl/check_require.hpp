// Helpers shared by the check files: a value as message text, and `require`, the one-line
// "path=value requirement" violation. Internal to dsl/.
#pragma once

#include <cstdint>
#include <string>

#include "dsl/resolve_internal.hpp"

namespace recipe::dsl::detail {

inline std::string str(int v) { return std::to_string(v); }
inline std::string str(int64_t v) { return std::to_string(v); }
inline std::string str(double v) { return fmt_double(v); }

// Reports `path=value <requirement>` unless the key already had a type error.
template <class T>
bool require(ResolveContext& ctx, const std::string& path, T value, bool ok, const std::string& requirement,
             const std::string& fix = "") {
  if (ok || ctx.bad_paths.count(path)) return true;
  ctx.violation(path, path + "=" + str(value) + " " + requirement, fix);
  return false;
}

}  // namespace recipe::dsl::detail
