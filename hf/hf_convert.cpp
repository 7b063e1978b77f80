// Our checkpoints ↔ Hugging Face model directories (see hf_convert.hpp for the mapping).
#include "hf/hf_convert.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>

#include "hf/hf_safetensors.hpp"
#include "hf/lora_merge.hpp"
#include "family/tensor_table.hpp"
#include "core/model/param_layout.hpp"

namespace fs = std::filesystem;

namespace recipe::core::hf {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

int64_t numel_of(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Our tensors' global shapes (one rank, one stage: every parameter whole).
std::map<std::string, std::vector<int64_t>> our_shapes(const ModelShape& s) {
  const ParamLayout L = build_param_layout(s, plan::OptimizerConfig{}, 1, 0);
  std::map<std::string, std::vector<int64_t>> m;
  for (const ParamSpec& p : L.params) m[p.name] = p.global_shape;
  return m;
}

const char* base_prefix(Family f) { return f == Family::gpt2 ? "transformer." : "model."; }

std::string join(const std::vector<std::string>& items, const std::string& sep, size_t max_items) {
  std::string r;
  for (size_t i = 0; i < items.size() && i < max_items; ++i) r += (i ? sep : "") + items[i];
  if (items.size() > max_items) r += sep + "and " + std::to_string(items.size() - max_items) + " more";
  return r;
}

// [R, K] row-major → [K, R].
std::vector<float> transposed(const std::vector<float>& a, int64_t R, int64_t K) {
  std::vector<float> t(a.size());
  for (int64_t r = 0; r < R; ++r)
    for (int64_t k = 0; k < K; ++k) t[size_t(k * R + r)] = a[size_t(r * K + k)];
  return t;
}

}  // namespace

void write_text_file(const std::string& path_in, const std::string& text) {
  const fs::path path(path_in);
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.flush();
    if (!f) throw std::runtime_error(tmp.string() + ": cannot write (disk full or no permission?)");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw std::runtime_error(path.string() + ": cannot rename the temporary file into place: " + ec.message());
}

const char* model_type(Family f) { return f == Family::gpt2 ? "gpt2" : "llama"; }

Family family_of(const ModelShape& s) {
  const bool gpt2_like = s.layernorm && s.gelu && s.learned_positions;
  const bool llama_like = !s.layernorm && !s.gelu && !s.learned_positions;
  if (llama_like) return Family::llama;
  if (!gpt2_like) {
    throw std::invalid_argument(
        std::string("model.norm=") + (s.layernorm ? "layernorm" : "rmsnorm") + ", model.activation=" +
        (s.gelu ? "gelu" : "swiglu") + ", model.position_embedding=" + (s.learned_positions ? "learned" : "rope") +
        " match no Hugging Face architecture that computes the same function: GPT-2 is layernorm+gelu+learned, "
        "Llama is rmsnorm+swiglu+rope");
  }
  std::vector<std::string> problems;
  if (!s.bias)
    problems.push_back(
        "model.bias=false (GPT-2 has biases in every linear and LayerNorm; a Llama-style recipe "
        "converts without biases)");
  if (s.kv_heads != s.heads)
    problems.push_back("model.num_kv_heads=" + std::to_string(s.kv_heads) +
                       " < num_attention_heads=" + std::to_string(s.heads) + " (GPT-2 has no grouped-query attention)");
  if (int64_t(s.head_dim) * s.heads != s.hidden)
    problems.push_back("model.head_dim=" + std::to_string(s.head_dim) + " with " + std::to_string(s.heads) +
                       " heads is not hidden_size=" + std::to_string(s.hidden) +
                       " (GPT-2 derives head_dim = n_embd / n_head)");
  if (!problems.empty())
    throw std::invalid_argument("this GPT model has no Hugging Face GPT-2 equivalent: " + join(problems, "; ", 10));
  return Family::gpt2;
}

std::vector<TensorSpec> tensor_specs(const ModelShape& s) {
  const Family fam = family_of(s);
  const HfArch arch = fam == Family::gpt2 ? HfArch::gpt2 : HfArch::llama;
  const std::span<const TensorDecl> table = tensor_table(s);
  struct Spec {
    TensorSpec t;
    const TensorDecl* first;  // the table row of its first part
  };
  std::vector<TensorSpec> specs;
  // The rows of one scope (and layer), in table order; adjacent rows with one HF name are one HF
  // tensor made of their parts (GPT-2's c_attn = q|k|v).
  auto add_rows = [&](auto&& in_scope, int layer) {
    std::vector<Spec> group;
    for (const TensorDecl& d : table) {
      if (!in_scope(d) || !present(d, s) || is_adapter(d)) continue;  // adapters: hf_peft.hpp
      const std::string hf = hf_tensor_name(d, arch, layer);
      std::vector<int64_t> shape = global_shape(d, s);
      if (!group.empty() && group.back().t.hf_name == hf) {
        TensorSpec& t = group.back().t;
        t.hf_shape[t.transpose ? 1 : 0] += shape[0];
        t.parts.push_back(tensor_name(d, layer));
        continue;
      }
      Spec g{TensorSpec{}, &d};
      g.t.hf_name = hf;
      g.t.vocab_rows = d.shard == Shard::vocab_rows;
      g.t.transpose = d.hf(arch).transposed;
      if (g.t.vocab_rows) shape[0] = s.vocab;
      if (g.t.transpose) std::swap(shape[0], shape[1]);
      g.t.hf_shape = shape;
      g.t.parts.push_back(tensor_name(d, layer));
      group.push_back(std::move(g));
    }
    // Llama's HF tensors are listed as this converter has always written them: in each run of
    // linears between two norms (q,k,v,o / gate,up,down) the weights before the biases. GPT-2's
    // follow the table (each module's weight, then its bias).
    if (arch == HfArch::llama) {
      auto is_norm = [](const Spec& g) {
        return g.first->role == Role::attention_norm || g.first->role == Role::mlp_norm ||
               g.first->role == Role::final_norm;
      };
      for (auto run = group.begin(); run != group.end();) {
        auto end = std::find_if(run, group.end(), is_norm);
        std::stable_partition(run, end, [](const Spec& g) { return g.first->part == Part::weight; });
        run = end == group.end() ? end : end + 1;
      }
    }
    for (Spec& g : group) specs.push_back(std::move(g.t));
  };
  add_rows([](const TensorDecl& d) { return d.scope == Scope::embedding || d.scope == Scope::embedding_and_tied_head; },
           -1);
  for (int l = 0; l < s.layers; ++l) add_rows([](const TensorDecl& d) { return d.scope == Scope::layer; }, l);
  add_rows([](const TensorDecl& d) { return d.scope == Scope::head; }, -1);
  return specs;
}

nlohmann::ordered_json make_config(const ModelShape& s, ckpt::DType dtype) {
  const Family fam = family_of(s);
  nlohmann::ordered_json c;
  const char* torch_dtype = dtype == ckpt::DType::bf16 ? "bfloat16" : "float32";
  if (fam == Family::gpt2) {
    c["architectures"] = {"GPT2LMHeadModel"};
    c["model_type"] = "gpt2";
    c["vocab_size"] = s.vocab;
    c["n_positions"] = s.max_positions;
    c["n_ctx"] = s.max_positions;
    c["n_embd"] = s.hidden;
    c["n_layer"] = s.layers;
    c["n_head"] = s.heads;
    c["n_inner"] = s.ffn;
    c["activation_function"] = "gelu_new";  // the engine's GELU is the tanh approximation
    c["layer_norm_epsilon"] = double(s.norm_eps);
    c["resid_pdrop"] = 0.0;  // the engine trains without dropout
    c["embd_pdrop"] = 0.0;
    c["attn_pdrop"] = 0.0;
    c["scale_attn_weights"] = true;
    c["scale_attn_by_inverse_layer_idx"] = false;
    c["reorder_and_upcast_attn"] = false;
  } else {
    c["architectures"] = {"LlamaForCausalLM"};
    c["model_type"] = "llama";
    c["vocab_size"] = s.vocab;
    c["hidden_size"] = s.hidden;
    c["intermediate_size"] = s.ffn;
    c["num_hidden_layers"] = s.layers;
    c["num_attention_heads"] = s.heads;
    c["num_key_value_heads"] = s.kv_heads;
    c["head_dim"] = s.head_dim;
    c["hidden_act"] = "silu";
    c["max_position_embeddings"] = s.max_positions;
    c["rms_norm_eps"] = double(s.norm_eps);
    // transformers < 5 reads rope_theta, 5.x rope_parameters; plain RoPE in both.
    c["rope_theta"] = double(s.rope_theta);
    c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", double(s.rope_theta)}};
    c["attention_bias"] = s.bias;
    c["mlp_bias"] = s.bias;
    c["attention_dropout"] = 0.0;
    c["pretraining_tp"] = 1;
  }
  c["initializer_range"] = s.init_std;
  c["tie_word_embeddings"] = s.tied;
  c["use_cache"] = true;
  c["torch_dtype"] = torch_dtype;  // transformers < 5
  c["dtype"] = torch_dtype;        // transformers 5
  return c;
}

std::vector<std::string> config_mismatches(const nlohmann::json& config, const ModelShape& s) {
  if (!config.is_object() || !config.contains("model_type") || !config["model_type"].is_string())
    throw std::invalid_argument("config.json has no \"model_type\"; it is not a transformers model config");
  const std::string mt = config["model_type"].get<std::string>();
  if (mt != "gpt2" && mt != "llama")
    throw std::invalid_argument("config.json has model_type \"" + mt +
                                "\": only \"gpt2\" and \"llama\" models can be imported (other architectures "
                                "compute something the engine does not)");
  const Family fam = family_of(s);
  std::vector<std::string> bad;
  if (mt != model_type(fam)) {
    bad.push_back("model_type is \"" + mt + "\" in config.json, the recipe describes a " + model_type(fam) +
                  "-style model (" +
                  (fam == Family::gpt2 ? "layernorm, gelu, learned positions" : "rmsnorm, swiglu, rope") +
                  "): use a recipe of the same architecture");
    return bad;
  }
  auto number = [&](const nlohmann::json& v) -> std::optional<double> {
    if (v.is_number()) return v.get<double>();
    return std::nullopt;
  };
  // A key of config.json (absent: transformers' default) against the recipe's value.
  auto check_int = [&](const char* key, std::optional<int64_t> fallback, int64_t ours, const std::string& recipe_key) {
    std::optional<int64_t> theirs = fallback;
    if (config.contains(key) && !config[key].is_null()) {
      if (!config[key].is_number_integer()) {
        bad.push_back(std::string(key) + " is " + config[key].dump() + " in config.json, not an integer");
        return;
      }
      theirs = config[key].get<int64_t>();
    }
    if (theirs && *theirs != ours)
      bad.push_back(std::string(key) + " is " + std::to_string(*theirs) + " in config.json, the recipe has " +
                    recipe_key + "=" + std::to_string(ours));
  };
  auto check_real = [&](const nlohmann::json& obj, const char* key, double fallback, double ours,
                        const std::string& recipe_key) {
    double theirs = fallback;
    if (obj.contains(key) && !obj[key].is_null()) {
      auto v = number(obj[key]);
      if (!v) {
        bad.push_back(std::string(key) + " is " + obj[key].dump() + " in config.json, not a number");
        return;
      }
      theirs = *v;
    }
    if (std::fabs(theirs - ours) > 1e-6 * std::max(std::fabs(theirs), std::fabs(ours))) {
      std::ostringstream m;
      m << key << " is " << theirs << " in config.json, the recipe has " << recipe_key << "=" << ours;
      bad.push_back(m.str());
    }
  };
  auto check_bool = [&](const char* key, bool fallback, bool ours, const std::string& recipe_key) {
    bool theirs = fallback;
    if (config.contains(key) && config[key].is_boolean()) theirs = config[key].get<bool>();
    if (theirs != ours)
      bad.push_back(std::string(key) + " is " + (theirs ? "true" : "false") + " in config.json, the recipe has " +
                    recipe_key + "=" + (ours ? "true" : "false"));
  };
  auto int_or = [&](const char* key, int64_t fallback) {
    return config.contains(key) && config[key].is_number_integer() ? config[key].get<int64_t>() : fallback;
  };
  auto bool_or = [&](const char* key, bool fallback) {
    return config.contains(key) && config[key].is_boolean() ? config[key].get<bool>() : fallback;
  };
  auto string_of = [&](const char* key, const std::string& fallback) {
    return config.contains(key) && config[key].is_string() ? config[key].get<std::string>() : fallback;
  };

  check_int("vocab_size", std::nullopt, s.vocab, "model.vocab_size");
  if (fam == Family::gpt2) {
    // Defaults: transformers' GPT2Config.
    check_int("n_embd", 768, s.hidden, "model.hidden_size");
    check_int("n_layer", 12, s.layers, "model.num_layers");
    check_int("n_head", 12, s.heads, "model.num_attention_heads");
    check_int("n_positions", 1024, s.max_positions, "model.max_position_embeddings");
    const int64_t n_embd = int_or("n_embd", 768);
    check_int("n_inner", 4 * n_embd, s.ffn, "model.ffn_hidden_size");
    check_real(config, "layer_norm_epsilon", 1e-5, double(s.norm_eps), "model.norm_eps");
    check_bool("tie_word_embeddings", true, s.tied, "model.tie_embeddings");
    const std::string act = string_of("activation_function", "gelu_new");
    if (act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu_fast")
      bad.push_back("activation_function is \"" + act +
                    "\" in config.json; the engine computes the tanh approximation of GELU (gelu_new)");
    if (bool_or("scale_attn_by_inverse_layer_idx", false))
      bad.push_back(
          "scale_attn_by_inverse_layer_idx is true in config.json; the engine scales scores by 1/sqrt(head_dim) only");
    if (!bool_or("scale_attn_weights", true))
      bad.push_back("scale_attn_weights is false in config.json; the engine scales scores by 1/sqrt(head_dim)");
  } else {
    // Defaults: transformers' LlamaConfig.
    check_int("hidden_size", 4096, s.hidden, "model.hidden_size");
    check_int("intermediate_size", 11008, s.ffn, "model.ffn_hidden_size");
    check_int("num_hidden_layers", 32, s.layers, "model.num_layers");
    check_int("num_attention_heads", 32, s.heads, "model.num_attention_heads");
    const int64_t heads = int_or("num_attention_heads", 32);
    const int64_t hidden = int_or("hidden_size", 4096);
    check_int("num_key_value_heads", heads, s.kv_heads, "model.num_kv_heads");
    check_int("head_dim", heads > 0 ? hidden / heads : 0, s.head_dim, "model.head_dim");
    check_real(config, "rms_norm_eps", 1e-6, double(s.norm_eps), "model.norm_eps");
    // Newer transformers keep rope_theta and the rope type in "rope_parameters".
    const nlohmann::json* rope = &config;
    if (config.contains("rope_parameters") && config["rope_parameters"].is_object()) rope = &config["rope_parameters"];
    check_real(*rope, "rope_theta", 10000.0, double(s.rope_theta), "model.rope_theta");
    const std::string rope_type = rope->contains("rope_type") && (*rope)["rope_type"].is_string()
                                      ? (*rope)["rope_type"].get<std::string>()
                                      : "default";
    if (rope_type != "default")
      bad.push_back("rope_parameters.rope_type is \"" + rope_type +
                    "\" in config.json; the engine has plain RoPE only");
    if (config.contains("rope_scaling") && !config["rope_scaling"].is_null())
      bad.push_back("rope_scaling is " + config["rope_scaling"].dump() +
                    " in config.json; the engine has plain RoPE only (no scaled positions)");
    const std::string act = string_of("hidden_act", "silu");
    if (act != "silu") bad.push_back("hidden_act is \"" + act + "\" in config.json; the engine's SwiGLU uses silu");
    check_bool("attention_bias", false, s.bias, "model.bias");
    check_bool("mlp_bias", false, s.bias, "model.bias");
    check_bool("tie_word_embeddings", false, s.tied, "model.tie_embeddings");
  }
  return bad;
}

// ---------------------------------------------------------------------------------------------
// Export

void prepare_export_dir(const std::string& out_in, const std::vector<std::string>& files) {
  const fs::path out(out_in);
  std::error_code ec;
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out))
      throw std::runtime_error(out.string() + " exists and is not a directory: choose another -o");
    for (const auto& e : fs::directory_iterator(out)) {
      const std::string name = e.path().filename().string();
      if (std::find(files.begin(), files.end(), name) == files.end())
        throw std::runtime_error(out.string() + " already holds " + name +
                                 ": export into a new or empty directory (only an earlier export's " +
                                 join(files, " and ", files.size()) + " are replaced)");
    }
  }
  fs::create_directories(out, ec);
  if (ec) throw std::runtime_error(out.string() + ": cannot create the directory: " + ec.message());
}

