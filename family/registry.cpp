// The registry: one line per family. A family added here needs its model.arch value in plan::Arch
// (plan/enums.hpp), which a test holds to this list.
#include "family/registry.hpp"

namespace recipe::core {

std::span<const Family* const> families() {
  static const Family* const all[] = {
      &gpt_family(),
      &llama_family(),
      &qwen2_family(),
      &qwen3_family(),
  };
  return all;
}

const Family* find_family(std::string_view arch) {
  for (const Family* f : families())
    if (arch == f->arch) return f;
  return nullptr;
}

}  // namespace recipe::core
