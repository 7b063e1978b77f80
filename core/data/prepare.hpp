// `recipe data prepare`: text or JSONL → tokenized Megatron indexed dataset (<prefix>.bin/.idx);
// with format "chat", conversations → .bin/.idx plus the loss mask <prefix>.mask.bin (sft_prepare.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/data/chat_template.hpp"

namespace recipe::data {

struct PrepareOptions {
  // .txt: the whole file is one document, or with split_paragraphs each blank-line-separated
  // paragraph is one; .jsonl: one JSON object per line, the document is its json_key string.
  std::vector<std::string> inputs;
  std::string json_key = "text";
  std::string tokenizer = "byte";                        // "byte" | "gpt2_bpe" | "sentencepiece" | "hf"
  std::string vocab_file, merges_file, tokenizer_model;  // tokenizer_model: sentencepiece .model or hf tokenizer.json
  std::string eod_token;                                 // hf: the token ending a document (empty: by rule)
  std::string output_prefix;                             // writes <prefix>.bin and <prefix>.idx
  bool append_eod = true;
  bool split_paragraphs = false;
  // "text": documents as above. "chat": .jsonl only, each line {"messages": [{"role", "content"}, ...]}
  // or {"prompt", "completion"}; one document per conversation rendered with chat_template
  // (core/data/chat_template.hpp), plus <prefix>.mask.bin (append_eod and json_key do not apply).
  std::string format = "text";
  std::string chat_template = "plain";  // chat: "llama3" | "chatml" | "plain"
};

struct PrepareStats {
  int64_t documents = 0, tokens = 0;  // tokens include the appended end-of-document ids
  int vocab_size = 0;
  int64_t trained_tokens = 0;  // chat: tokens whose mask byte is 1
};

// Tokenizes every input in order and writes <prefix>.bin/.idx (uint16 tokens when the vocabulary is
// below 65500, else int32). Both files are written under temporary names and renamed into place only
// when complete, so a failed run never leaves a half-written dataset. Empty documents are skipped.
// Throws std::runtime_error with an actionable message (bad JSONL lines as "file:line: ...").
PrepareStats prepare_dataset(const PrepareOptions& opts);

// The "chat" format (called by prepare_dataset): writes <prefix>.bin/.idx/.mask.bin, all three under
// temporary names renamed into place when complete. Errors name "file:line" and the field.
PrepareStats prepare_chat_dataset(const PrepareOptions& opts);

// One chat JSON object → its conversation (data prepare's lines, and `recipe generate --messages`):
//   {"messages": [{"role", "content"}, ...]}                    roles system | user | assistant
//   {"conversations": [{"from", "value"}, ...]}                 ShareGPT: from system | human | gpt
//                                                               (user and assistant also read)
//   {"instruction", "input" (optional), "output"}               Alpaca: user = instruction, then
//                                                               "\n\n" and input when not empty;
//                                                               assistant = output
//   {"prompt", "completion"}                                    a pair (Conversation::prompt_completion)
// `where` prefixes every error ("file:line: "); throws std::runtime_error naming the field and the
// expected form.
Conversation conversation_of(const nlohmann::json& j, const std::string& where);

}  // namespace recipe::data
