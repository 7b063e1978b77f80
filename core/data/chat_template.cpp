// Rendering conversations with the built-in chat templates (see chat_template.hpp).
#include "core/data/chat_template.hpp"

#include <stdexcept>

namespace recipe::data {

namespace {

using Kind = TemplatePiece::Kind;

TemplatePiece text(std::string s, bool trained = false) { return {Kind::text, std::move(s), trained}; }
TemplatePiece special(std::string name, bool trained = false) { return {Kind::special, std::move(name), trained}; }

void check_roles(const std::vector<ChatMessage>& messages) {
  bool assistant = false;
  for (const auto& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      throw std::invalid_argument("message role \"" + m.role + "\" is not one of system, user, assistant");
    assistant = assistant || m.role == "assistant";
  }
  if (!assistant)
    throw std::invalid_argument("the conversation has no assistant message, so nothing in it would be trained");
}

}  // namespace

const char* chat_template_name(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::llama3:
      return "llama3";
    case ChatTemplate::chatml:
      return "chatml";
    case ChatTemplate::plain:
      return "plain";
  }
  return "?";
}

std::optional<ChatTemplate> parse_chat_template(const std::string& name) {
  for (ChatTemplate t : {ChatTemplate::llama3, ChatTemplate::chatml, ChatTemplate::plain})
    if (name == chat_template_name(t)) return t;
  return std::nullopt;
}

const char* chat_template_names() { return "llama3, chatml or plain"; }

std::vector<ChatMessage> prompt_completion_messages(const std::string& prompt, const std::string& completion) {
  return {{"user", prompt}, {"assistant", completion}};
}

namespace {

// The messages as the template writes them (llama3's <|begin_of_text|> first); the caller adds
// what ends the conversation (plain: EOD) or continues it (the assistant's header).
void render_messages(ChatTemplate t, const std::vector<ChatMessage>& messages, std::vector<TemplatePiece>& out) {
  switch (t) {
    case ChatTemplate::llama3:
      out.push_back(special("<|begin_of_text|>"));
      for (const auto& m : messages) {
        const bool trained = m.role == "assistant";
        out.push_back(special("<|start_header_id|>"));
        out.push_back(text(m.role));
        out.push_back(special("<|end_header_id|>"));
        out.push_back(text("\n\n"));
        if (!m.content.empty()) out.push_back(text(m.content, trained));
        out.push_back(special("<|eot_id|>", trained));
      }
      break;
    case ChatTemplate::chatml:
      for (const auto& m : messages) {
        const bool trained = m.role == "assistant";
        out.push_back(special("<|im_start|>"));
        out.push_back(text(m.role + "\n"));
        if (!m.content.empty()) out.push_back(text(m.content, trained));
        out.push_back(special("<|im_end|>", trained));
        out.push_back(text("\n"));
      }
      break;
    case ChatTemplate::plain:
      for (const auto& m : messages)
        if (!m.content.empty()) out.push_back(text(m.content, m.role == "assistant"));
      break;
  }
}

}  // namespace

std::vector<TemplatePiece> render_chat(ChatTemplate t, const std::vector<ChatMessage>& messages) {
  check_roles(messages);
  std::vector<TemplatePiece> out;
  render_messages(t, messages, out);
  if (t == ChatTemplate::plain) out.push_back({Kind::eod, "", true});
  return out;
}

std::vector<TemplatePiece> render_chat_prompt(ChatTemplate t, const std::vector<ChatMessage>& messages) {
  for (const auto& m : messages)
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      throw std::invalid_argument("message role \"" + m.role + "\" is not one of system, user, assistant");
  if (messages.empty()) throw std::invalid_argument("the conversation has no messages");
  std::vector<TemplatePiece> out;
  render_messages(t, messages, out);
  switch (t) {
    case ChatTemplate::llama3:
      out.push_back(special("<|start_header_id|>"));
      out.push_back(text("assistant"));
      out.push_back(special("<|end_header_id|>"));
      out.push_back(text("\n\n"));
      break;
    case ChatTemplate::chatml:
      out.push_back(special("<|im_start|>"));
      out.push_back(text("assistant\n"));
      break;
    case ChatTemplate::plain:
      break;
  }
  return out;
}

TemplatePiece end_of_turn(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::llama3:
      return special("<|eot_id|>", true);
    case ChatTemplate::chatml:
      return special("<|im_end|>", true);
    case ChatTemplate::plain:
      break;
  }
  return {Kind::eod, "", true};
}

TokenizedSample tokenize_pieces(const std::vector<TemplatePiece>& pieces, const Tokenizer& tokenizer) {
  TokenizedSample out;
  for (const auto& p : pieces) {
    std::vector<int32_t> ids;
    switch (p.kind) {
      case Kind::text:
        ids = tokenizer.encode(p.value);
        break;
      case Kind::special: {
        const auto id = tokenizer.special_id(p.value);
        if (!id)
          throw std::runtime_error("the " + tokenizer.name() + " tokenizer has no special token " + p.value +
                                   ", which this chat template needs; use a tokenizer that defines it (the model's "
                                   "tokenizer.json) or --chat-template plain, which works with every tokenizer");
        ids.push_back(*id);
        break;
      }
      case Kind::eod:
        ids.push_back(tokenizer.eod_id());
        break;
    }
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.mask.insert(out.mask.end(), ids.size(), p.trained ? uint8_t{1} : uint8_t{0});
  }
  return out;
}

}  // namespace recipe::data
