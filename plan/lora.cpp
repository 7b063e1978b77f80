// The target-module names of LoRA and the adapter scale (see lora.hpp).
#include "plan/lora.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "family/arch_shape.hpp"
#include "family/registry.hpp"

namespace recipe::plan {

namespace {

using core::lora_mlp_in, core::lora_mlp_out, core::lora_proj, core::lora_qkv;

// The engine's own names, the same in every family.
constexpr core::LoraName kEngine[] = {
    {"qkv", lora_qkv},
    {"proj", lora_proj},
    {"fc1", lora_mlp_in},
    {"fc2", lora_mlp_out},
    {"all-linear", lora_qkv | lora_proj | lora_mlp_in | lora_mlp_out},
};

// Every family's HF spellings are accepted on every model, the model's own family first (for the
// order of messages): a recipe may mix the architecture flags, and before families were
// descriptors every spelling mapped onto the engine's linears whatever the model (peft's
// `c_attn` on a Llama-shaped model, `q_proj` on a GPT-shaped one). The redesign keeps that.
std::vector<const core::Family*> families_from(const core::Family& family) {
  std::vector<const core::Family*> f = {&family};
  for (const core::Family* other : core::families())
    if (other != &family) f.push_back(other);
  return f;
}

// Names that adapt whole linears by themselves: the engine's, then the families'.
std::vector<core::LoraName> whole_names(const core::Family& family) {
  std::vector<core::LoraName> n(std::begin(kEngine), std::end(kEngine));
  for (const core::Family* f : families_from(family))
    for (const core::LoraName& a : f->lora_names)
      if (std::none_of(n.begin(), n.end(), [&](const core::LoraName& b) { return std::string(a.name) == b.name; }))
        n.push_back(a);
  return n;
}

// The fused linears' part names (q_proj|k_proj|v_proj, gate_proj|up_proj) of every family, each
// group once (families share HF module names: Qwen2's and Qwen3's are Llama's).
std::vector<core::LoraGroup> groups(const core::Family& family) {
  std::vector<core::LoraGroup> g;
  auto same_parts = [](const core::LoraGroup& a, const core::LoraGroup& b) {
    return std::equal(a.parts.begin(), a.parts.end(), b.parts.begin(), b.parts.end(),
                      [](const char* x, const char* y) { return std::string_view(x) == y; });
  };
  for (const core::Family* f : families_from(family))
    for (const core::LoraGroup& group : f->lora_groups)
      if (std::none_of(g.begin(), g.end(), [&](const core::LoraGroup& have) { return same_parts(have, group); }))
        g.push_back(group);
  return g;
}

}  // namespace

const char* lora_target_name(unsigned bit) {
  for (const core::LoraName& a : kEngine)
    if (a.targets == bit) return a.name;
  return "";
}

std::vector<std::string> lora_target_names(const core::Family& family) {
  std::vector<std::string> n;
  for (const core::LoraName& a : whole_names(family)) n.emplace_back(a.name);
  for (const core::LoraGroup& g : groups(family))
    for (const char* part : g.parts)
      if (std::find(n.begin(), n.end(), part) == n.end()) n.emplace_back(part);
  return n;
}

LoraTargets lora_targets(const core::Family& family, const std::vector<std::string>& modules) {
  LoraTargets t;
  const std::vector<core::LoraName> whole = whole_names(family);
  const std::vector<core::LoraGroup> fused = groups(family);
  auto has = [&](const std::string& m) { return std::find(modules.begin(), modules.end(), m) != modules.end(); };
  for (const std::string& m : modules) {
    bool known = false;
    for (const core::LoraName& a : whole)
      if (m == a.name) {
        t.mask |= a.targets;
        known = true;
      }
    for (const core::LoraGroup& g : fused)
      if (std::find(g.parts.begin(), g.parts.end(), m) != g.parts.end()) known = true;
    if (!known) t.problems.push_back("\"" + m + "\" is not a linear of the model");
  }
  for (const core::LoraGroup& g : fused) {
    std::vector<std::string> present, missing;
    for (const char* p : g.parts) (has(p) ? present : missing).push_back(p);
    if (present.empty()) continue;
    if (missing.empty()) {
      t.mask |= g.target;
      continue;
    }
    std::string all, miss;
    for (const char* p : g.parts) all += (all.empty() ? "" : ", ") + std::string(p);
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