ExportResult export_checkpoint(const std::string& checkpoint_dir, const ModelShape& shape,
                               const ExportOptions& options) {
  if (options.out_dir.empty()) throw std::invalid_argument("export: no output directory given (-o DIR)");
  if (options.merge_lora && !shape.lora())
    throw std::invalid_argument("--merge: checkpoint " + checkpoint_dir +
                                " is of a model without LoRA adapters (peft.kind=\"none\" in its plan): export it "
                                "without --merge");
  const Family fam = family_of(shape);
  const std::vector<TensorSpec> specs = tensor_specs(shape);
  const ckpt::CheckpointReader reader(checkpoint_dir);

  // The checkpoint must be the model `shape` describes: every tensor present with its shape.
  std::vector<std::string> problems;
  for (const auto& [name, global] : our_shapes(shape)) {
    const ckpt::TensorInfo* t = reader.find(name);
    if (!t)
      problems.push_back(name + " is missing");
    else if (t->global_shape != global)
      problems.push_back(name + " is " + shape_str(t->global_shape) + " there, the plan says " + shape_str(global));
  }
  if (!problems.empty())
    throw std::runtime_error("checkpoint " + checkpoint_dir + " does not match the model of its plan (" +
                             std::to_string(problems.size()) + " tensors): " + join(problems, "; ", 6) +
                             ". Give the recipe it was trained with (--recipe)");

  const fs::path out = fs::absolute(options.out_dir);
  prepare_export_dir(out.string(), {"config.json", ckpt::hf::kSingleFile});
  std::vector<ckpt::hf::HfOutTensor> decls;
  decls.reserve(specs.size());
  for (const TensorSpec& t : specs) decls.push_back({t.hf_name, t.hf_shape, options.dtype});
  const fs::path st_path = out / ckpt::hf::kSingleFile;
  ckpt::hf::SafetensorsFileWriter writer(st_path.string(), decls, {{"format", "pt"}});
  std::vector<float> buf;
  for (const TensorSpec& t : specs) {
    buf.clear();
    int64_t rows = 0, cols = 1;
    for (const std::string& part : t.parts) {
      const ckpt::TensorInfo* info = reader.find(part);
      const std::vector<int64_t>& g = info->global_shape;
      const size_t at = buf.size();
      if (options.merge_lora) {
        const std::vector<float> merged = lora::read_merged(reader, shape, part);
        buf.insert(buf.end(), merged.begin(), merged.end());
      } else {
        ckpt::Box whole;
        whole.offsets.assign(g.size(), 0);
        whole.sizes = g;
        buf.resize(at + size_t(numel_of(g)));
        reader.read(part, whole, ckpt::DType::f32, buf.data() + at);
      }
      rows += g[0];
      cols = g.size() > 1 ? numel_of(g) / g[0] : 1;
    }
    if (t.vocab_rows) {
      rows = shape.vocab;
      buf.resize(size_t(rows * cols));
    }
    if (t.transpose) buf = transposed(buf, rows, cols);
    writer.write(t.hf_name, buf.data(), int64_t(buf.size()));
  }
  writer.finish();

  ExportResult r;
  r.adapters_left_out = shape.lora() && !options.merge_lora;
  r.out_dir = out.string();
  r.model_type = model_type(fam);
  r.tensors = int(specs.size());
  r.bytes = writer.bytes();
  r.files.push_back(st_path.string());
  const fs::path config_path = out / "config.json";
  write_text_file(config_path.string(), make_config(shape, options.dtype).dump(2) + "\n");
  r.files.push_back(config_path.string());
  return r;
}

