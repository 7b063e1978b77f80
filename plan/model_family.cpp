#include "plan/model_family.hpp"

#include <stdexcept>
#include <string>

#include "family/registry.hpp"

namespace recipe::plan {

const core::Family& model_family(const ModelConfig& m) {
  const std::string_view arch = to_string(m.arch);
  if (const core::Family* f = core::find_family(arch)) return *f;
  throw std::logic_error("model.arch=" + std::string(arch) + " has no family in family/registry.cpp");
}

}  // namespace recipe::plan
