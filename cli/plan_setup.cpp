#include "cli/plan_setup.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

namespace fs = std::filesystem;

namespace recipe::cli {

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

bool looks_like_file(const std::string& spec) {
  std::string ext = fs::path(spec).extension().string();
  return ext == ".lua" || ext == ".toml" || spec.find('/') != std::string::npos;
}

bool mentions_suggestion(const std::string& message) {
  std::string lower = message;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.find("did you mean") != std::string::npos;
}

// A whole number ≥ `min`, said in the flag's words: CLI11's PositiveNumber says "Value 0 not in
// range 0.000000 to 1797693...", which names neither the flag nor the bound.
CLI::Validator at_least(int min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        long long v = 0;
        const auto res = std::from_chars(text.data(), text.data() + text.size(), v);
        if (res.ec != std::errc() || res.ptr != text.data() + text.size())
          return "must be a whole number ≥ " + std::to_string(min) + ", got '" + text + "'";
        if (v < min) return "must be ≥ " + std::to_string(min) + ", got " + text;
        return "";
      },
      "INT≥" + std::to_string(min));
}

}  // namespace

void add_plan_flags(CLI::App& cmd, PlanFlags& f) {
  cmd.add_option("recipe", f.spec, "Preset name (see `recipe list`) or recipe file (.lua, .toml)")->required();
  cmd.add_option("overrides", f.overrides,
                 "Recipe key overrides: key=value, key+=value, key-=, key*=, key/= (e.g. parallelism.tp=2)");
  auto map = [&](CLI::Option* opt, const std::string& key) { f.mapped.push_back({opt, key}); };
  map(cmd.add_option("--max-steps", f.max_steps, "trainer.max_steps")->check(at_least(1)), "trainer.max_steps");
  map(cmd.add_option("--tp", f.tp, "parallelism.tp (tensor parallel size)")->check(at_least(1)), "parallelism.tp");
  map(cmd.add_option("--pp", f.pp, "parallelism.pp (pipeline stages)")->check(at_least(1)), "parallelism.pp");
  map(cmd.add_option("--micro-batch", f.micro_batch, "trainer.micro_batch_size")->check(at_least(1)),
      "trainer.micro_batch_size");
  map(cmd.add_option("--global-batch", f.global_batch, "trainer.global_batch_size")->check(at_least(1)),
      "trainer.global_batch_size");
  map(cmd.add_option("--seq-len", f.seq_len, "model.seq_length")->check(at_least(1)), "model.seq_length");
  map(cmd.add_option("--device", f.device, "trainer.device: cpu, cuda or auto (GPU when one is visible)")
          ->check(CLI::IsMember({"cpu", "cuda", "auto"})),
      "trainer.device");
  map(cmd.add_option("--executor", f.executor, "executor.kind: local, mpi or slurm")
          ->check(CLI::IsMember({"local", "mpi", "slurm"})),
      "executor.kind");
  f.nodes_opt = cmd.add_option("--nodes", f.nodes, "executor.nodes")->check(at_least(1));
  map(f.nodes_opt, "executor.nodes");
  f.gpus_opt =
      cmd.add_option("--gpus-per-node", f.gpus_per_node, "executor.gpus_per_node (0 = CPU ranks)")->check(at_least(0));
  map(f.gpus_opt, "executor.gpus_per_node");
  map(cmd.add_option("--gpu-model", f.gpu_model, "executor.gpu_model, e.g. H100-80GB"), "executor.gpu_model");
  map(cmd.add_option("--device-memory", f.device_memory, "executor.device_memory, e.g. 80GiB"),
      "executor.device_memory");
  map(cmd.add_option("--name", f.name, "experiment.name (run dirs go to <experiments-dir>/<name>/run-<N>)"),
      "experiment.name");
  map(cmd.add_option("--experiments-dir", f.experiments_dir, "experiment.dir"), "experiment.dir");
}

std::optional<std::string> bad_override(const PlanFlags& flags) {
  for (const auto& o : flags.overrides)
    if (o.find('=') == std::string::npos || o.front() == '=') return o;
  return std::nullopt;
}

std::vector<std::string> flag_overrides(const PlanFlags& flags) {
  std::vector<std::string> out;
  for (const auto& m : flags.mapped)
    if (m.option->count() > 0) out.push_back(m.key + "=" + m.option->as<std::string>());
  return out;
}

std::vector<std::string> command_line_record(const PlanFlags& flags) {
  std::vector<std::string> out = flags.overrides;
  for (const auto& m : flags.mapped)
    if (m.option->count() > 0) out.push_back(m.option->get_name() + " " + m.option->as<std::string>());
  return out;
}

dsl::ExecutorFacts detected_facts(const kernels::GpuInfo& gpu) {
  dsl::ExecutorFacts facts;
  facts.has_gpu = gpu.count > 0;
  facts.visible_gpus = gpu.count;
  facts.gpu_name = gpu.name;
  facts.gpu_memory_gib = static_cast<double>(gpu.memory_bytes) / double(1ull << 30);
  facts.gpu_compute_capability = gpu.count > 0 ? gpu.sm_major * 10 + gpu.sm_minor : 0;
  return facts;
}

double host_available_gib() {
  // MemAvailable (what can be allocated without swapping), else MemTotal on old kernels; in kB.
  std::ifstream in("/proc/meminfo");
  double total_kb = 0;
  for (std::string key; in >> key;) {
    double kb = 0;
    in >> kb;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
    if (key == "MemAvailable:") return kb / (1024.0 * 1024.0);
    if (key == "MemTotal:") total_kb = kb;
  }
  return total_kb / (1024.0 * 1024.0);
}

