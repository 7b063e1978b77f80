// `recipe generate <checkpoint | run dir>`: text from a trained model. The checkpoint's plan gives
// the model and the tokenizer (data.tokenizer and its files; flags and key=value overrides may
// replace them); the prompt is --prompt text or --messages (a conversation rendered with the chat
// template plus the assistant's header). Generation runs on one process (core/generate): the
// prompt in one forward, then one token per step over a KV cache, until the tokenizer's end of
// document, the template's end of turn or --max-new-tokens. The text streams to stdout; the token
// counts and speeds go to stderr.
#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.hpp"
#include "cli/checkpoint_verb.hpp"
#include "cli/verbs.hpp"
#include "core/data/chat_template.hpp"
#include "core/data/prepare.hpp"
#include "core/data/tokenizer.hpp"
#include "core/data/unicode.hpp"
#include "core/generate/generator.hpp"
#include "plan/exit_codes.hpp"

namespace fs = std::filesystem;

namespace recipe::cli {

namespace {

constexpr int64_t kDefaultNewTokens = 128;

// The checkpoint's plan.toml with the overrides (the tokenizer flags are overrides of data.*
// keys), resolved for planning; nullopt after printing why. Only what generation reads must be
// valid: the model, its adapters and the tokenizer keys (a data path that no longer exists, or a
// batch for another cluster, does not matter here).
std::optional<plan::Plan> generate_plan(const std::string& dir, const GenerateArgs& a, std::ostream& err) {
  std::vector<std::string> overrides = a.overrides;
  const std::pair<const std::string*, const char*> flags[] = {{&a.tokenizer, "data.tokenizer"},
                                                              {&a.tokenizer_model, "data.tokenizer_model"},
                                                              {&a.vocab_file, "data.vocab_file"},
                                                              {&a.merges_file, "data.merges_file"},
                                                              {&a.eod_token, "data.eod_token"}};
  for (const auto& [value, key] : flags)
    if (!value->empty()) overrides.push_back(std::string(key) + "=" + *value);
  return checkpoint_plan(
      dir, overrides,
      [](const std::string& key) {
        return key.rfind("model.", 0) == 0 || key.rfind("peft.", 0) == 0 || key.rfind("data.tokenizer", 0) == 0 ||
               key == "data.vocab_file" || key == "data.merges_file" || key == "data.eod_token";
      },
      "the model is unknown (a checkpoint written by `recipe pretrain`/`finetune` or `recipe ckpt import` has it)",
      err);
}

std::unique_ptr<data::Tokenizer> plan_tokenizer(const plan::DataConfig& d) {
  return data::make_tokenizer(std::string(plan::to_string(d.tokenizer)), d.vocab_file, d.merges_file, d.tokenizer_model,
                              d.eod_token);
}

// --messages: a .json file holding [{"role", "content"}, ...] or {"messages": [...]}, or a .jsonl
// file with one message object per line (or one line {"messages": [...]}).
data::Conversation read_conversation(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--messages " + path + ": cannot open the file");
  auto as_conversation = [](nlohmann::json j) {
    if (j.is_array()) j = nlohmann::json{{"messages", std::move(j)}};
    return j;
  };
  if (fs::path(path).extension() == ".jsonl") {
    nlohmann::json lines = nlohmann::json::array();
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      try {
        lines.push_back(nlohmann::json::parse(line));
      } catch (const nlohmann::json::exception& e) {
        throw std::invalid_argument(path + ":" + std::to_string(n) + ": not JSON (" + e.what() + ")");
      }
    }
    if (lines.size() == 1 && lines[0].is_object() && lines[0].contains("messages"))
      return data::conversation_of(lines[0], path + ":1: ");
    return data::conversation_of(as_conversation(std::move(lines)), path + ": ");
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(path + ": not JSON (" + e.what() + ")");
  }
  return data::conversation_of(as_conversation(std::move(j)), path + ": ");
}

std::vector<data::ChatMessage> read_messages(const std::string& path) { return read_conversation(path).messages; }

// What a terminal can show: `s` with every invalid UTF-8 byte replaced by U+FFFD (a model can emit
// any byte sequence, and a byte-level token may hold part of a character).
std::string printable(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const auto& c : data::decode_utf8(s)) {
    if (c.cp == 0xFFFD)
      data::append_utf8(out, c.cp);
    else
      out.append(s, c.begin, c.len);
  }
  return out;
}

