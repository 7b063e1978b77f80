// `recipe ckpt info | verify | export | import | merge`: look into a checkpoint, convert it to and from
// Hugging Face model directories (hf/hf_convert.hpp, a LoRA checkpoint's adapters as a
// PEFT adapter: hf_peft.hpp) and merge a LoRA checkpoint's adapters into a full checkpoint
// (lora_merge.hpp).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "checkpoint/checkpoint.hpp"
#include "plan/exit_codes.hpp"
#include "cli/verbs.hpp"
#include "dsl/plan_fields.hpp"
#include "hf/hf_convert.hpp"
#include "hf/hf_peft.hpp"
#include "hf/hf_recipe.hpp"
#include "hf/lora_merge.hpp"
#include "core/model/model_shape.hpp"

namespace fs = std::filesystem;

namespace recipe::cli {

namespace {

const char* kOptimizerPrefix = "optimizer.";

std::string mib(uint64_t bytes) {
  char b[32];
  if (bytes < 1024)
    std::snprintf(b, sizeof(b), "%llu B", static_cast<unsigned long long>(bytes));
  else if (bytes < (1u << 20))
    std::snprintf(b, sizeof(b), "%.1f KiB", double(bytes) / 1024.0);
  else
    std::snprintf(b, sizeof(b), "%.1f MiB", double(bytes) / double(1 << 20));
  return b;
}

// The plan --recipe and the overrides describe; nullopt after printing the problem. Violations
// outside model.* (cluster size, batch divisibility) do not matter for a conversion.
std::optional<plan::Plan> recipe_plan(const CkptArgs& a, std::ostream& err) {
  PlanFlags flags;
  flags.spec = a.recipe;
  flags.overrides = a.overrides;
  dsl::ExecutorFacts facts;
  facts.planning = true;
  auto loaded = load_plan(flags, "", facts, err);
  if (!loaded) return std::nullopt;
  std::vector<dsl::Violation> model_violations;
  for (const dsl::Violation& v : loaded->resolved.violations)
    if (v.path.rfind("model.", 0) == 0) model_violations.push_back(v);
  if (!model_violations.empty()) {
    err << dsl::format_violations(model_violations);
    return std::nullopt;
  }
  return loaded->resolved.plan;
}

// The plan of a checkpoint's model: --recipe when given, else the plan.toml saved beside its shards.
std::optional<plan::Plan> checkpoint_plan(const CkptArgs& a, const std::string& dir, std::ostream& err) {
  if (!a.recipe.empty()) return recipe_plan(a, err);
  const fs::path plan_toml = fs::path(dir) / "plan.toml";
  const std::string fix = "give the recipe it was trained with: --recipe <preset or file> [key=value ...]";
  if (!fs::exists(plan_toml) || fs::file_size(plan_toml) == 0) {
    err << "error: " << plan_toml.string() << " is missing, so the model's shape is unknown: " << fix << "\n";
    return std::nullopt;
  }
  try {
    dsl::ExecutorFacts facts;
    facts.planning = true;
    const dsl::ConfigTree tree = dsl::load_recipe(plan_toml.string());
    plan::Plan plan = dsl::resolve(tree, facts).plan;
    core::model_shape(plan);  // throws when the plan does not describe a model
    return plan;
  } catch (const std::exception& e) {
    err << "error: " << plan_toml.string() << " does not describe a model (" << e.what() << "): " << fix << "\n";
    return std::nullopt;
  }
}

// Every chunk's CRC32, the base's too; exit 0 only when all agree.
int run_verify(const CkptArgs& a, std::ostream& out, std::ostream& err) {
  int code = kExitOk;
  const std::string dir = resolve_checkpoint(a.path, err, code);
  if (dir.empty()) return code;
  const ckpt::CheckpointReader reader(dir);
  const auto [chunks, bytes] = reader.verify();
  out << "ok: " << fs::absolute(dir).string() << ": " << chunks << " chunks, " << mib(bytes)
      << (reader.base() ? " (with its base " + reader.base()->dir() + ")" : "") << ": every CRC32 matches\n";
  return kExitOk;
}

int run_info(const CkptArgs& a, std::ostream& out, std::ostream& err) {
  int code = kExitOk;
  const std::string dir = resolve_checkpoint(a.path, err, code);
  if (dir.empty()) return code;
  const ckpt::CheckpointReader reader(dir);
  const nlohmann::json& c = reader.common();
  auto line = [&](const char* key, const std::string& value) {
    char k[16];
    std::snprintf(k, sizeof(k), "%-12s", key);
    out << k << " " << value << "\n";
  };
  line("checkpoint", fs::absolute(dir).string());
  line("step", std::to_string(c.value("step", int64_t(0))) + " (consumed samples " +
                   std::to_string(c.value("consumed_samples", int64_t(0))) + ", global batch " +
                   std::to_string(c.value("global_batch_size", int64_t(0))) + ")");
  if (c.contains("imported_from") && c["imported_from"].is_object()) {
    const nlohmann::json& f = c["imported_from"];
    std::string dtypes;
    if (f.contains("dtypes") && f["dtypes"].is_array())
      for (const auto& d : f["dtypes"]) dtypes += (dtypes.empty() ? "" : ",") + d.get<std::string>();
    line("imported", f.value("format", std::string("?")) + " " + f.value("model_type", std::string("?")) + " from " +
                         f.value("path", std::string("?")) + (dtypes.empty() ? "" : " (" + dtypes + ")"));
  } else if (c.contains("saved_with") && c["saved_with"].is_object()) {
    const nlohmann::json& s = c["saved_with"];
    line("saved with", "tp=" + std::to_string(s.value("tp", 1)) + " pp=" + std::to_string(s.value("pp", 1)) +
                           " dp=" + std::to_string(s.value("dp", 1)) + (s.value("zero1", false) ? " zero1" : "") +
                           " (" + std::to_string(s.value("world", 1)) +
                           (s.value("world", 1) == 1 ? " rank" : " ranks") + "); any layout can load it");
  }
  if (c.contains("model") && c["model"].is_object()) {
    const nlohmann::json& m = c["model"];
    line("model", m.value("arch", std::string("?")) + ", " + std::to_string(m.value("layers", 0)) + " layers, hidden " +
                      std::to_string(m.value("hidden", 0)) + ", vocab " + std::to_string(m.value("vocab_size", 0)) +
                      " (padded " + std::to_string(m.value("padded_vocab", 0)) + ")");
  }
  if (c.contains("peft") && c["peft"].is_object()) {
    const nlohmann::json& pe = c["peft"];
    std::string targets;
    if (pe.contains("target_modules") && pe["target_modules"].is_array())
      for (const auto& t : pe["target_modules"])
        if (t.is_string()) targets += (targets.empty() ? "" : " ") + t.get<std::string>();
    char alpha[32];
    std::snprintf(alpha, sizeof(alpha), "%g", pe.value("alpha", 0.0));
    line("peft", pe.value("kind", std::string("?")) + " rank " + std::to_string(pe.value("rank", 0)) + ", alpha " +
                     alpha + (pe.value("use_rslora", false) ? " (rsLoRA)" : "") + ", targets " +
                     (targets.empty() ? "?" : targets));
  }
  if (const ckpt::BaseRef* b = reader.base_ref()) {
    line("base", b->path + " (content hash " + b->hash + ", checked)");
    line("", "adapter-only: this directory holds the LoRA adapters and their optimizer state, the base the rest");
  }
  int weights = 0, moments = 0, fp8_histories = 0;
  int64_t params = 0;
  for (const ckpt::TensorInfo& t : reader.tensors()) {
    if (t.name.rfind(kOptimizerPrefix, 0) == 0) {
      ++moments;
      continue;
    }
    if (t.name.rfind("fp8.", 0) == 0) {  // FP8 delayed scaling's amax histories, one per layer
      ++fp8_histories;
      continue;
    }
    ++weights;
    int64_t n = 1;
    for (int64_t d : t.global_shape) n *= d;
    params += n;
  }
  line("tensors", std::to_string(weights) + " weights (" + std::to_string(params) + " parameters)" +
                      (moments ? ", " + std::to_string(moments) + " optimizer moments" : ", no optimizer state") +
                      (fp8_histories ? ", " + std::to_string(fp8_histories) + " FP8 amax histories" : ""));
  if (c.contains("last_loss") && c["last_loss"].is_number() && c["last_loss"].get<double>() != 0.0) {
    char b[32];
    std::snprintf(b, sizeof(b), "%.4f", c["last_loss"].get<double>());
    line("last loss", b);
  }
  uint64_t total = 0;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    total += e.file_size();
    files.push_back(e.path().filename().string() + " (" + mib(e.file_size()) + ")");
  }
  std::sort(files.begin(), files.end());
  line("bytes", mib(total) + " in " + std::to_string(files.size()) + " files");
  for (size_t i = 0; i < files.size(); ++i) line(i ? "" : "files", files[i]);
  return kExitOk;
}

int run_export_peft(const std::string& dir, const plan::Plan& plan, const core::ModelShape& shape, const CkptArgs& a,
                    std::ostream& out, std::ostream& err) {
  if (!shape.lora()) {
    err << "error: " << dir << " is not a LoRA checkpoint (peft.kind=\"none\" in its plan): --format hf-peft "
        << "exports adapters; use --format hf for the model\n";
    return kExitUsage;
  }
  core::hf::PeftExportOptions o;
  o.out_dir = a.output;
  o.dtype = a.dtype == "bf16" ? ckpt::DType::bf16 : ckpt::DType::f32;
  const core::hf::PeftExportResult r = core::hf::export_peft(dir, shape, plan.peft, o);
  std::string targets;
  for (const std::string& t : r.target_modules) targets += (targets.empty() ? "" : ", ") + t;
  out << "exported the LoRA adapters of " << dir << " → " << r.out_dir << " (PEFT, r=" << plan.peft.rank
      << ", lora_alpha=" << plan.peft.alpha << (plan.peft.use_rslora ? ", rsLoRA" : "") << ", " << targets << "; "
      << r.tensors << " tensors, " << a.dtype << ", " << mib(r.bytes) << ")\n";
  for (const std::string& f : r.files) out << "  " << f << "\n";
  out << "load it with: PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(<base>), \"" << r.out_dir
      << "\"), where <base> is `recipe ckpt export " << a.path << " --format hf -o <base>` (the base model)\n";
  return kExitOk;
}

int run_export(const CkptArgs& a, std::ostream& out, std::ostream& err) {
  int code = kExitOk;
  const std::string dir = resolve_checkpoint(a.path, err, code);
  if (dir.empty()) return code;
  if (a.merge && a.format != "hf") {
    err << "error: --merge folds the adapters into the weights of --format hf; --format " << a.format
        << " exports the adapters themselves\n";
    return kExitUsage;
  }
  const auto plan = checkpoint_plan(a, dir, err);
  if (!plan) return kExitInvalidRecipe;
  const core::ModelShape shape = core::model_shape(*plan);
  try {
    core::hf::hf_architecture(shape);
  } catch (const std::invalid_argument& e) {
    err << "error: cannot export " << dir << ": " << e.what() << "\n";
    return kExitInvalidRecipe;
  }
  if (a.format == "hf-peft") return run_export_peft(dir, *plan, shape, a, out, err);
  if (a.merge && !shape.lora()) {
    err << "error: --merge: " << dir << " is not a LoRA checkpoint (peft.kind=\"none\" in its plan): export it "
        << "without --merge\n";
    return kExitUsage;
  }
  core::hf::ExportOptions o;
  o.out_dir = a.output;
  o.dtype = a.dtype == "bf16" ? ckpt::DType::bf16 : ckpt::DType::f32;
  o.merge_lora = a.merge;
  const core::hf::ExportResult r = core::hf::export_checkpoint(dir, shape, o);
  out << "exported " << dir << " → " << r.out_dir << " (" << r.model_type << ", " << r.tensors << " tensors, "
      << a.dtype << (a.merge ? ", LoRA adapters merged" : "") << ", " << mib(r.bytes) << ")\n";
  for (const std::string& f : r.files) out << "  " << f << "\n";
  if (r.adapters_left_out)
    out << "note: this is the base model of a LoRA fine-tune, without its adapters: add --merge for the fine-tuned "
           "model, or export the adapters with --format hf-peft\n";
  out << "load it with: AutoModelForCausalLM.from_pretrained(\"" << r.out_dir
      << "\")  (the tokenizer is not part of a checkpoint: save yours beside it)\n";
  return kExitOk;
}

int run_merge(const CkptArgs& a, std::ostream& out, std::ostream& err) {
  int code = kExitOk;
  const std::string dir = resolve_checkpoint(a.path, err, code);
  if (dir.empty()) return code;
  auto plan = checkpoint_plan(a, dir, err);
  if (!plan) return kExitInvalidRecipe;
  const core::ModelShape shape = core::model_shape(*plan);
  if (!shape.lora()) {
    err << "error: " << dir << " is not a LoRA checkpoint (peft.kind=\"none\" in its plan): it is a full "
        << "checkpoint already\n";
    return kExitUsage;
  }
  // The merged model's plan: the same model without adapters.
  plan::Plan merged = *plan;
  merged.peft = plan::PeftConfig{};
  core::lora::MergeOptions o;
  o.checkpoints_dir = a.output;
  o.plan_toml = dsl::to_toml(merged);
  const core::lora::MergeResult r = core::lora::merge_checkpoint(dir, shape, o);
  out << "merged the LoRA adapters of " << dir << " into their base weights (" << r.merged << " of " << r.tensors
      << " tensors: W + s·B·A, s=" << shape.lora_scale << ") → " << r.checkpoint_dir << "\n"
      << "a full checkpoint without adapters: load it with checkpoint.load=" << fs::absolute(a.output).string()
      << " and peft.kind=\"none\", or export it with `recipe ckpt export " << a.output << " --format hf`\n";
  return kExitOk;
}

// Shell words: a word with characters the shell would read is single-quoted.
std::string shell_word(const std::string& w) {
  if (!w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=.,/:@%") ==
                        std::string::npos)
    return w;
  std::string r = "'";
  for (char c : w) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

nlohmann::json read_json_file(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return nullptr;
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(p.string() + ": does not parse as JSON: " + e.what());
  }
}

// The files of a downloaded model directory the recipe and later exports read, copied beside the
// checkpoint so the import stands alone when the download is deleted.
constexpr const char* kModelFiles[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json",
                                       "special_tokens_map.json", "tokenizer.model"};

// The recipe of the imported model (hf/hf_recipe.hpp): its model.* keys from config.json (those
// that are recipe keys: a value the resolver derives, such as model.head_dim where it is
// hidden/heads, is left to it and checked against config.json by the import), its tokenizer (the
// copies in `ckpts`) and a fine-tune of the checkpoint. `base`: the preset it builds on ("" none).
// `seq`: the sequence length of --recipe's plan (0: none given); model.seq_length is written where
// it would exceed max_position_embeddings, and without a recipe (a training choice, ≤ 4096).
core::hf::RecipeSettings import_settings(const fs::path& hf_dir, const fs::path& ckpts, const nlohmann::json& config,
                                         int64_t seq) {
  core::hf::RecipeSettings s;
  s.emplace_back("mode", "finetune");
  int64_t max_positions = 0;
  for (auto& [key, v] : core::hf::model_settings(config)) {
    if (!dsl::find_field(key)) continue;
    if (key == "model.max_position_embeddings") max_positions = v.get<int64_t>();
    s.emplace_back(key, v);
  }
  if (max_positions > 0 && (seq == 0 || seq > max_positions))
    s.emplace_back("model.seq_length", std::min<int64_t>(max_positions, seq == 0 ? 4096 : seq));
  const nlohmann::json tokenizer = read_json_file(hf_dir / "tokenizer.json");
  if (!tokenizer.is_null()) {
    s.emplace_back("data.tokenizer", "hf");
    s.emplace_back("data.tokenizer_model", (ckpts / "tokenizer.json").string());
    const std::string eod = core::hf::eod_token_of(read_json_file(hf_dir / "generation_config.json"), tokenizer);
    if (!eod.empty()) s.emplace_back("data.eod_token", eod);
  } else if (fs::is_regular_file(hf_dir / "tokenizer.model")) {
    s.emplace_back("data.tokenizer", "sentencepiece");
    s.emplace_back("data.tokenizer_model", (ckpts / "tokenizer.model").string());
  }
  s.emplace_back("checkpoint.load", ckpts.string());
  return s;
}

// A preset name (not a path): what a Lua recipe's `preset "..."` can build on.
bool is_preset_name(const std::string& spec) {
  return !spec.empty() && spec.find('/') == std::string::npos && !spec.ends_with(".lua") && !spec.ends_with(".toml");
}

int run_import(const CkptArgs& a, std::ostream& out, std::ostream& err) {
  if (!fs::is_directory(a.path)) {
    err << "error: " << a.path << " is not a directory: give a Hugging Face model directory (config.json + "
        << "model.safetensors)\n";
    return kExitUsage;
  }
  const fs::path hf_dir = fs::absolute(a.path).lexically_normal();
  const fs::path ckpts = fs::absolute(a.output).lexically_normal();
  const nlohmann::json config = read_json_file(hf_dir / "config.json");
  if (config.is_null())
    throw std::runtime_error((hf_dir / "config.json").string() +
                             ": missing; an HF model directory holds config.json beside its safetensors");

  // The plan the checkpoint is written for: --recipe and the overrides (its model is checked
  // against config.json by the import), else the model.lua written below.
  std::optional<plan::Plan> plan;
  if (!a.recipe.empty()) {
    plan = recipe_plan(a, err);
    if (!plan) return kExitInvalidRecipe;
  }
  // model.lua: the model config.json describes, on --recipe's preset where one is named; lora.lua:
  // LoRA on it (the engine's LoRA defaults, _lora, and rank-16 adapters on every linear).
  const bool on_preset = is_preset_name(a.recipe);
  core::hf::RecipeSettings settings;
  try {
    settings = import_settings(hf_dir, ckpts, config, plan ? plan->model.seq_length : 0);
  } catch (const std::invalid_argument& e) {
    err << "error: " << (hf_dir / "config.json").string() << ": " << e.what() << "\n";
    return kExitInvalidRecipe;
  }
  const std::string source = "Written by `recipe ckpt import` from " + hf_dir.string() +
                             ": the model config.json describes, its tokenizer\n(copied here) and a fine-tune of "
                             "the checkpoint imported here. Train on your data with\ndata.kind=\"sft\" "
                             "data.path=<prefix> (`recipe data prepare --format chat ...`).";
  const std::string base = on_preset ? "preset " + nlohmann::json(a.recipe).dump() : "";
  const std::string model_lua = core::hf::lua_recipe(settings, base, source);
  const core::hf::RecipeSettings lora = {
      {"peft.rank", 16}, {"peft.alpha", 32.0}, {"peft.target_modules", nlohmann::json::array({"all-linear"})}};
  const std::string lora_lua = core::hf::lua_recipe(
      lora, "preset \"model\" (preset \"_lora\")",
      "LoRA fine-tune of the model in model.lua (beside this file): rank-16 adapters on every\n"
      "linear, the base frozen, the engine's LoRA defaults (_lora). Written by `recipe ckpt import`.");
  if (!plan) {
    // model.lua as written, without checkpoint.load (the checkpoint does not exist yet; an
    // earlier import in that directory is not what this plan is checked against).
    core::hf::RecipeSettings model_only;
    for (const auto& kv : settings)
      if (kv.first != "checkpoint.load") model_only.push_back(kv);
    const fs::path scratch = fs::temp_directory_path() / ("recipe-import-" + std::to_string(::getpid()));
    fs::create_directories(scratch);
    core::hf::write_text_file((scratch / "model.lua").string(), core::hf::lua_recipe(model_only, "", source));
    CkptArgs b = a;
    b.recipe = (scratch / "model.lua").string();
    plan = recipe_plan(b, err);
    std::error_code ec;
    fs::remove_all(scratch, ec);
    if (!plan) return kExitInvalidRecipe;
  }
  core::hf::ImportOptions o;
  o.checkpoints_dir = a.output;
  o.plan_toml = dsl::to_toml(*plan);
  try {
    const core::hf::ImportResult r = core::hf::import_checkpoint(a.path, *plan, o);
    out << "imported " << a.path << " (" << r.model_type << ", " << r.tensors << " tensors) → " << r.checkpoint_dir
        << "\n";
    if (!r.unused.empty()) {
      out << "  not imported (no weight of the model): ";
      for (size_t i = 0; i < r.unused.size() && i < 5; ++i) out << (i ? ", " : "") << r.unused[i];
      if (r.unused.size() > 5) out << " and " << r.unused.size() - 5 << " more";
      out << "\n";
    }
  } catch (const std::invalid_argument& e) {
    err << "error: " << e.what() << "\n";
    return kExitInvalidRecipe;
  }
  std::vector<std::string> copied;
  for (const char* f : kModelFiles)
    if (fs::is_regular_file(hf_dir / f)) {
      fs::copy_file(hf_dir / f, ckpts / f, fs::copy_options::overwrite_existing);
      copied.push_back(f);
    }
  core::hf::write_text_file((ckpts / "model.lua").string(), model_lua);
  core::hf::write_text_file((ckpts / "lora.lua").string(), lora_lua);
  out << "wrote " << (ckpts / "model.lua").string() << " (the model: every model key of config.json"
      << (copied.empty() ? "" : ", the tokenizer") << ", checkpoint.load) and " << (ckpts / "lora.lua").string()
      << " (LoRA on it)";
  if (!copied.empty()) {
    out << "; copied ";
    for (size_t i = 0; i < copied.size(); ++i) out << (i ? ", " : "") << copied[i];
  }
  out << "\n";
  std::string overrides;
  for (const std::string& ov : a.overrides) overrides += " " + shell_word(ov);
  out << "fine-tune from it with: recipe finetune " << shell_word((ckpts / "lora.lua").string()) << overrides << "\n"
      << "  (all weights: recipe finetune " << shell_word((ckpts / "model.lua").string()) << overrides
      << "; your data: data.kind=sft data.path=<prefix>)\n";
  return kExitOk;
}

}  // namespace

