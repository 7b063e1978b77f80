// The files a plan names, checked before launch on the launching host (DESIGN.md: validates ⇒ runs):
// dataset prefixes (.idx header, .bin size, the loss mask of chat data, a sample in every split that
// the run reads), tokenizer files (present, of the right kind, a vocabulary that fits the model) and
// checkpoint.load (a directory that holds a checkpoint whose tensors fit the plan's model:
// resolve_checkpoint_shapes.cpp; resuming it under a changed LR schedule is a warning that names
// the keys). Afterwards every path is made absolute, so
// resolved.toml resumes from any directory.
//
// The dsl does not link the core (CMakeLists.txt: recipe_dsl → recipe_plan only), so core/data's
// IndexedDataset and LossMask readers are not reachable here. The MMIDIDX and mask headers are parsed
// minimally below, after the layouts documented in core/data/indexed_dataset.hpp and loss_mask.hpp;
// the core's readers still check everything else when the run opens the files. Token ids are not
// scanned here (a full read of a large .bin is too slow for `recipe validate`): the core checks them
// as it reads samples.
#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <type_traits>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "dsl/resolve_internal.hpp"
#include "plan/data_split.hpp"

namespace recipe::dsl::detail {

namespace {

namespace fs = std::filesystem;

constexpr char kIdxMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kIdxHeaderBytes = 34;
constexpr char kMaskMagic[8] = {'R', 'C', 'P', 'M', 'A', 'S', 'K', '\0'};
constexpr uint64_t kMaskHeaderBytes = 40;

template <class T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Token size of an MMIDIDX dtype code; 0 for codes that do not hold integer token ids.
uint64_t token_bytes(uint8_t code) {
  switch (code) {
    case 1:  // uint8
    case 2:  // int8
      return 1;
    case 3:  // int16
    case 8:  // uint16
      return 2;
    case 4:  // int32
      return 4;
    case 5:  // int64
      return 8;
    default:  // 6 float64, 7 float32, unknown
      return 0;
  }
}

std::string prepare_fix(const plan::DataConfig& d, const std::string& prefix, bool chat) {
  const std::string tokenizer =
      d.tokenizer == plan::Tokenizer::none ? "byte" : std::string(plan::to_string(d.tokenizer));
  return std::string("create it with `recipe data prepare ") + (chat ? "--format chat --chat-template <t> " : "") +
         "--input <file.txt|file.jsonl> --tokenizer " + tokenizer + " ... --output " + prefix +
         "` (data.path is the prefix, without .bin/.idx)";
}

// What the split checks need from one dataset: tokens and documents in each of train/valid/test.
struct DatasetSummary {
  std::array<int64_t, 3> tokens{};
  std::array<int64_t, 3> documents{};
  uint64_t bin_tokens = 0;  // the .bin's size in tokens (what a loss mask must cover)
};

// Reads <prefix>.idx (header, sequence lengths and pointers, the split bounds of the document index)
// and checks it against <prefix>.bin's size. Returns nothing and reports a violation when broken.
std::optional<DatasetSummary> read_dataset(ResolveContext& ctx, const std::string& field, const std::string& prefix,
                                           const std::array<double, 3>& split) {
  const std::string idx = prefix + ".idx", bin = prefix + ".bin";
  auto bad = [&](const std::string& why, const std::string& fix) {
    ctx.violation(field, idx + ": " + why, fix);
    return std::nullopt;
  };
  const std::string rewrite = "write it again with `recipe data prepare ... --output " + prefix + "`";
  std::error_code ec;
  const uint64_t idx_size = fs::file_size(idx, ec);
  const uint64_t bin_size = fs::file_size(bin, ec);
  std::ifstream in(idx, std::ios::binary);
  char head[kIdxHeaderBytes] = {};
  if (!in.read(head, static_cast<std::streamsize>(std::min<uint64_t>(idx_size, kIdxHeaderBytes))) && idx_size > 0)
    return bad("cannot be read", "check the file's permissions");
  if ((idx_size >= 9 && std::memcmp(head, kIdxMagic, 9) != 0) || idx_size < 9)
    return bad("not a Megatron MMIDIDX index (bad magic)", rewrite);
  if (idx_size < kIdxHeaderBytes)
    return bad("truncated header (" + std::to_string(idx_size) + " bytes, an MMIDIDX header has 34)", rewrite);
  if (const auto version = load<uint64_t>(head + 9); version != 1)
    return bad("unsupported MMIDIDX version " + std::to_string(version) + " (expected 1)", rewrite);
  const uint64_t item = token_bytes(static_cast<uint8_t>(head[17]));
  if (item == 0)
    return bad("dtype code " + std::to_string(static_cast<int>(head[17])) + " does not hold integer token ids",
               rewrite);
  const uint64_t S = load<uint64_t>(head + 18), D = load<uint64_t>(head + 26);
  const uint64_t room = idx_size - kIdxHeaderBytes;
  if (S > room / 12 || D > room / 8 || 12 * S + 8 * D > room || D < 1)
    return bad("truncated or corrupt: the header promises " + std::to_string(S) + " sequences and " +
                   std::to_string(D) + " document entries in " + std::to_string(idx_size) + " bytes",
               rewrite);

  auto doc_entry = [&](uint64_t d) {
    char b[8];
    in.seekg(static_cast<std::streamoff>(kIdxHeaderBytes + 12 * S + 8 * d));
    in.read(b, 8);
    return load<int64_t>(b);
  };
  const int64_t documents = static_cast<int64_t>(D) - 1;
  const auto ranges = data::split_documents(documents, split);
  std::array<int64_t, 4> seq_bound{};  // first sequence of each split's first document, and the end
  for (size_t i = 0; i < 3; ++i) seq_bound[i] = doc_entry(static_cast<uint64_t>(ranges[i].begin));
  seq_bound[3] = doc_entry(D - 1);
  if (doc_entry(0) != 0 || seq_bound[3] != static_cast<int64_t>(S) ||
      std::any_of(seq_bound.begin(), seq_bound.end(), [&](int64_t s) { return s < 0 || s > int64_t(S); }))
    return bad("corrupt document index (it must run from 0 to the " + std::to_string(S) + " sequences)", rewrite);

  // One pass over the lengths and pointers, in blocks: tokens per split and the bytes the .bin needs.
  DatasetSummary sum;
  for (size_t i = 0; i < 3; ++i) sum.documents[i] = ranges[i].size();
  sum.bin_tokens = bin_size / item;
  constexpr uint64_t kBlock = 1 << 16;
  std::vector<char> lengths(4 * kBlock), pointers(8 * kBlock);
  uint64_t needed = 0;
  for (uint64_t s0 = 0; s0 < S; s0 += kBlock) {
    const uint64_t n = std::min(kBlock, S - s0);
    in.seekg(static_cast<std::streamoff>(kIdxHeaderBytes + 4 * s0));
    in.read(lengths.data(), static_cast<std::streamsize>(4 * n));
    in.seekg(static_cast<std::streamoff>(kIdxHeaderBytes + 4 * S + 8 * s0));
    in.read(pointers.data(), static_cast<std::streamsize>(8 * n));
    if (!in) return bad("cannot be read to the end", rewrite);
    for (uint64_t j = 0; j < n; ++j) {
      const auto len = load<int32_t>(lengths.data() + 4 * j);
      const auto ptr = load<int64_t>(pointers.data() + 8 * j);
      if (len < 0 || ptr < 0)
        return bad("sequence " + std::to_string(s0 + j) + " has a negative length or pointer", rewrite);
      needed = std::max(needed, static_cast<uint64_t>(ptr) + static_cast<uint64_t>(len) * item);
      const auto s = static_cast<int64_t>(s0 + j);
      for (size_t i = 0; i < 3; ++i)
        if (s >= seq_bound[i] && s < seq_bound[i + 1]) sum.tokens[i] += len;
    }
  }
  if (needed > bin_size) {
    ctx.violation(field,
                  bin + " is " + std::to_string(bin_size) + " bytes but " + idx + " needs " + std::to_string(needed) +
                      " (truncated, or written with a different index)",
                  rewrite);
    return std::nullopt;
  }
  return sum;
}

// <prefix>.mask.bin of chat data: present, its header, its template, and that it covers the .bin
// (header N = the .bin's tokens, one byte each after the header), as the loader checks at start.
void check_mask(ResolveContext& ctx, const std::string& field, const std::string& prefix, uint64_t bin_tokens) {
  const plan::DataConfig& d = ctx.plan().data;
  const std::string path = prefix + ".mask.bin";
  const std::string fix = "prepare the data again with `recipe data prepare --format chat --chat-template " +
                          std::string(plan::to_string(d.chat_template)) + " ... --output " + prefix + "`";
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    ctx.violation(field, path + " not found: data.kind=sft needs the loss mask beside .bin/.idx", fix);
    return;
  }
  std::ifstream in(path, std::ios::binary);
  char head[kMaskHeaderBytes] = {};
  if (!in.read(head, kMaskHeaderBytes) || std::memcmp(head, kMaskMagic, 8) != 0) {
    ctx.violation(field, path + " is not a loss mask (bad magic or truncated header)", fix);
    return;
  }
  const uint64_t covered = load<uint64_t>(head + 16), mask_size = fs::file_size(path, ec);
  if (covered != bin_tokens) {
    ctx.violation(field,
                  path + " covers " + std::to_string(covered) + " tokens but " + prefix + ".bin holds " +
                      std::to_string(bin_tokens) + ": the mask belongs to another version of the dataset",
                  fix);
    return;
  }
  if (mask_size != kMaskHeaderBytes + covered) {
    ctx.violation(field,
                  path + " is " + std::to_string(mask_size) + " bytes, expected " +
                      std::to_string(kMaskHeaderBytes + covered) + " (header + one byte per token: truncated?)",
                  fix);
    return;
  }
  std::string recorded(head + 24, 16);
  recorded.resize(std::strlen(recorded.c_str()));
  if (d.chat_template != plan::ChatTemplate::none && recorded != plan::to_string(d.chat_template))
    ctx.violation("data.chat_template",
                  path + " was prepared with chat template \"" + recorded + "\" but data.chat_template=\"" +
                      std::string(plan::to_string(d.chat_template)) + "\"",
                  "set data.chat_template=\"" + recorded + "\", or prepare the data again with --chat-template " +
                      std::string(plan::to_string(d.chat_template)));
}

void check_datasets(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const plan::DataConfig& d = p.data;
  if (d.kind == plan::DataKind::mock || d.blend.empty() || ctx.bad_paths.count("data.split")) return;
  std::array<double, 3> split{};
  try {
    split = data::parse_split(d.split);
  } catch (const std::exception&) {
    return;  // check_ranges reported it
  }
  const std::string field = d.path.empty() ? "data.blend" : "data.path";
  const bool sft = d.kind == plan::DataKind::sft;
  const bool eval = p.trainer.eval_interval > 0 && split[1] > 0;
  const int64_t sample_tokens = static_cast<int64_t>(p.model.seq_length) + 1;
  bool any_valid = false, all_read = true;
  int64_t most_documents = 0;  // of one dataset: splits are by whole document
  for (const auto& [weight, prefix] : d.blend) {
    if (prefix.empty()) continue;
    std::error_code ec;
    bool missing = false;
    for (const std::string& path : {prefix + ".idx", prefix + ".bin"}) {
      if (fs::is_regular_file(path, ec)) continue;
      std::string why = path + " not found";
      if (prefix.ends_with(".bin") || prefix.ends_with(".idx"))
        why += " (" + field + " is the prefix without the .bin/.idx extension)";
      else if (fs::is_regular_file(prefix, ec))
        why += " (" + prefix + " is a file; " + field + " names the prefix of a .bin/.idx pair)";
      ctx.violation(field, field + "=\"" + prefix + "\": " + why, prepare_fix(d, prefix, sft));
      missing = true;
      break;
    }
    if (missing) {
      all_read = false;
      continue;
    }
    const auto sum = read_dataset(ctx, field, prefix, split);
    if (!sum) {
      all_read = false;
      continue;
    }
    if (sft) check_mask(ctx, field, prefix, sum->bin_tokens);
    const std::string fix = "add data, lower model.seq_length, or give training a larger share in data.split";
    if (!ctx.facts.evaluation && (sft ? sum->documents[0] < 1 : sum->tokens[0] < sample_tokens))
      ctx.violation(field,
                    sft ? prefix + ": data.split=\"" + d.split + "\" gives training no conversation of its " +
                              std::to_string(sum->documents[0] + sum->documents[1] + sum->documents[2])
                        : prefix + ": data.split=\"" + d.split + "\" gives training " + std::to_string(sum->tokens[0]) +
                              " tokens, fewer than one sample of model.seq_length+1 = " + std::to_string(sample_tokens),
                    fix);
    if (sft ? sum->documents[1] >= 1 : sum->tokens[1] >= sample_tokens) any_valid = true;
    most_documents = std::max(most_documents, sum->documents[0] + sum->documents[1] + sum->documents[2]);
  }
  // Why validation gets nothing, and what helps: a split rounds to whole documents, so a corpus of
  // one document (one file prepared without --split-paragraphs) has none to hold out at any share.
  const bool few_documents = most_documents < 10;
  const std::string cause = few_documents ? " (splits are by whole document, and no dataset holds more than " +
                                                std::to_string(most_documents) +
                                                (most_documents == 1 ? " document)" : " documents)")
                                          : "";
  const std::string fix = std::string(few_documents ? "prepare the data with `recipe data prepare --split-paragraphs` "
                                                      "(a document per paragraph) or from more files, "
                                                    : "add data, ") +
                          "give validation a larger share" +
                          (d.split == "90,10,0" ? std::string() : std::string(" (e.g. data.split=\"90,10,0\")")) +
                          ", or set trainer.eval_interval=0";
  if (ctx.eval_auto && (split[1] <= 0 || (all_read && !any_valid))) {
    ctx.plan().trainer.eval_interval = 0;  // validation is on by default only where there is validation data
    if (split[1] > 0)                      // the split asks for validation data that the datasets cannot give: say so
      ctx.warn(
          "no validation: data.split=\"" + d.split + "\" gives validation " +
          (sft ? "no conversation" : "fewer than model.seq_length+1 = " + std::to_string(sample_tokens) + " tokens") +
          cause + "; to validate, " + fix.substr(0, fix.rfind(", or set")));
  } else if (eval && all_read && !any_valid) {
    ctx.violation("data.split",
                  "trainer.eval_interval=" + std::to_string(p.trainer.eval_interval) + " but data.split=\"" + d.split +
                      (sft ? "\" gives validation no conversation in any dataset"
                           : "\" gives validation fewer than model.seq_length+1 = " + std::to_string(sample_tokens) +
                                 " tokens in every dataset") +
                      cause,
                  fix);
  }
}

std::string read_head(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

// A tokenizer file the plan names: present and a regular file. Returns false (and reports) otherwise.
bool tokenizer_file(ResolveContext& ctx, const std::string& key, const std::string& path, const std::string& fix) {
  if (path.empty()) return false;  // check_relations reported the missing key
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return true;
  ctx.violation(key, key + "=\"" + path + "\" " + (fs::exists(path, ec) ? "is not a file" : "not found"), fix);
  return false;
}

void check_tokenizer(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const plan::DataConfig& d = p.data;
  const std::string gpt2_fix =
      "point it at GPT-2's vocab.json and merges.txt (docs/user-guide.md, \"Data\", says where to get them), "
      "or use data.tokenizer=\"byte\"";
  switch (d.tokenizer) {
    case plan::Tokenizer::gpt2_bpe: {
      tokenizer_file(ctx, "data.merges_file", d.merges_file, gpt2_fix);
      if (!tokenizer_file(ctx, "data.vocab_file", d.vocab_file, gpt2_fix)) return;
      std::ifstream in(d.vocab_file);
      const auto vocab = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (!vocab.is_object()) {
        ctx.violation("data.vocab_file", "data.vocab_file=\"" + d.vocab_file + "\" is not a JSON object of tokens",
                      gpt2_fix);
        return;
      }
      const auto n = static_cast<int64_t>(vocab.size());
      if (n > p.model.vocab_size && !ctx.bad_paths.count("model.vocab_size"))
        ctx.violation("model.vocab_size",
                      "data.vocab_file=\"" + d.vocab_file + "\" has " + std::to_string(n) +
                          " tokens but model.vocab_size=" + std::to_string(p.model.vocab_size),
                      "set model.vocab_size ≥ " + std::to_string(n) + ", or use the model's own tokenizer");
      return;
    }
    case plan::Tokenizer::sentencepiece: {
      const std::string fix = "point data.tokenizer_model at a SentencePiece .model file";
      if (!tokenizer_file(ctx, "data.tokenizer_model", d.tokenizer_model, fix)) return;
      // A .model is a serialized protobuf; a tokenizer.json (the common mix-up) starts with '{'.
      std::string head = read_head(d.tokenizer_model, 64);
      head.erase(0, std::min(head.size(), head.find_first_not_of(" \t\r\n")));
      if (head.empty() || head.front() == '{')
        ctx.violation("data.tokenizer_model",
                      "data.tokenizer_model=\"" + d.tokenizer_model + "\" is " +
                          (head.empty() ? "empty" : "JSON (a Hugging Face tokenizer.json?)") +
                          ", not a SentencePiece model",
                      head.empty() ? fix : "set data.tokenizer=\"hf\" for a tokenizer.json, or " + fix);
      return;
    }
    case plan::Tokenizer::hf: {
      const std::string fix = "point data.tokenizer_model at the model's tokenizer.json";
      if (!tokenizer_file(ctx, "data.tokenizer_model", d.tokenizer_model, fix)) return;
      std::ifstream in(d.tokenizer_model);
      if (!nlohmann::json::accept(in))
        ctx.violation("data.tokenizer_model",
                      "data.tokenizer_model=\"" + d.tokenizer_model +
                          "\" is not JSON (data.tokenizer=hf reads a "
                          "Hugging Face tokenizer.json)",
                      "set data.tokenizer=\"sentencepiece\" for a .model file, or " + fix);
      return;
    }
    default:
      return;
  }
}

// checkpoint.load: a checkpoint (metadata.json), a checkpoints dir (`latest` or step-<N>/metadata.json)
// or a run dir (checkpoints/ holding one) — the cases of checkpoint/find_checkpoint.cpp, which the core
// then resolves and verifies in full.
bool holds_checkpoint(const fs::path& dir, int depth = 0) {
  std::error_code ec;
  if (fs::is_regular_file(dir / "metadata.json", ec) || fs::is_regular_file(dir / "latest", ec)) return true;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("step-") && !name.ends_with(".partial") &&
        fs::is_regular_file(entry.path() / "metadata.json", ec))
      return true;
  }
  return depth == 0 && fs::is_directory(dir / "checkpoints", ec) && holds_checkpoint(dir / "checkpoints", 1);
}

