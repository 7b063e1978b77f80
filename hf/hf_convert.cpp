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

#include "core/model/param_layout.hpp"
#include "family/tensor_table.hpp"
#include "hf/hf_safetensors.hpp"
#include "hf/lora_merge.hpp"

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

std::vector<TensorSpec> tensor_specs(const ModelShape& s) {
  const HfArchitecture& h = hf_architecture(s);
  const int column = hf_names_column(s);  // Mistral's tensors have Llama's names
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
      const std::string hf = hf_tensor_name(d, column, layer);
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
      g.t.transpose = d.hf_name(column).transposed;
      if (g.t.vocab_rows) shape[0] = s.arch.vocab;
      if (g.t.transpose) std::swap(shape[0], shape[1]);
      g.t.hf_shape = shape;
      g.t.parts.push_back(tensor_name(d, layer));
      group.push_back(std::move(g));
    }
    // Some HF architectures list, in each run of linears between two norms (q,k,v,o /
    // gate,up,down), the weights before the biases (Llama's state dict); the others follow the
    // table (each module's weight, then its bias, as GPT-2's).
    if (h.weights_before_biases) {
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
  for (int l = 0; l < s.arch.layers; ++l) add_rows([](const TensorDecl& d) { return d.scope == Scope::layer; }, l);
  add_rows([](const TensorDecl& d) { return d.scope == Scope::head; }, -1);
  return specs;
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
  const HfArchitecture& h = hf_architecture(shape);
  const std::vector<TensorSpec> specs = tensor_specs(shape);
  const ckpt::CheckpointReader reader(checkpoint_dir);

  // The checkpoint must be the model `shape` describes: every tensor present with its shape. The
  // vocabulary rows may be padded for another TP size (a LoRA checkpoint's base saved at another
  // one) when the vocabulary is the same: export writes the first vocab_size rows either way.
  std::set<std::string> vocab_rows;
  for (const TensorSpec& t : specs)
    if (t.vocab_rows) vocab_rows.insert(t.parts.begin(), t.parts.end());
  const nlohmann::json& common = reader.common();
  const int64_t saved_vocab =
      common.contains("model") && common["model"].is_object() ? common["model"].value("vocab_size", int64_t(-1)) : -1;
  std::vector<std::string> problems;
  for (const auto& [name, global] : our_shapes(shape)) {
    const ckpt::TensorInfo* t = reader.find(name);
    if (!t)
      problems.push_back(name + " is missing");
    else if (t->global_shape != global && vocab_rows.count(name) && saved_vocab == shape.arch.vocab &&
             t->global_shape.size() == global.size() && t->global_shape[0] >= shape.arch.vocab &&
             std::equal(global.begin() + 1, global.end(), t->global_shape.begin() + 1))
      continue;
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
      rows = shape.arch.vocab;
      buf.resize(size_t(rows * cols));
    }
    if (t.transpose) buf = transposed(buf, rows, cols);
    writer.write(t.hf_name, buf.data(), int64_t(buf.size()));
  }
  writer.finish();

  ExportResult r;
  r.adapters_left_out = shape.lora() && !options.merge_lora;
  r.out_dir = out.string();
  r.model_type = h.model_type;
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
  std::vector<std::string> unused_lines;
  const int column = hf_column(config, shape, unused_lines);  // config_mismatches accepted it
  const HfArchitecture& h = shape.arch.family->hf.at(size_t(column));
  const ckpt::hf::HfTensorFiles files(hf_dir.string());
  const std::vector<TensorSpec> specs = tensor_specs(shape);

  // Resolve every HF name first (saved from the bare base model, names lack the prefix), and
  // report every missing or misshapen tensor at once.
  const std::string prefix = h.base_prefix;
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
    throw std::runtime_error(hf_dir.string() + " does not hold the tensors of a " + h.model_type +
                             " model of this shape (" + std::to_string(problems.size()) +
                             "): " + join(problems, "; ", 8) +
                             ". Check that the directory is the model config.json describes (a complete download)");

  ImportResult result;
  result.model_type = h.model_type;
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
      const int64_t rows_here = t.vocab_rows ? shape.arch.vocab : g[0];
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
                {"layers", shape.arch.layers},
                {"hidden", shape.arch.hidden},
                {"vocab_size", shape.arch.vocab},
                {"padded_vocab", shape.arch.padded_vocab}};
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
