// list / show / validate / version: verbs that read recipes and report, never run anything.
#include <cstdio>

#include "plan/exit_codes.hpp"
#include "cli/report.hpp"
#include "cli/verbs.hpp"
#include "executors/host_info.hpp"

#ifndef RECIPE_VERSION
#define RECIPE_VERSION "unknown"
#endif

namespace recipe::cli {

std::string version_string() { return RECIPE_VERSION; }

int run_list(std::ostream& out, std::ostream& err) {
  std::vector<std::string> presets;
  try {
    presets = dsl::list_presets();
  } catch (const std::exception& e) {
    err << "error: cannot list presets: " << e.what() << "\n";
    return kExitEnvironment;
  }
  if (presets.empty()) {
    err << "no presets found; searched:";
    for (const auto& dir : dsl::recipe_search_path()) err << " " << dir;
    err << "\n";
    return kExitEnvironment;
  }
  // Summaries describe the preset itself, not this host: resolve as for a machine without GPUs.
  dsl::ExecutorFacts facts;
  facts.has_gpu = false;
  size_t width = 4;
  for (const auto& p : presets) width = std::max(width, p.size());
  char line[256];
  std::snprintf(line, sizeof(line), "%-*s  %-5s %9s  %-16s %6s  %s\n", int(width), "NAME", "ARCH", "PARAMS",
                "LAYERS x HIDDEN", "SEQ", "PARALLELISM");
  out << line;
  for (const auto& name : presets) {
    try {
      dsl::ConfigTree tree = dsl::load_recipe(name);
      const plan::Plan plan = dsl::resolve(tree, facts).plan;
      std::string shape = std::to_string(plan.model.num_layers) + " x " + std::to_string(plan.model.hidden_size);
      const std::string mode =
          plan.mode == plan::Mode::finetune ? "  (finetune, " + std::string(plan::to_string(plan.peft.kind)) + ")" : "";
      std::snprintf(line, sizeof(line), "%-*s  %-5s %9s  %-16s %6d  %s%s\n", int(width), name.c_str(),
                    std::string(plan::to_string(plan.model.arch)).c_str(),
                    human_count(static_cast<double>(plan.model.num_params)).c_str(), shape.c_str(),
                    plan.model.seq_length, default_parallelism(plan).c_str(), mode.c_str());
      out << line;
    } catch (const std::exception& e) {
      out << name << "  (does not load: " << e.what() << ")\n";
    }
  }
  return kExitOk;
}

int run_show(const PlanFlags& flags, const std::string& format, std::ostream& out, std::ostream& err) {
  dsl::ExecutorFacts facts = make_facts(flags, kernels::query_gpus(), /*planning=*/true);
  auto loaded = load_plan(flags, "", facts, err);
  if (!loaded) return kExitInvalidRecipe;
  if (!report_resolution(loaded->resolved, err)) return kExitInvalidRecipe;
  plan::Plan plan = loaded->resolved.plan;
  // An exported plan stays portable: `auto` is decided where it runs (the launch records the device
  // it chose in the run dir), not frozen to this host's lack of a GPU.
  if (loaded->requested_device == "auto") plan.trainer.device = plan::Device::auto_;
  if (format == "json")
    out << dsl::to_json(plan) << "\n";
  else if (format == "lua")
    out << dsl::to_lua(plan);
  else
    out << dsl::to_toml(plan);
  return kExitOk;
}

int run_validate(const PlanFlags& flags, std::ostream& out, std::ostream& err) {
  dsl::ExecutorFacts facts = make_facts(flags, kernels::query_gpus(), /*planning=*/true);
  auto loaded = load_plan(flags, "", facts, err);
  if (!loaded) return kExitInvalidRecipe;
  if (!report_resolution(loaded->resolved, err)) {
    size_t n = loaded->resolved.violations.size();
    err << "INVALID: " << n << (n == 1 ? " violation" : " violations") << " in " << flags.spec << "\n";
    return kExitInvalidRecipe;
  }
  const plan::Plan& plan = loaded->resolved.plan;
  out << "OK: " << flags.spec << ": " << validate_summary(plan) << "\n";
  return kExitOk;
}

int run_version(std::ostream& out) {
  exec::HostInfo h = exec::collect_host_info(version_string());
  out << "recipe " << h.recipe_version << "\n";
  out << "build: CUDA " << (h.built_with_cuda ? "yes" : "no") << ", cuDNN " << (h.built_with_cudnn ? "yes" : "no")
#ifdef RECIPE_WITH_MPI
      << ", MPI yes"
#else
      << ", MPI no"
#endif
      << "; " << h.lua_version << ", nlohmann-json " << h.json_version << "\n";
  out << "OpenBLAS: " << h.openblas_config << "\n";
  if (h.gpu.count > 0) {
    char mem[32];
    std::snprintf(mem, sizeof(mem), "%.1f GiB", static_cast<double>(h.gpu.memory_bytes) / double(1ull << 30));
    out << "GPU: " << h.gpu.count << " x " << h.gpu.name << " (" << mem << ", sm_" << h.gpu.sm_major << h.gpu.sm_minor
        << "), driver " << h.gpu.driver_version << ", CUDA runtime " << h.gpu.runtime_version << "\n";
  } else {
    out << "GPU: none found" << (h.built_with_cuda ? "" : " (CPU-only build)") << "\n";
  }
  return kExitOk;
}

}  // namespace recipe::cli