// The checkpoint directory find_checkpoint would pick, for reading its plan.toml; "" when unclear.
fs::path locate_checkpoint(const fs::path& dir, int depth = 0) {
  std::error_code ec;
  if (fs::is_regular_file(dir / "metadata.json", ec)) return dir;
  if (fs::is_regular_file(dir / "latest", ec)) {
    std::string name;
    std::ifstream(dir / "latest") >> name;
    return name.empty() ? fs::path() : dir / name;
  }
  if (depth == 0 && fs::is_directory(dir / "checkpoints", ec)) return locate_checkpoint(dir / "checkpoints", 1);
  return {};
}

// Resuming (mode=pretrain with checkpoint.load) under a different LR schedule than the checkpoint
// trained with: the schedule is recomputed from this plan, so a new trainer.max_steps silently
// moves the cosine horizon. Say which keys changed it and how to keep the old one.
void warn_schedule_change(ResolveContext& ctx, const fs::path& ckpt) {
  const plan::Plan& p = ctx.plan();
  toml::table saved;
  try {
    saved = toml::parse_file((ckpt / "plan.toml").string());
  } catch (const std::exception&) {
    return;  // no saved plan (an imported checkpoint): nothing to compare
  }
  std::vector<std::string> changes;
  auto compare = [&](const char* key, const auto& now, const std::string& now_text) {
    using T = std::decay_t<decltype(now)>;
    const auto node = saved.at_path(key);
    if (!node) return;
    std::optional<T> was;
    std::string was_text;
    if constexpr (std::is_same_v<T, std::string>) {
      if (auto v = node.value<std::string>()) was = *v, was_text = "\"" + *v + "\"";
    } else if constexpr (std::is_same_v<T, double>) {
      if (auto v = node.value<double>()) was = *v, was_text = fmt_double(*v);
    } else {
      if (auto v = node.value<int64_t>()) was = static_cast<T>(*v), was_text = std::to_string(*v);
    }
    if (was && *was != now) changes.push_back(std::string(key) + " " + was_text + " → " + now_text);
  };
  compare("trainer.max_steps", p.trainer.max_steps, std::to_string(p.trainer.max_steps));
  compare("schedule.decay_steps", p.schedule.decay_steps, std::to_string(p.schedule.decay_steps));
  compare("schedule.warmup_steps", p.schedule.warmup_steps, std::to_string(p.schedule.warmup_steps));
  const std::string style(plan::to_string(p.schedule.decay_style));
  compare("schedule.decay_style", style, "\"" + style + "\"");
  compare("optimizer.lr", p.optimizer.lr, fmt_double(p.optimizer.lr));
  compare("optimizer.min_lr", p.optimizer.min_lr, fmt_double(p.optimizer.min_lr));
  const bool shape_changed = std::any_of(changes.begin(), changes.end(),
                                         [](const std::string& c) { return !c.starts_with("trainer.max_steps"); });
  if (!shape_changed) return;  // more steps at the end of an unchanged schedule: nothing moves
  std::string text = "resuming " + ckpt.string() + " under a different learning-rate schedule: ";
  for (size_t i = 0; i < changes.size(); ++i) text += (i ? ", " : "") + changes[i];
  const auto old_decay = saved.at_path("schedule.decay_steps").value<int64_t>();
  text += "; the lr from the checkpoint's step on follows the new schedule";
  if (old_decay && *old_decay != p.schedule.decay_steps)
    text += " (set schedule.decay_steps=" + std::to_string(*old_decay) + " to keep the old horizon)";
  ctx.warn(text);
}