std::string resolve_checkpoint(const std::string& path, std::ostream& err, int& code) {
  if (!fs::exists(path)) {
    err << "error: " << path << " does not exist: give a checkpoint (step-<N>/), a checkpoints directory or a run "
        << "directory\n";
    code = kExitUsage;
    return "";
  }
  std::string dir = ckpt::find_checkpoint(path);
  if (dir.empty()) {
    err << "error: " << path << " holds no checkpoint yet (no `latest` and no step-<N>/ with metadata.json)\n";
    code = kExitUsage;
  }
  return dir;
}

CLI::App* add_ckpt_verb(CLI::App& app, CkptArgs& a) {
  a.cmd =
      app.add_subcommand("ckpt", "Inspect checkpoints; export to / import from Hugging Face transformers; merge LoRA");
  a.cmd->require_subcommand(1);
  a.info = a.cmd->add_subcommand("info", "Step, saved layout, model, tensors and files of a checkpoint");
  a.info->add_option("path", a.path, "A checkpoint (step-<N>/), checkpoints directory or run directory")->required();

  a.export_cmd = a.cmd->add_subcommand(
      "export", "Write a transformers-loadable directory (model.safetensors + config.json) from a checkpoint");
  a.export_cmd->add_option("path", a.path, "A checkpoint (step-<N>/), checkpoints directory or run directory")
      ->required();
  a.export_cmd->add_option("overrides", a.overrides, "key=value overrides of --recipe");
  a.export_cmd->add_option("-o,--output", a.output, "Output directory (new, or an earlier export)")->required();
  a.export_cmd
      ->add_option("--format", a.format,
                   "hf (Hugging Face transformers) or hf-peft (a LoRA checkpoint's adapters for PEFT: "
                   "adapter_config.json + adapter_model.safetensors)")
      ->check(CLI::IsMember({"hf", "hf-peft"}));
  a.export_cmd->add_flag("--merge", a.merge,
                         "With --format hf, a LoRA checkpoint's adapters merged into the weights (W + s·B·A); "
                         "without it, its base model");
  a.export_cmd->add_option("--dtype", a.dtype, "f32 (exact, default) or bf16")->check(CLI::IsMember({"f32", "bf16"}));
  a.export_cmd->add_option("--recipe", a.recipe,
                           "The model's recipe, when the checkpoint's plan.toml does not describe it");

  a.import_cmd = a.cmd->add_subcommand(
      "import",
      "Write a step-0 checkpoint from a Hugging Face model directory, and beside it a recipe of the model "
      "(model.lua) and of a LoRA fine-tune of it (lora.lua)");
  a.import_cmd
      ->add_option("path", a.path,
                   "HF model directory: config.json + model.safetensors (or sharded), tokenizer.json, "
                   "generation_config.json")
      ->required();
  a.import_cmd->add_option("overrides", a.overrides, "key=value overrides of the model's recipe");
  a.import_cmd->add_option("-o,--output", a.output, "Checkpoints directory to create (step-0/ and latest)")->required();
  a.import_cmd->add_option("--format", a.format, "hf (Hugging Face transformers)")->check(CLI::IsMember({"hf"}));
  a.import_cmd->add_option("--recipe", a.recipe,
                           "Preset or recipe file the model must match (its model keys are checked against "
                           "config.json; default: the model config.json describes)");
  a.merge_cmd = a.cmd->add_subcommand(
      "merge", "Write a full checkpoint of a LoRA checkpoint's model with the adapters merged (W + s·B·A)");
  a.merge_cmd->add_option("path", a.path, "A LoRA checkpoint (step-<N>/), checkpoints directory or run directory")
      ->required();
  a.merge_cmd->add_option("overrides", a.overrides, "key=value overrides of --recipe");
  a.merge_cmd->add_option("-o,--output", a.output, "Checkpoints directory to create (step-0/ and latest)")->required();
  a.merge_cmd->add_option("--recipe", a.recipe,
                          "The model's recipe, when the checkpoint's plan.toml does not describe it");
  a.verify = a.cmd->add_subcommand("verify", "Check the CRC32 of every chunk of a checkpoint (and of its base)");
  a.verify->add_option("path", a.path, "A checkpoint (step-<N>/), checkpoints directory or run directory")->required();
  for (CLI::App* c : {a.info, a.verify, a.export_cmd, a.import_cmd, a.merge_cmd}) c->footer(kExitCodeHelp);
  return a.cmd;
}

int run_ckpt(const CkptArgs& a, std::ostream& out, std::ostream& err) {
  try {
    if (*a.info) return run_info(a, out, err);
    if (*a.verify) return run_verify(a, out, err);
    if (*a.export_cmd) return run_export(a, out, err);
    if (*a.import_cmd) return run_import(a, out, err);
    if (*a.merge_cmd) return run_merge(a, out, err);
  } catch (const std::invalid_argument& e) {
    err << "error: " << e.what() << "\n";
    return kExitInvalidRecipe;
  } catch (const std::exception& e) {  // CheckpointError and conversion failures name the file
    err << "error: " << e.what() << "\n";
    return kExitRuntime;
  }
  err << "error: `recipe ckpt` needs a subcommand: info, verify, export, import or merge\n";
  return kExitUsage;
}

}  // namespace recipe::cli
