// The checkpoint, plan and device steps of the verbs that run a checkpoint's model (checkpoint_verb.hpp).
#include "cli/checkpoint_verb.hpp"

#include <algorithm>
#include <filesystem>
#include <ostream>

#include "cli/verbs.hpp"
#include "dsl/dsl.hpp"
#include "kernels/ops.hpp"
#include "plan/exit_codes.hpp"

namespace fs = std::filesystem;

namespace recipe::cli {

std::string checkpoint_for_verb(const std::string& path, const std::vector<std::string>& overrides, std::ostream& err,
                                int& code) {
  if (auto bad = std::find_if(overrides.begin(), overrides.end(),
                              [](const std::string& o) { return o.find('=') == std::string::npos; });
      bad != overrides.end()) {
    err << "error: unexpected argument '" << *bad << "': after the checkpoint, only key=value overrides are accepted\n";
    code = kExitUsage;
    return "";
  }
  code = kExitOk;
  try {
    return resolve_checkpoint(path, err, code);
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    code = kExitRuntime;
    return "";
  }
}

std::optional<plan::Plan> checkpoint_plan(const std::string& dir, const std::vector<std::string>& overrides,
                                          const std::function<bool(const std::string& key)>& relevant,
                                          std::string_view needs, std::ostream& err, bool evaluation) {
  const fs::path plan_toml = fs::path(dir) / "plan.toml";
  if (!fs::exists(plan_toml) || fs::file_size(plan_toml) == 0) {
    err << "error: " << plan_toml.string() << " is missing, so " << needs << "\n";
    return std::nullopt;
  }
  dsl::ResolveResult resolved;
  try {
    dsl::ConfigTree tree = dsl::load_recipe(plan_toml.string());
    const auto overrides_key = [&](const char* key) {
      return std::any_of(overrides.begin(), overrides.end(), [&](const std::string& o) {
        const size_t eq = o.find('=');
        return o.compare(0, eq, key) == 0 || o.compare(0, eq, std::string(key) + "+") == 0;
      });
    };
    if (auto data = tree.root.find("data"); data != tree.root.end() && data->is_object()) {
      if (overrides_key("data.path") && !overrides_key("data.blend")) data->erase("blend");
      if (overrides_key("data.blend") && !overrides_key("data.path")) data->erase("path");
    }
    dsl::apply_overrides(tree, overrides);
    dsl::ExecutorFacts facts;
    facts.planning = true;
    facts.evaluation = evaluation;
    resolved = dsl::resolve(tree, facts);
  } catch (const std::exception& e) {
    err << "error: " << plan_toml.string() << ": " << e.what() << "\n";
    return std::nullopt;
  }
  std::vector<dsl::Violation> shown;
  std::copy_if(resolved.violations.begin(), resolved.violations.end(), std::back_inserter(shown),
               [&](const dsl::Violation& v) { return relevant(v.path); });
  if (!shown.empty()) {
    err << dsl::format_violations(shown);
    return std::nullopt;
  }
  return resolved.plan;
}

std::optional<bool> usable_gpu(const std::string& device_flag, std::ostream& err) {
  const bool gpu = kernels::built_with_cuda() && kernels::query_gpus().count > 0;
  if (device_flag == "cuda" && !gpu) {
    err << "error: --device cuda but "
        << (kernels::built_with_cuda() ? "no CUDA GPU is visible on this host" : "this binary was built without CUDA")
        << "\n  fix: --device cpu, or --device auto to use a GPU only when one is found\n";
    return std::nullopt;
  }
  return gpu;
}

}  // namespace recipe::cli