// ---------------------------------------------------------------------------------------------
// Import

namespace {

nlohmann::json read_config(const fs::path& dir) {
  const fs::path p = dir / "config.json";
  std::ifstream f(p);
  if (!f)
    throw std::runtime_error(p.string() + ": missing; an HF model directory holds config.json beside its safetensors");
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(p.string() + ": does not parse as JSON: " + e.what());
  }
}

constexpr size_t kShardBytes = size_t(1) << 30;  // bounds the host memory an import holds

}  // namespace

ImportResult import_checkpoint(const std::string& hf_dir_in, const plan::Plan& plan, const ImportOptions& options) {
  if (options.checkpoints_dir.empty()) throw std::invalid_argument("import: no output directory given (-o DIR)");
  const fs::path hf_dir = fs::absolute(hf_dir_in);
  const ModelShape shape = model_shape(plan);
  const nlohmann::json config = read_config(hf_dir);
  const std::vector<std::string> bad = config_mismatches(config, shape);
  if (!bad.empty())
    throw std::invalid_argument((hf_dir / "config.json").string() + " does not match the recipe's model (" +
                                std::to_string(bad.size()) + "): " + join(bad, "; ", 20) +
                                ". Set those model.* keys to the config's values (overrides such as "
                                "model.hidden_size=768) or pick the matching preset");
  const Family fam = family_of(shape);
  const ckpt::hf::HfTensorFiles files(hf_dir.string());
  const std::vector<TensorSpec> specs = tensor_specs(shape);

  // Resolve every HF name first (saved from the bare base model, names lack the prefix), and
  // report every missing or misshapen tensor at once.
  const std::string prefix = base_prefix(fam);
  std::vector<std::string> found(specs.size()), problems;
  std::set<std::string> used;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& t = specs[i];
    std::string name = t.hf_name;
    if (!files.find(name) && name.rfind(prefix, 0) == 0 && files.find(name.substr(prefix.size())))
      name = name.substr(prefix.size());
    const ckpt::hf::HfTensor* h = files.find(name);
    if (!h) {
      problems.push_back(t.hf_name + " is missing");
      continue;
    }
    if (h->shape != t.hf_shape) {
      problems.push_back(name + " is " + shape_str(h->shape) + ", the recipe's model needs " + shape_str(t.hf_shape));
      continue;
    }
    if (h->dtype != "F32" && h->dtype != "BF16" && h->dtype != "F16") {
      problems.push_back(name + " is " + h->dtype + " (only F32, BF16, F16 import)");
      continue;
    }
    found[i] = name;
    used.insert(name);
  }
  if (!problems.empty())
    throw std::runtime_error(hf_dir.string() + " does not hold the tensors of a " + model_type(fam) +
                             " model of this shape (" + std::to_string(problems.size()) +
                             "): " + join(problems, "; ", 8) +
                             ". Check that the directory is the model config.json describes (a complete download)");

  ImportResult result;
  result.model_type = model_type(fam);
  result.tensors = int(specs.size());
  for (const std::string& n : files.names())
    if (!used.count(n)) result.unused.push_back(n);

  const fs::path ckpts = fs::absolute(options.checkpoints_dir);
  const fs::path final_dir = ckpts / ckpt::step_dir_name(0);
  if (fs::exists(ckpts / "latest")) {
    const std::string existing = ckpt::find_checkpoint(ckpts.string());
    if (!existing.empty() && fs::path(existing).filename() != final_dir.filename())
      throw std::runtime_error(ckpts.string() + " already holds checkpoint " + existing +
                               ": import into a new directory (an import is step 0 and would become `latest`)");
  }
  const std::string staging = ckpt::staging_dir_of(final_dir.string());
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging);

  const auto ours = our_shapes(shape);
  // Tensors are converted into owned buffers and flushed as a shard once ~1 GiB is pending.
  std::vector<std::vector<float>> owned;
  std::vector<ckpt::SavePiece> pieces;
  size_t pending = 0;
  int shards = 0;
  auto flush = [&] {
    ckpt::write_shard(staging, shards++, pieces);
    pieces.clear();
    owned.clear();
    pending = 0;
  };
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& t = specs[i];
    std::vector<float> hf = files.read_f32(found[i]);
    if (t.transpose) hf = transposed(hf, t.hf_shape[0], t.hf_shape[1]);  // back to [out, in]
    int64_t row = 0;
    for (const std::string& part : t.parts) {
      const std::vector<int64_t>& g = ours.at(part);
      const int64_t cols = g.size() > 1 ? numel_of(g) / g[0] : 1;
      const int64_t rows_here = t.vocab_rows ? shape.vocab : g[0];
      std::vector<float> mine(size_t(numel_of(g)), 0.0f);  // padded vocab rows stay zero
      std::copy_n(hf.begin() + row * cols, rows_here * cols, mine.begin());
      row += rows_here;
      ckpt::SavePiece sp;
      sp.name = part;
      sp.global_shape = g;
      sp.held.offsets.assign(g.size(), 0);
      sp.held.sizes = g;
      sp.flat_begin = 0;
      sp.flat_end = numel_of(g);
      sp.dtype = ckpt::DType::f32;
      pending += mine.size() * sizeof(float);
      owned.push_back(std::move(mine));
      sp.data = owned.back().data();
      pieces.push_back(std::move(sp));
    }
    if (pending >= kShardBytes) flush();
  }
  if (!pieces.empty() || shards == 0) flush();

  ckpt::CommitOptions co;
  co.world_size = shards;
  co.plan_toml = options.plan_toml;
  nlohmann::json c;
  c["step"] = 0;
  c["consumed_samples"] = 0;
  c["global_batch_size"] = plan.trainer.global_batch_size;
  c["seed"] = plan.trainer.seed;
  c["data_seed"] = plan.data.seed;
  c["last_loss"] = 0.0;
  c["model"] = {{"arch", std::string(plan::to_string(plan.model.arch))},
                {"layers", shape.layers},
                {"hidden", shape.hidden},
                {"vocab_size", shape.vocab},
                {"padded_vocab", shape.padded_vocab}};
  c["saved_with"] = {{"tp", 1}, {"pp", 1}, {"dp", 1}, {"zero1", false}, {"world", 1}};
  std::set<std::string> dtypes;
  for (size_t i = 0; i < specs.size(); ++i) dtypes.insert(files.find(found[i])->dtype);
  c["imported_from"] = {{"format", "hf"},
                        {"path", options.source.empty() ? hf_dir.string() : options.source},
                        {"model_type", result.model_type},
                        {"dtypes", std::vector<std::string>(dtypes.begin(), dtypes.end())},
                        {"files", files.files().size()}};
  co.common = c;
  ckpt::commit(staging, final_dir.string(), co);
  result.checkpoint_dir = final_dir.string();
  return result;
}

}  // namespace recipe::core::hf