void check_checkpoint_load(ResolveContext& ctx) {
  const std::string& load = ctx.plan().checkpoint.load;
  if (load.empty()) return;
  const std::string fix =
      "point checkpoint.load at a checkpoint (step-<N>/), a checkpoints directory, or a run dir that saved one";
  std::error_code ec;
  std::string why;
  if (!fs::exists(load, ec))
    why = "does not exist";
  else if (!fs::is_directory(load, ec))
    why = "is a file, not a directory";
  else if (!holds_checkpoint(load))
    why = "holds no checkpoint (no metadata.json, no `latest`, no step-<N>/metadata.json, no checkpoints/)";
  if (!why.empty()) {
    ctx.violation("checkpoint.load", "checkpoint.load=\"" + load + "\" " + why, fix);
    return;
  }
  const fs::path ckpt = locate_checkpoint(load);
  if (ckpt.empty()) return;  // a checkpoints dir without `latest`: the core picks and checks it
  check_checkpoint_shapes(ctx, ckpt, load);
  if (ctx.plan().mode == plan::Mode::pretrain) warn_schedule_change(ctx, ckpt);
}

std::string absolute(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

}  // namespace

// executor.hostfile: mpirun reads it on this host when the mpi executor launches; a missing one
// surfaced only as an Open MPI internal error in logs/launcher.log.
void check_hostfile(ResolveContext& ctx) {
  const plan::ExecutorConfig& ex = ctx.plan().executor;
  if (ex.kind != plan::ExecutorKind::mpi || ex.hostfile.empty() || ctx.facts.planning) return;
  std::error_code ec;
  if (!fs::is_regular_file(ex.hostfile, ec))
    ctx.violation(
        "executor.hostfile",
        "executor.hostfile=\"" + ex.hostfile + "\" " + (fs::exists(ex.hostfile, ec) ? "is not a file" : "not found"),
        "give the Open MPI hostfile (one `host slots=N` line per node), or leave the key out to run on "
        "this host");
}

