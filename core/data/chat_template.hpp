// Chat templates for supervised fine-tuning: a conversation (system/user/assistant messages, or a
// prompt/completion pair) rendered as a sequence of pieces, each a text segment (tokenized with the
// tokenizer's encode), a special token named by its literal string (one id, from
// Tokenizer::special_id) or the tokenizer's end-of-document id, with a flag saying whether the
// piece's tokens are trained (contribute to the loss).
//
// Built-in templates (trained pieces marked with *):
//   llama3  <|begin_of_text|> then per message
//           <|start_header_id|> role <|end_header_id|> "\n\n" trim(content)* <|eot_id|>*
//           (content and <|eot_id|> trained for assistant messages only; contents trimmed of
//           leading and trailing white space, as Meta's template's `| trim` does)
//   chatml  per message <|im_start|> "role\n" content* <|im_end|>* "\n"
//           (content and <|im_end|> trained for assistant messages only; the "\n" never)
//   plain   no special tokens, so it works with every tokenizer. Messages: a system content and
//           "\n\n", "User: " content "\n\n", "Assistant: " content* and then "\n\n" before a
//           later message or EOD* at the end. A prompt/completion pair: prompt then completion*
//           then EOD*, back to back (a completion fine-tune: the two texts as written).
//
// Tokenization (tokenize_pieces): the text between two special tokens is encoded as ONE string, so
// the ids are those of the whole rendered conversation (what Hugging Face's apply_chat_template
// gives), not of its pieces one by one: a content that starts with "\n" after the header's "\n\n"
// merges into one "\n\n\n" token there too. A token is trained when any of its bytes is in a
// trained piece (the rule of transformers' assistant-token mask, which marks the tokens from the
// one holding a span's first character to the one holding its last). That needs each token's bytes:
// byte-level tokenizers (byte, gpt2_bpe, hf) give them exactly; with a SentencePiece model, whose
// pieces do not spell their bytes, a stretch mixing trained and untrained text is encoded piece by
// piece instead.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/data/tokenizer.hpp"

namespace recipe::data {

enum class ChatTemplate { llama3, chatml, plain };
const char* chat_template_name(ChatTemplate t);
std::optional<ChatTemplate> parse_chat_template(const std::string& name);  // nullopt: unknown name
const char* chat_template_names();                                         // "llama3, chatml or plain"

struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant"
  std::string content;
};

// One training example: its messages, and whether they came from a {"prompt", "completion"} pair
// (the plain template writes a pair's two texts back to back, without role markers).
struct Conversation {
  std::vector<ChatMessage> messages;
  bool prompt_completion = false;
};

struct TemplatePiece {
  enum class Kind { text, special, eod };
  Kind kind = Kind::text;
  std::string value;  // text: the text; special: the token's literal name; eod: empty
  bool trained = false;
  bool operator==(const TemplatePiece&) const = default;
};

// The pieces of one conversation. Throws std::invalid_argument for a role other than system, user
// or assistant, or a conversation without an assistant message (nothing would be trained).
std::vector<TemplatePiece> render_chat(ChatTemplate t, const std::vector<ChatMessage>& messages);
std::vector<TemplatePiece> render_conversation(ChatTemplate t, const Conversation& conversation);

// Generation: the pieces of a conversation the model is to continue as the assistant: the messages
// (any roles of the three; the last need not be the user's) rendered as render_chat does, then the
// header of the assistant's turn (what Hugging Face's add_generation_prompt adds): llama3
// <|start_header_id|> assistant <|end_header_id|> "\n\n", chatml <|im_start|> "assistant\n", plain
// "Assistant: " (and no EOD). Throws std::invalid_argument for an unknown role or no messages.
std::vector<TemplatePiece> render_chat_prompt(ChatTemplate t, const std::vector<ChatMessage>& messages);
// The piece that ends an assistant turn (generation stops at it): llama3 <|eot_id|>, chatml
// <|im_end|>, plain the end of document.
TemplatePiece end_of_turn(ChatTemplate t);

// A prompt/completion pair is the conversation {user: prompt, assistant: completion}.
std::vector<ChatMessage> prompt_completion_messages(const std::string& prompt, const std::string& completion);
Conversation prompt_completion_conversation(const std::string& prompt, const std::string& completion);

struct TokenizedSample {
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;  // per id: 1 = trained, 0 = not
};

// Token ids of the pieces, with their trained flags. Throws std::runtime_error naming the special
// token, the tokenizer and the template that works with it when the tokenizer lacks a special.
TokenizedSample tokenize_pieces(const std::vector<TemplatePiece>& pieces, const Tokenizer& tokenizer);

}  // namespace recipe::data