// The end-of-sequence ids of the model's generation_config.json (Hugging Face's `generate` stops at
// each: Llama 3.1 lists <|end_of_text|>, <|eom_id|> and <|eot_id|>), read from the folder of the
// plan's tokenizer.json, where `recipe ckpt import` copies it. Empty without one. Throws
// std::invalid_argument naming the file when it is not JSON or its eos_token_id is not an id or a
// list of ids.
std::vector<int32_t> generation_config_eos(const plan::DataConfig& d) {
  if (d.tokenizer != plan::Tokenizer::hf || d.tokenizer_model.empty()) return {};
  const fs::path path = fs::path(d.tokenizer_model).parent_path() / "generation_config.json";
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return {};
  std::ifstream in(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(path.string() + ": not JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("eos_token_id") || j["eos_token_id"].is_null()) return {};
  const nlohmann::json& eos = j["eos_token_id"];
  std::vector<int32_t> ids;
  for (const nlohmann::json& v : eos.is_array() ? eos : nlohmann::json::array({eos})) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      throw std::invalid_argument(path.string() + ": eos_token_id is " + eos.dump() +
                                  ", not a token id or a list of them");
    ids.push_back(int32_t(v.get<int64_t>()));
  }
  return ids;
}

// The length of the longest prefix of `s` that does not end inside a UTF-8 sequence (streamed text
// holds back a character whose bytes are still to come).
size_t complete_utf8(const std::string& s) {
  size_t i = s.size(), back = 0;
  while (i > 0 && back < 4 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i, ++back;
  if (i == 0) return s.size();
  const auto lead = static_cast<unsigned char>(s[i - 1]);
  const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return back + 1 >= need ? s.size() : i - 1;
}

std::string rate(double tokens, double seconds) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << (seconds > 0 ? tokens / seconds : 0.0) << " tok/s";
  return s.str();
}

}  // namespace

