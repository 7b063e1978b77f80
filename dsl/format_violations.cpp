#include <string>

#include "dsl/dsl.hpp"

namespace recipe::dsl {

// One block per violation:
//   parallelism.tp  (set at examples/wiki.lua:12)
//     parallelism.tp=3 does not divide model.num_attention_heads=16
//     fix: try tp=2 or tp=4
std::string format_violations(const std::vector<Violation>& violations) {
  if (violations.empty()) return "";
  std::string out =
      std::to_string(violations.size()) + (violations.size() == 1 ? " problem" : " problems") + " in the recipe:\n";
  for (const auto& v : violations) {
    out += "\n  " + (v.path.empty() ? std::string("(recipe)") : v.path);
    if (v.origin.file == "default")
      out += "  (default value)";
    else if (!v.origin.file.empty())
      out += "  (set at " + v.origin.str() + ")";
    out += "\n    " + v.message + "\n";
    if (!v.fix.empty()) out += "    fix: " + v.fix + "\n";
  }
  return out;
}

}  // namespace recipe::dsl