// Validation on by default (its interval not set, check_datasets kept it on) with
// trainer.eval_iters=0 and no eval_samples would read no sample at every validation
// (check_ranges covers an interval that was set).
void check_default_validation(ResolveContext& ctx) {
  const plan::TrainerConfig& t = ctx.plan().trainer;
  if (ctx.eval_auto && t.eval_interval > 0 && t.eval_samples == 0 && t.eval_iters < 1)
    ctx.violation("trainer.eval_iters",
                  "trainer.eval_iters=" + std::to_string(t.eval_iters) +
                      " gives each validation no sample, and validation is on (trainer.eval_interval is not set: " +
                      std::to_string(t.eval_interval) + " where the data has a validation split)",
                  "set trainer.eval_interval=0 to turn validation off, or trainer.eval_iters ≥ 1");
}

void check_files(ResolveContext& ctx) {
  check_datasets(ctx);
  check_default_validation(ctx);
  check_tokenizer(ctx);
  check_checkpoint_load(ctx);
  check_hostfile(ctx);

  // Relative paths are relative to the directory the plan was resolved in; resolved.toml keeps them
  // absolute so `recipe runs resume` and the workers find the same files from anywhere.
  plan::Plan& p = ctx.plan();
  p.data.path = absolute(p.data.path);
  for (auto& entry : p.data.blend) entry.second = absolute(entry.second);
  p.data.vocab_file = absolute(p.data.vocab_file);
  p.data.merges_file = absolute(p.data.merges_file);
  p.data.tokenizer_model = absolute(p.data.tokenizer_model);
  p.checkpoint.load = absolute(p.checkpoint.load);
  p.executor.hostfile = absolute(p.executor.hostfile);
}

}  // namespace recipe::dsl::detail
