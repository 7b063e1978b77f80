// `recipe data prepare --format chat`: JSONL conversations → <prefix>.bin/.idx + <prefix>.mask.bin.
// Each line is one conversation (one document of the dataset), rendered by the chat template and
// tokenized piece by piece, so special tokens become their single ids and the mask marks exactly
// the assistant/completion tokens.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "core/data/chat_template.hpp"
#include "core/data/indexed_dataset.hpp"
#include "core/data/loss_mask.hpp"
#include "core/data/prepare.hpp"
#include "core/data/remove_on_signal.hpp"
#include "core/data/tokenizer.hpp"

namespace recipe::data {

namespace fs = std::filesystem;

namespace {

bool is_blank(const std::string& line) { return line.find_first_not_of(" \t\r\f\v") == std::string::npos; }

std::string string_field(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) throw std::runtime_error(where + "no \"" + key + "\" field");
  if (!it->is_string()) throw std::runtime_error(where + "field \"" + key + "\" is not a string");
  return it->get<std::string>();
}

}  // namespace

namespace {

// ShareGPT's speaker names and ours.
std::string sharegpt_role(const std::string& from, const std::string& at) {
  if (from == "system") return "system";
  if (from == "human" || from == "user") return "user";
  if (from == "gpt" || from == "assistant") return "assistant";
  throw std::runtime_error(at + "\"from\" is \"" + from +
                           "\"; the engine reads system, human (or user) and gpt (or assistant) turns (tool and "
                           "function turns have no place in its chat templates)");
}

}  // namespace

Conversation conversation_of(const nlohmann::json& j, const std::string& where) {
  const char* expected =
      "expected {\"messages\": [{\"role\": ..., \"content\": ...}, ...]}, {\"conversations\": [{\"from\": ..., "
      "\"value\": ...}, ...]} (ShareGPT), {\"instruction\": ..., \"input\": ..., \"output\": ...} (Alpaca) or "
      "{\"prompt\": ..., \"completion\": ...}";
  if (!j.is_object()) throw std::runtime_error(where + "not a JSON object; " + expected);
  const auto list = [&](const char* key, const char* role_key, const char* content_key, bool sharegpt) {
    const auto& items = j.at(key);
    if (!items.is_array()) throw std::runtime_error(where + "\"" + key + "\" is not a list; " + expected);
    Conversation c;
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string at = where + key + "[" + std::to_string(i) + "]: ";
      if (!items[i].is_object())
        throw std::runtime_error(at + "not an object with \"" + role_key + "\" and \"" + content_key + "\"");
      std::string role = string_field(items[i], role_key, at);
      if (sharegpt) role = sharegpt_role(role, at);
      c.messages.push_back({std::move(role), string_field(items[i], content_key, at)});
    }
    return c;
  };
  if (j.contains("messages")) return list("messages", "role", "content", false);
  if (j.contains("conversations")) return list("conversations", "from", "value", true);
  if (j.contains("instruction") || j.contains("output")) {
    std::string user = string_field(j, "instruction", where);
    if (j.contains("input")) {
      const std::string input = string_field(j, "input", where);
      if (!input.empty()) user += "\n\n" + input;
    }
    return {{{"user", std::move(user)}, {"assistant", string_field(j, "output", where)}}};
  }
  if (j.contains("prompt") || j.contains("completion"))
    return prompt_completion_conversation(string_field(j, "prompt", where), string_field(j, "completion", where));
  throw std::runtime_error(where +
                           "none of \"messages\", \"conversations\", \"instruction\"/\"output\" or "
                           "\"prompt\"/\"completion\"; " +
                           expected);
}

PrepareStats prepare_chat_dataset(const PrepareOptions& opts) {
  const auto tmpl = parse_chat_template(opts.chat_template);
  if (!tmpl)
    throw std::runtime_error("data prepare: --chat-template " + opts.chat_template + " is not a template; use " +
                             chat_template_names());
  for (const auto& input : opts.inputs) {
    if (fs::path(input).extension() != ".jsonl")
      throw std::runtime_error(input + ": --format chat reads .jsonl (one conversation per line)");
    if (!fs::exists(input)) throw std::runtime_error(input + ": input file not found");
  }
  const auto tokenizer = make_tokenizer(opts.tokenizer, opts.vocab_file, opts.merges_file, opts.tokenizer_model);

  const fs::path prefix(opts.output_prefix);
  if (prefix.has_parent_path()) fs::create_directories(prefix.parent_path());
  const std::string finals[3] = {bin_path_of(opts.output_prefix), idx_path_of(opts.output_prefix),
                                 mask_path_of(opts.output_prefix)};
  const std::string tmp_suffix = ".tmp-" + std::to_string(::getpid());
  std::string tmps[3];
  for (int i = 0; i < 3; ++i) tmps[i] = finals[i] + tmp_suffix;

  PrepareStats stats;
  stats.vocab_size = tokenizer->vocab_size();
  const RemoveOnSignal cleanup({tmps[0], tmps[1], tmps[2]});  // Ctrl-C must not leave them behind either
  try {
    IndexedDatasetWriter writer(tmps[0], tmps[1], token_dtype_for_vocab(stats.vocab_size));
    LossMaskWriter mask(tmps[2], chat_template_name(*tmpl));
    for (const auto& input : opts.inputs) {
      std::ifstream in(input, std::ios::binary);
      if (!in) throw std::runtime_error(input + ": cannot open input");
      std::string line;
      int64_t line_no = 0;
      while (std::getline(in, line)) {
        ++line_no;
        if (is_blank(line)) continue;
        const std::string where = input + ":" + std::to_string(line_no) + ": ";
        nlohmann::json j;
        try {
          j = nlohmann::json::parse(line);
        } catch (const nlohmann::json::parse_error& e) {
          throw std::runtime_error(where + "not valid JSON (" + e.what() + ")");
        }
        TokenizedSample sample;
        try {
          sample = tokenize_pieces(render_conversation(*tmpl, conversation_of(j, where)), *tokenizer);
        } catch (const std::invalid_argument& e) {
          throw std::runtime_error(where + e.what());
        }
        writer.add_document(sample.ids);
        mask.add(sample.mask);
        for (uint8_t m : sample.mask) stats.trained_tokens += m;
      }
    }
    if (writer.documents() == 0)
      throw std::runtime_error("data prepare: the inputs hold no conversations; nothing to write to " +
                               opts.output_prefix);
    stats.documents = writer.documents();
    stats.tokens = writer.tokens();
    writer.finish();
    mask.finish();
    // .bin and the mask first: a reader that finds the new .idx finds the files it describes.
    fs::rename(tmps[0], finals[0]);
    fs::rename(tmps[2], finals[2]);
    fs::rename(tmps[1], finals[1]);
  } catch (...) {
    std::error_code ec;
    for (const auto& t : tmps) fs::remove(t, ec);
    throw;
  }
  return stats;
}

}  // namespace recipe::data
