#include "core/data/prepare.hpp"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>

#include "core/data/indexed_dataset.hpp"
#include "core/data/remove_on_signal.hpp"
#include "core/data/tokenizer.hpp"

namespace recipe::data {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_blank(const std::string& line) { return line.find_first_not_of(" \t\r\f\v") == std::string::npos; }

using DocumentSink = std::function<void(const std::string&)>;

void read_text(const std::string& path, bool split_paragraphs, const DocumentSink& sink) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open input");
  if (!split_paragraphs) {
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (!text.empty()) sink(text);
    return;
  }
  std::string paragraph, line;
  while (std::getline(in, line)) {
    if (is_blank(line)) {
      if (!paragraph.empty()) sink(paragraph);
      paragraph.clear();
      continue;
    }
    if (!paragraph.empty()) paragraph.push_back('\n');
    paragraph += line;
  }
  if (!paragraph.empty()) sink(paragraph);
}

void read_jsonl(const std::string& path, const std::string& key, const DocumentSink& sink) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open input");
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (is_blank(line)) continue;
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw std::runtime_error(where + "not valid JSON (" + e.what() + ")");
    }
    if (!j.is_object()) throw std::runtime_error(where + "expected a JSON object with a \"" + key + "\" field");
    auto it = j.find(key);
    if (it == j.end()) throw std::runtime_error(where + "no \"" + key + "\" field (choose the field with --json-key)");
    if (!it->is_string()) throw std::runtime_error(where + "field \"" + key + "\" is not a string");
    const std::string& text = it->get_ref<const std::string&>();
    if (!text.empty()) sink(text);
  }
}

}  // namespace

PrepareStats prepare_dataset(const PrepareOptions& opts) {
  if (opts.inputs.empty()) throw std::runtime_error("data prepare: no input files (give --input FILE, .txt or .jsonl)");
  if (opts.output_prefix.empty()) throw std::runtime_error("data prepare: no output prefix (give --output PREFIX)");
  if (opts.format == "chat") return prepare_chat_dataset(opts);
  if (opts.format != "text")
    throw std::runtime_error("data prepare: --format " + opts.format + " is not a format; use text or chat");
  for (const auto& input : opts.inputs) {
    // Plain text comes in many spellings (.txt, .md, .rst, ...); anything else is a mistake worth naming.
    const bool text =
        ends_with(input, ".txt") || ends_with(input, ".md") || ends_with(input, ".rst") || ends_with(input, ".text");
    if (!text && !ends_with(input, ".jsonl"))
      throw std::runtime_error(input +
                               ": unsupported input type; use plain text (.txt, .md, .rst, .text) or .jsonl (one "
                               "JSON object per line)");
    if (!fs::exists(input)) throw std::runtime_error(input + ": input file not found");
  }
  const auto tokenizer =
      make_tokenizer(opts.tokenizer, opts.vocab_file, opts.merges_file, opts.tokenizer_model, opts.eod_token);

  const fs::path prefix(opts.output_prefix);
  if (prefix.has_parent_path()) fs::create_directories(prefix.parent_path());
  const std::string bin_final = bin_path_of(opts.output_prefix), idx_final = idx_path_of(opts.output_prefix);
  const std::string tmp_suffix = ".tmp-" + std::to_string(::getpid());
  const std::string bin_tmp = bin_final + tmp_suffix, idx_tmp = idx_final + tmp_suffix;

  PrepareStats stats;
  stats.vocab_size = tokenizer->vocab_size();
  const RemoveOnSignal cleanup({bin_tmp, idx_tmp});  // Ctrl-C must not leave them behind either
  try {
    IndexedDatasetWriter writer(bin_tmp, idx_tmp, token_dtype_for_vocab(stats.vocab_size));
    const DocumentSink add = [&](const std::string& text) {
      std::vector<int32_t> ids = tokenizer->encode(text);
      if (opts.append_eod) ids.push_back(tokenizer->eod_id());
      if (ids.empty()) return;
      writer.add_document(ids);
    };
    for (const auto& input : opts.inputs) {
      if (ends_with(input, ".jsonl"))
        read_jsonl(input, opts.json_key, add);
      else
        read_text(input, opts.split_paragraphs, add);
    }
    if (writer.documents() == 0)
      throw std::runtime_error("data prepare: the inputs hold no text; nothing to write to " + opts.output_prefix);
    stats.documents = writer.documents();
    stats.tokens = writer.tokens();
    writer.finish();
    // .bin first: a reader that finds the new .idx always finds the .bin it describes.
    fs::rename(bin_tmp, bin_final);
    fs::rename(idx_tmp, idx_final);
  } catch (...) {
    std::error_code ec;
    fs::remove(bin_tmp, ec);
    fs::remove(idx_tmp, ec);
    throw;
  }
  return stats;
}

}  // namespace recipe::data
