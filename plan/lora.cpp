// The target-module names of LoRA and the adapter scale (see lora.hpp).
#include "plan/lora.hpp"

#include <algorithm>
#include <cmath>

#include "family/shape.hpp"

namespace recipe::plan {

namespace {

using core::lora_mlp_in, core::lora_mlp_out, core::lora_proj, core::lora_qkv;

struct Alias {
  const char* name;
  unsigned mask;
};
// Names that adapt whole linears by themselves.
constexpr Alias kWhole[] = {
    {"qkv", lora_qkv},
    {"proj", lora_proj},
    {"fc1", lora_mlp_in},
    {"fc2", lora_mlp_out},
    {"c_attn", lora_qkv},
    {"o_proj", lora_proj},
    {"c_fc", lora_mlp_in},
    {"down_proj", lora_mlp_out},
    {"c_proj", lora_proj | lora_mlp_out},
    {"all-linear", lora_qkv | lora_proj | lora_mlp_in | lora_mlp_out},
};
// HF names of one part of a fused linear: accepted only all together.
struct Group {
  std::vector<std::string> parts;
  unsigned mask;
  const char* fused;
};
const std::vector<Group>& groups() {
  static const std::vector<Group> g = {{{"q_proj", "k_proj", "v_proj"}, lora_qkv, "qkv"},
                                       {{"gate_proj", "up_proj"}, lora_mlp_in, "fc1"}};
  return g;
}

}  // namespace

const char* lora_target_name(unsigned bit) {
  for (const Alias& a : kWhole)
    if (a.mask == bit) return a.name;  // the engine's names come first
  return "";
}

const std::vector<std::string>& lora_target_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const Alias& a : kWhole) n.emplace_back(a.name);
    for (const Group& g : groups()) n.insert(n.end(), g.parts.begin(), g.parts.end());
    return n;
  }();
  return names;
}

LoraTargets lora_targets(const std::vector<std::string>& modules) {
  LoraTargets t;
  auto has = [&](const std::string& m) { return std::find(modules.begin(), modules.end(), m) != modules.end(); };
  for (const std::string& m : modules) {
    bool known = false;
    for (const Alias& a : kWhole)
      if (m == a.name) {
        t.mask |= a.mask;
        known = true;
      }
    for (const Group& g : groups())
      if (std::find(g.parts.begin(), g.parts.end(), m) != g.parts.end()) known = true;
    if (!known) t.problems.push_back("\"" + m + "\" is not a linear of the model");
  }
  for (const Group& g : groups()) {
    std::vector<std::string> present, missing;
    for (const std::string& p : g.parts) (has(p) ? present : missing).push_back(p);
    if (present.empty()) continue;
    if (missing.empty()) {
      t.mask |= g.mask;
      continue;
    }
    std::string all, miss;
    for (const std::string& p : g.parts) all += (all.empty() ? "" : ", ") + p;
    for (const std::string& p : missing) miss += (miss.empty() ? "" : ", ") + p;
    t.problems.push_back(all + " are one fused linear here (" + g.fused + ") with one adapter; list them all (or \"" +
                         g.fused + "\"): missing " + miss);
  }
  return t;
}

double lora_scale(const PeftConfig& peft) {
  if (peft.rank <= 0) return 0;
  return peft.use_rslora ? peft.alpha / std::sqrt(double(peft.rank)) : peft.alpha / peft.rank;
}

}  // namespace recipe::plan
