#include "dsl/dsl.hpp"

namespace recipe::dsl {

std::string Origin::str() const {
  if (file == "override") return expr.empty() ? std::string("override") : "override `" + expr + "`";
  if (file.empty()) return "(unknown origin)";
  if (line > 0) return file + ":" + std::to_string(line);
  return file;
}

}  // namespace recipe::dsl
