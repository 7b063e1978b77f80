// LoRA adapters → a Hugging Face PEFT adapter directory (see hf_peft.hpp for the mapping).
#include "hf/hf_peft.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

#include "hf/hf_convert.hpp"
#include "hf/hf_safetensors.hpp"
#include "hf/lora_merge.hpp"
#include "core/model/param_layout.hpp"

namespace fs = std::filesystem;

namespace recipe::core::hf {

namespace {

const char* kKeyPrefix = "base_model.model.";

// "model.layers.0.self_attn.q_proj.weight" → "model.layers.0.self_attn.q_proj"
std::string module_of(const std::string& hf_weight) {
  const std::string suffix = ".weight";
  return hf_weight.substr(0, hf_weight.size() - suffix.size());
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t dot; (dot = s.find('.', at)) != std::string::npos; at = dot + 1) out.push_back(s.substr(at, dot - at));
  out.push_back(s.substr(at));
  return out;
}

// One PEFT module's adapter: its HF module name, A (ours) and the B row blocks (ours).
struct ModuleAdapter {
  std::string module;
  std::string a;
  std::vector<std::string> b;
};

// The adapted HF modules of the model, in HF module order: the adapted weights of a fused linear
// that HF names as one module (GPT-2's q, k, v → c_attn) join one entry.
std::vector<ModuleAdapter> module_adapters(const ModelShape& s) {
  if (!s.lora()) throw std::invalid_argument("the model has no LoRA adapters (peft.kind=\"none\"): nothing to export");
  hf_architecture(s);  // refuses a model its family's HF architecture cannot express
  const ParamLayout L = build_param_layout(s, plan::OptimizerConfig{}, 1, 0);
  std::vector<ModuleAdapter> out;
  for (const lora::AdaptedWeight& aw : lora::adapted_weights(s)) {
    const ParamSpec& w = L.get(aw.weight);
    const std::string module = module_of(hf_tensor_name(*w.decl, hf_names_column(s), w.layer));
    if (!out.empty() && out.back().module == module && out.back().a == aw.a) {
      out.back().b.push_back(aw.b);
      continue;
    }
    out.push_back({module, aw.a, {aw.b}});
  }
  return out;
}

// Whether the HF modules store their weights [in, out] (GPT-2's Conv1D), read off the table: PEFT
// needs fan_in_fan_out = true for them.
bool fan_in_fan_out(const ModelShape& s) {
  for (const TensorDecl& d : tensor_table(s))
    if (d.scope == Scope::layer && d.part == Part::weight && present(d, s) && d.hf_name(hf_names_column(s)).transposed)
      return true;
  return false;
}

}  // namespace

std::vector<PeftTensorSpec> peft_tensor_specs(const ModelShape& s) {
  const ParamLayout L = build_param_layout(s, plan::OptimizerConfig{}, 1, 0);
  std::vector<PeftTensorSpec> specs;
  for (const ModuleAdapter& m : module_adapters(s)) {
    PeftTensorSpec a{kKeyPrefix + m.module + ".lora_A.weight", L.get(m.a).global_shape, {m.a}};
    PeftTensorSpec b{kKeyPrefix + m.module + ".lora_B.weight", {0, s.lora_rank}, m.b};
    for (const std::string& part : m.b) b.shape[0] += L.get(part).global_shape[0];
    specs.push_back(std::move(a));
    specs.push_back(std::move(b));
  }
  return specs;
}

std::vector<std::string> peft_target_modules(const ModelShape& s) {
  hf_architecture(s);
  // Every linear module of a layer by its last name component, to see which names are ambiguous.
  std::map<std::string, std::set<std::string>> parents_of;
  for (const TensorDecl& d : tensor_table(s)) {
    if (d.scope != Scope::layer || d.part != Part::weight || !present(d, s) || !d.hf_name(hf_names_column(s)).name)
      continue;
    const std::vector<std::string> parts = split(module_of(hf_tensor_name(d, hf_names_column(s), 0)));
    if (parts.size() >= 2) parents_of[parts.back()].insert(parts[parts.size() - 2]);
  }
  std::set<std::string> targets;
  for (const ModuleAdapter& m : module_adapters(s)) {
    const std::vector<std::string> parts = split(m.module);
    const std::string& last = parts.back();
    targets.insert(parents_of[last].size() > 1 ? parts[parts.size() - 2] + "." + last : last);
  }
  return {targets.begin(), targets.end()};
}