dsl::ExecutorFacts make_facts(const PlanFlags& flags, const kernels::GpuInfo& gpu, bool planning) {
  dsl::ExecutorFacts facts = detected_facts(gpu);
  facts.planning = planning;
  facts.host_memory_gib = host_available_gib();
  if (flags.nodes_opt && flags.nodes_opt->count() > 0) facts.nodes = flags.nodes;
  if (flags.gpus_opt && flags.gpus_opt->count() > 0) {
    facts.gpus_per_node = flags.gpus_per_node;
    if (planning) {
      // Planning for other machines: their GPUs, not this host's, decide what is valid.
      facts.has_gpu = flags.gpus_per_node > 0;
      facts.visible_gpus = flags.gpus_per_node;
      if (gpu.count == 0) {
        facts.gpu_name.clear();
        facts.gpu_memory_gib = 0;
      }
    }
  }
  return facts;
}

std::string requested_device(const dsl::ConfigTree& tree) {
  const auto& root = tree.root;
  if (root.contains("trainer") && root["trainer"].is_object() && root["trainer"].contains("device") &&
      root["trainer"]["device"].is_string())
    return root["trainer"]["device"].get<std::string>();
  return "auto";
}

std::optional<LoadedPlan> load_plan(const PlanFlags& flags, const std::string& mode, const dsl::ExecutorFacts& facts,
                                    std::ostream& err) {
  LoadedPlan lp;
  try {
    lp.tree = dsl::load_recipe(flags.spec);
  } catch (const dsl::RecipeError& e) {
    err << "error: " << e.what() << "\n";
    if (!looks_like_file(flags.spec) && !mentions_suggestion(e.what())) {
      auto close = similar_presets(flags.spec);
      if (!close.empty()) {
        err << "  did you mean ";
        for (size_t i = 0; i < close.size(); ++i) err << (i ? ", " : "") << close[i];
        err << "?\n";
      }
      err << "  `recipe list` shows the presets\n";
    }
    return std::nullopt;
  }
  try {
    dsl::apply_overrides(lp.tree, flags.overrides);
    dsl::apply_overrides(lp.tree, flag_overrides(flags));
  } catch (const dsl::RecipeError& e) {
    err << "error: " << e.what() << "\n";
    return std::nullopt;
  }
  if (!mode.empty()) {
    // The verb sets the mode; a mode the user set (an override or their recipe file, not a preset's
    // default) that says otherwise is refused, never replaced (`recipe finetune x mode=bogus`).
    auto origin = lp.tree.origins.find("mode");
    const bool user_set = origin != lp.tree.origins.end() && origin->second.file.rfind("preset:", 0) != 0 &&
                          origin->second.file != "default" && !lp.tree.resolved_plan;
    if (user_set && lp.tree.root.contains("mode") && lp.tree.root["mode"] != mode) {
      const nlohmann::ordered_json& set = lp.tree.root["mode"];
      err << "error: mode: " << (set.is_string() ? set.get<std::string>() : set.dump()) << " (" << origin->second.str()
          << ") contradicts `recipe " << mode << "`, which runs mode=" << mode
          << "\n  fix: drop the mode setting (the verb chooses it), or run the verb of the mode you meant"
             " (`recipe pretrain` or `recipe finetune`)\n";
      return std::nullopt;
    }
    // `recipe pretrain` only checks: it leaves a preset's own mode as it was (the mode key's default
    // is pretrain); `recipe finetune` sets it.
    if (mode != "pretrain") {
      lp.tree.root["mode"] = mode;
      lp.tree.origins["mode"] = dsl::Origin{"command line (recipe " + mode + ")", 0};
    }
  }
  lp.requested_device = requested_device(lp.tree);
  try {
    lp.resolved = dsl::resolve(lp.tree, facts);
  } catch (const dsl::RecipeError& e) {
    err << "error: " << e.what() << "\n";
    return std::nullopt;
  }
  return lp;
}

bool report_resolution(const dsl::ResolveResult& r, std::ostream& err) {
  for (const auto& w : r.warnings) err << "warning: " << w << "\n";
  if (r.ok()) return true;
  err << dsl::format_violations(r.violations);
  return false;
}

std::string recipe_source_file(const std::string& spec) {
  std::error_code ec;
  if (fs::is_regular_file(spec, ec)) return fs::absolute(spec).string();
  for (const auto& dir : dsl::recipe_search_path()) {
    for (const char* ext : {".lua", ".toml"}) {
      fs::path candidate = fs::path(dir) / (spec + ext);
      if (fs::is_regular_file(candidate, ec)) return fs::absolute(candidate).string();
    }
  }
  return "";
}

std::vector<std::string> similar_presets(const std::string& spec) {
  std::vector<std::pair<size_t, std::string>> scored;
  std::vector<std::string> presets;
  try {
    presets = dsl::list_presets();
  } catch (const std::exception&) {
    return {};
  }
  size_t limit = std::max<size_t>(2, spec.size() / 3);
  for (const auto& p : presets) {
    size_t d = edit_distance(spec, p);
    bool prefix = p.rfind(spec, 0) == 0 || spec.rfind(p, 0) == 0;
    if (d <= limit || prefix) scored.emplace_back(d, p);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < 3; ++i) out.push_back(scored[i].second);
  return out;
}

std::string recipe_executable() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && self.filename() == "recipe") return self.string();
  if (const char* env = std::getenv("RECIPE_EXECUTABLE"); env && *env) return env;
  return "recipe";
}

std::string experiment_name(const plan::Plan& plan, const std::string& spec) {
  if (!plan.experiment.name.empty()) return plan.experiment.name;
  std::string stem = fs::path(spec).stem().string();
  return stem.empty() ? "default" : stem;
}

}  // namespace recipe::cli
