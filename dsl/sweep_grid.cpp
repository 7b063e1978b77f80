#include "dsl/sweep_grid.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "plan/gpu_catalog.hpp"
#include "dsl/plan_fields.hpp"
#include "plan/memory_estimate.hpp"

namespace recipe::dsl {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// Splits at commas that are outside quotes and brackets.
std::vector<std::string> split_top_level(const std::string& text) {
  std::vector<std::string> items;
  std::string current;
  char quote = 0;
  int depth = 0;
  for (char c : text) {
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',' && depth == 0) {
      items.push_back(trim(current));
      current.clear();
      continue;
    }
    current += c;
  }
  items.push_back(trim(current));
  return items;
}

bool list_typed(const std::string& key) {
  const FieldInfo* f = find_field(key);
  if (!f) return false;
  return f->type == FieldType::IntList || f->type == FieldType::StringList || f->type == FieldType::Blend ||
         f->type == FieldType::StringMap;
}

bool bracketed(const std::string& v) { return v.size() >= 2 && v.front() == '[' && v.back() == ']'; }

std::string sanitize(const std::string& value) {
  std::string out;
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '.' || c == '_')
      out += c;
    else if (c != '"' && c != '\'' && c != '[' && c != ']' && c != ' ')
      out += '_';
  }
  return out.empty() ? "_" : out;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

SweepArgs parse_sweep_args(const std::vector<std::string>& args) {
  SweepArgs out;
  std::set<std::string> seen;
  for (const auto& arg : args) {
    const auto eq = arg.find('=');
    // `k+=v` and friends, and anything without '=', are plain overrides (the override parser
    // reports a malformed one with its own message).
    if (eq == std::string::npos || eq == 0 || std::string("+-*/").find(arg[eq - 1]) != std::string::npos) {
      out.overrides.push_back(arg);
      continue;
    }
    const std::string key = trim(arg.substr(0, eq));
    const std::string text = trim(arg.substr(eq + 1));
    std::vector<std::string> values = split_top_level(text);
    // A list-typed key's `a,b` is one list, as in an ordinary override; `[a,b],[c]` sweeps.
    if (values.size() < 2 || (list_typed(key) && !std::all_of(values.begin(), values.end(), bracketed))) {
      out.overrides.push_back(arg);
      continue;
    }
    for (const auto& v : values)
      if (v.empty())
        throw RecipeError("sweep `" + arg + "`: an empty value; write key=v1,v2,... (e.g. " + key + "=2,4)");
    if (!seen.insert(key).second)
      throw RecipeError("sweep: " + key + " is swept twice; give all its values in one argument (" + key +
                        "=v1,v2,...)");
    out.axes.push_back({key, std::move(values)});
  }
  return out;
}

std::vector<std::string> SweepPoint::overrides() const {
  std::vector<std::string> out;
  out.reserve(settings.size());
  for (const auto& [k, v] : settings) out.push_back(k + "=" + v);
  return out;
}

std::string point_name_part(const std::string& key, const std::string& value) {
  static const std::map<std::string, std::string> words = {
      {"trainer.micro_batch_size", "mb"}, {"trainer.global_batch_size", "gb"},
      {"model.seq_length", "seq"},        {"parallelism.tp", "tp"},
      {"parallelism.pp", "pp"},           {"parallelism.cp", "cp"},
      {"parallelism.dp", "dp"},           {"model.num_layers", "layers"},
      {"model.hidden_size", "hidden"},    {"optimizer.lr", "lr"},
      {"executor.cpu_ranks", "ranks"},    {"executor.gpus_per_node", "gpus"},
      {"executor.nodes", "nodes"},
  };
  // Enum keys whose values name themselves: "bf16" needs no "precision" in front.
  static const std::set<std::string> value_alone = {"trainer.precision", "trainer.recompute", "trainer.device",
                                                    "kernels.attention", "model.arch",        "optimizer.kind"};
  std::string v = sanitize(value);
  if (value_alone.count(key)) return v;
  if (auto it = words.find(key); it != words.end()) return it->second + v;
  const auto dot = key.rfind('.');
  return sanitize(dot == std::string::npos ? key : key.substr(dot + 1)) + v;
}

std::vector<SweepPoint> expand_grid(const std::vector<SweepAxis>& axes) {
  std::vector<SweepPoint> points(1);
  for (const auto& axis : axes) {
    std::vector<SweepPoint> next;
    next.reserve(points.size() * axis.values.size());
    for (const auto& p : points)
      for (const auto& v : axis.values) {
        SweepPoint q = p;
        q.settings.emplace_back(axis.key, v);
        next.push_back(std::move(q));
      }
    points = std::move(next);
  }
  if (axes.empty()) points.clear();
  std::map<std::string, int> uses;
  for (auto& p : points) {
    for (const auto& [k, v] : p.settings) p.name += (p.name.empty() ? "" : "-") + point_name_part(k, v);
    ++uses[p.name];
  }
  for (size_t i = 0; i < points.size(); ++i)
    if (uses[points[i].name] > 1) points[i].name += "-p" + std::to_string(i);
  return points;
}

std::string memory_verdict(const plan::Plan& p, const ExecutorFacts& facts) {
  const double total = static_cast<double>(p.memory.total);
  if (p.trainer.device == plan::Device::cuda) {
    const plan::ExecutorConfig& ex = p.executor;
    std::string device;
    if (!ex.device_memory.empty())
      device = "executor.device_memory=\"" + ex.device_memory + "\"";
    else if (auto g = plan::find_gpu(ex.gpu_model.empty() ? facts.gpu_name : ex.gpu_model))
      device = g->name;
    else
      device = facts.gpu_name.empty() ? "the device" : facts.gpu_name;
    return "predicted " + plan::format_bytes(total) + " per rank > " + plan::format_bytes(ex.device_memory_gib * kGiB) +
           " on " + device;
  }
  const int ranks = std::max(1, p.parallelism.world_size);
  return "predicted " + std::to_string(ranks) + " CPU rank" + (ranks == 1 ? "" : "s") + " × " +
         plan::format_bytes(total) + " > " + plan::format_bytes(facts.host_memory_gib * kGiB) +
         " available on this host";
}

std::vector<ResolvedPoint> resolve_sweep(const ConfigTree& base, const std::vector<SweepPoint>& points,
                                         const std::vector<std::string>& after, const ExecutorFacts& facts) {
  std::vector<ResolvedPoint> out;
  out.reserve(points.size());
  for (const auto& point : points) {
    ConfigTree tree = base;
    apply_overrides(tree, point.overrides());
    apply_overrides(tree, after);
    ResolvedPoint r{point, resolve(tree, facts), PointVerdict::fits, ""};
    if (!r.resolved.ok()) {
      const bool memory_only = std::all_of(r.resolved.violations.begin(), r.resolved.violations.end(),
                                           [](const Violation& v) { return v.path == "memory"; });
      r.verdict = memory_only ? PointVerdict::too_big : PointVerdict::invalid;
      if (memory_only) r.reason = memory_verdict(r.resolved.plan, facts);
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace recipe::dsl