nlohmann::ordered_json make_peft_config(const ModelShape& s, const plan::PeftConfig& peft,
                                        const std::string& base_model) {
  nlohmann::ordered_json c;
  c["peft_type"] = "LORA";
  c["task_type"] = "CAUSAL_LM";
  c["base_model_name_or_path"] = base_model.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(base_model);
  c["r"] = peft.rank;
  c["lora_alpha"] = peft.alpha;
  c["use_rslora"] = peft.use_rslora;
  c["lora_dropout"] = peft.dropout;
  c["target_modules"] = peft_target_modules(s);
  c["fan_in_fan_out"] = fan_in_fan_out(s);  // Conv1D stores [in, out]
  c["bias"] = "none";                       // the engine's adapters have no bias
  c["modules_to_save"] = nullptr;
  c["init_lora_weights"] = true;
  c["layers_to_transform"] = nullptr;
  c["layers_pattern"] = nullptr;
  c["rank_pattern"] = nlohmann::ordered_json::object();
  c["alpha_pattern"] = nlohmann::ordered_json::object();
  c["use_dora"] = false;
  c["inference_mode"] = true;
  return c;
}

PeftExportResult export_peft(const std::string& checkpoint_dir, const ModelShape& s, const plan::PeftConfig& peft,
                             const PeftExportOptions& options) {
  if (options.out_dir.empty()) throw std::invalid_argument("export: no output directory given (-o DIR)");
  const std::vector<PeftTensorSpec> specs = peft_tensor_specs(s);
  const ckpt::CheckpointReader reader(checkpoint_dir);
  const ParamLayout L = build_param_layout(s, plan::OptimizerConfig{}, 1, 0);
  std::vector<std::string> problems;
  for (const PeftTensorSpec& t : specs)
    for (const std::string& part : t.parts) {
      const ckpt::TensorInfo* info = reader.find(part);
      if (!info)
        problems.push_back(part + " is missing");
      else if (info->global_shape != L.get(part).global_shape)
        problems.push_back(part + " has another shape than the plan's");
    }
  if (!problems.empty())
    throw std::runtime_error(
        "checkpoint " + checkpoint_dir + " does not hold the adapters of its plan's model: " + problems.front() +
        (problems.size() > 1 ? " (and more)" : "") + ". Give the recipe it was trained with (--recipe)");

  const fs::path out = fs::absolute(options.out_dir);
  prepare_export_dir(out.string(), {kPeftConfigFile, kPeftWeightsFile});
  std::vector<ckpt::hf::HfOutTensor> decls;
  decls.reserve(specs.size());
  for (const PeftTensorSpec& t : specs) decls.push_back({t.key, t.shape, options.dtype});
  const fs::path st_path = out / kPeftWeightsFile;
  ckpt::hf::SafetensorsFileWriter writer(st_path.string(), decls, {{"format", "pt"}});
  std::vector<float> buf;
  for (const PeftTensorSpec& t : specs) {
    buf.clear();
    for (const std::string& part : t.parts) {
      const std::vector<int64_t>& g = reader.find(part)->global_shape;
      ckpt::Box whole;
      whole.offsets.assign(g.size(), 0);
      whole.sizes = g;
      const size_t at = buf.size();
      buf.resize(at + size_t(g[0] * g[1]));
      reader.read(part, whole, ckpt::DType::f32, buf.data() + at);
    }
    writer.write(t.key, buf.data(), int64_t(buf.size()));
  }
  writer.finish();

  PeftExportResult r;
  r.out_dir = out.string();
  r.tensors = int(specs.size());
  r.bytes = writer.bytes();
  r.target_modules = peft_target_modules(s);
  r.files.push_back(st_path.string());
  const fs::path config_path = out / kPeftConfigFile;
  write_text_file(config_path.string(), make_peft_config(s, peft, options.base_model).dump(2) + "\n");
  r.files.push_back(config_path.string());
  return r;
}

}  // namespace recipe::core::hf