CLI::App* add_generate_verb(CLI::App& app, GenerateArgs& a) {
  a.cmd = app.add_subcommand("generate", "Generate text from a checkpoint (base, LoRA fine-tune or imported)");
  a.cmd->add_option("path", a.path, "A checkpoint (step-<N>/), checkpoints directory or run directory")->required();
  a.cmd->add_option("overrides", a.overrides,
                    "key=value overrides of the checkpoint's plan (e.g. data.tokenizer=byte)");
  a.prompt_opt = a.cmd->add_option("-p,--prompt", a.prompt, "The text to continue");
  CLI::Option* messages =
      a.cmd->add_option("--messages", a.messages_file,
                        "A conversation to answer: .json ([{role, content}, ...] or {messages: [...]}) or .jsonl (one "
                        "message per line), rendered with the chat template");
  a.prompt_opt->excludes(messages);
  a.cmd
      ->add_option("-n,--max-new-tokens", a.max_new_tokens,
                   "Most tokens to generate (default 128, or what the model's positions leave)")
      ->check(CLI::NonNegativeNumber);
  a.cmd->add_option("--temperature", a.temperature, "0 = greedy (default); > 0 samples")->check(CLI::NonNegativeNumber);
  a.cmd->add_option("--top-k", a.top_k, "Sample from the k most likely tokens (0 = all)")
      ->check(CLI::NonNegativeNumber);
  a.cmd->add_option("--top-p", a.top_p, "Sample from the smallest set holding this probability (0, 1]")
      ->check(CLI::Range(0.0, 1.0));
  a.cmd->add_option("--seed", a.seed, "Seed of the sampling (the same seed gives the same text)");
  a.cmd->add_option("--device", a.device, "auto (a GPU when one is usable), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  a.cmd
      ->add_option("--tokenizer", a.tokenizer,
                   "byte, gpt2_bpe, sentencepiece or hf (default: the plan's data.tokenizer)")
      ->check(CLI::IsMember({"byte", "gpt2_bpe", "sentencepiece", "hf"}));
  a.cmd->add_option("--tokenizer-model", a.tokenizer_model, "sentencepiece: .model file; hf: tokenizer.json");
  a.cmd->add_option("--vocab-file", a.vocab_file, "gpt2_bpe: vocab.json");
  a.cmd->add_option("--merges-file", a.merges_file, "gpt2_bpe: merges.txt");
  a.cmd->add_option("--eod-token", a.eod_token, "hf: the token ending a document");
  a.cmd
      ->add_option("--chat-template", a.chat_template,
                   "--messages: llama3, chatml or plain (default: the plan's data.chat_template)")
      ->check(CLI::IsMember({"llama3", "chatml", "plain"}));
  a.cmd->footer(kExitCodeHelp);
  return a.cmd;
}

int run_generate(const GenerateArgs& a, std::ostream& out, std::ostream& err) {
  if (!a.prompt_given && a.messages_file.empty()) {
    err << "error: give the text to continue with --prompt \"...\", or a conversation with --messages FILE\n";
    return kExitUsage;
  }
  int code = kExitOk;
  const std::string dir = checkpoint_for_verb(a.path, a.overrides, err, code);
  if (dir.empty()) return code;
  const auto plan = generate_plan(dir, a, err);
  if (!plan) return kExitInvalidRecipe;
  if (plan->data.tokenizer == plan::Tokenizer::none) {
    err << "error: the checkpoint's plan names no tokenizer (data.tokenizer=none), so text cannot become ids\n"
        << "  fix: --tokenizer byte, or --tokenizer hf --tokenizer-model tokenizer.json (gpt2_bpe: --vocab-file and "
           "--merges-file; sentencepiece: --tokenizer-model)\n";
    return kExitUsage;
  }

  // Text → prompt ids, and the ids that end the answer.
  std::unique_ptr<data::Tokenizer> tokenizer;
  std::vector<int32_t> prompt;
  std::vector<int32_t> stop_ids;
  try {
    tokenizer = plan_tokenizer(plan->data);
    if (tokenizer->vocab_size() > plan->model.vocab_size) {
      err << "error: the " << tokenizer->name() << " tokenizer has " << tokenizer->vocab_size()
          << " ids but the model only model.vocab_size=" << plan->model.vocab_size
          << ": use the tokenizer the model was trained with\n";
      return kExitUsage;
    }
    stop_ids.push_back(tokenizer->eod_id());
    for (int32_t id : generation_config_eos(plan->data))
      if (std::find(stop_ids.begin(), stop_ids.end(), id) == stop_ids.end()) stop_ids.push_back(id);
    if (!a.messages_file.empty()) {
      const std::string name =
          !a.chat_template.empty() ? a.chat_template : std::string(plan::to_string(plan->data.chat_template));
      const auto tmpl = data::parse_chat_template(name);
      if (!tmpl) {
        err << "error: --messages needs a chat template and the checkpoint's plan has data.chat_template=" << name
            << "\n  fix: --chat-template " << data::chat_template_names() << "\n";
        return kExitUsage;
      }
      prompt = data::tokenize_pieces(data::render_chat_prompt(*tmpl, read_messages(a.messages_file)), *tokenizer).ids;
      const data::TemplatePiece end = data::end_of_turn(*tmpl);
      if (end.kind == data::TemplatePiece::Kind::special)
        if (auto id = tokenizer->special_id(end.value)) stop_ids.push_back(*id);
    } else {
      if (auto bos = tokenizer->bos_id()) prompt.push_back(*bos);
      const std::vector<int32_t> ids = tokenizer->encode(a.prompt);
      prompt.insert(prompt.end(), ids.begin(), ids.end());
      // Nothing to start from: the end of a document is where every document begins.
      if (prompt.empty()) prompt.push_back(tokenizer->eod_id());
    }
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return kExitUsage;
  }
  const int64_t positions = plan->model.max_position_embeddings, room = positions - int64_t(prompt.size());
  const int max_new = a.max_new_tokens >= 0 ? a.max_new_tokens : int(std::clamp<int64_t>(room, 1, kDefaultNewTokens));
  const int64_t needed = int64_t(prompt.size()) + max_new;
  if (needed > positions) {
    err << "error: the prompt (" << prompt.size() << " tokens) plus --max-new-tokens " << max_new << " need " << needed
        << " positions, more than the model's model.max_position_embeddings=" << positions
        << "\n  fix: shorten the prompt or lower --max-new-tokens\n";
    return kExitUsage;
  }

  // The device, as the train verbs choose it.
  const std::optional<bool> gpu = usable_gpu(a.device, err);
  if (!gpu) return kExitEnvironment;
  const kernels::Device device = a.device == "cpu" || !*gpu ? kernels::Device::cpu : kernels::Device::cuda;
  kernels::BackendOptions bo;
  bo.cpu_threads = plan->trainer.cpu_threads;
  bo.workspace_bytes = size_t(plan->kernels.workspace_bytes);
  bo.gemm_tune = false;  // every prefill length is a new GEMM shape: timing them costs more than it saves

  core::GenerateOptions go;
  go.max_new_tokens = max_new;
  go.sampling = {.temperature = a.temperature, .top_k = a.top_k, .top_p = a.top_p, .seed = a.seed};
  go.stop_ids = stop_ids;
  err << "generate: stops at ids";
  for (size_t i = 0; i < stop_ids.size(); ++i) err << (i ? ", " : " ") << stop_ids[i];
  err << "\n";
  core::GenerateResult result;
  std::vector<int32_t> generated;
  std::string printed;
  try {
    std::unique_ptr<kernels::Backend> backend = kernels::make_backend(device, bo);
    core::GenerationModel model(*plan, dir, int(needed), *backend);
    for (const std::string& line : backend->take_notices()) err << line << "\n";
    // Streaming: the decoded text grows token by token; print what is new, holding back a
    // character whose UTF-8 bytes are not all there yet.
    auto on_token = [&](int32_t id) {
      generated.push_back(id);
      const std::string text = tokenizer->decode(generated);
      const size_t upto = complete_utf8(text);
      if (upto > printed.size() && text.compare(0, printed.size(), printed) == 0) {
        out << printable(text.substr(printed.size(), upto - printed.size())) << std::flush;
        printed = text.substr(0, upto);
      }
    };
    result = core::generate(model.decoder(), prompt, go, on_token);
  } catch (const std::invalid_argument& e) {
    err << "error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return kExitRuntime;
  }
  const std::string text = tokenizer->decode(generated);
  if (text.compare(0, printed.size(), printed) == 0) out << printable(text.substr(printed.size()));
  out << "\n";
  out.flush();
  const size_t n = result.tokens.size();
  err << "generate: " << result.prompt_tokens << " prompt tokens, " << n << " new ("
      << (result.stopped ? "stopped at the end token" : "--max-new-tokens reached") << ") on "
      << (device == kernels::Device::cuda ? "cuda" : "cpu") << "; prefill "
      << rate(result.prompt_tokens, result.prefill_seconds) << ", decode "
      << rate(result.decode_steps, result.decode_seconds) << "\n";
  return kExitOk;
}

}  // namespace recipe::cli
