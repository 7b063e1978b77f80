// Rendering conversations with the built-in chat templates (see chat_template.hpp).
#include "core/data/chat_template.hpp"

#include <span>
#include <stdexcept>

#include "core/data/unicode.hpp"

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

Conversation prompt_completion_conversation(const std::string& prompt, const std::string& completion) {
  return {prompt_completion_messages(prompt, completion), true};
}

namespace {

// Jinja's `trim` (Python's str.strip()): leading and trailing white space (the Unicode White_Space
// property, which Python's isspace also holds for the ASCII separators U+001C..U+001F) removed.
std::string trim(const std::string& s) {
  const auto cps = decode_utf8(s);
  const auto space = [](uint32_t cp) { return is_whitespace(cp) || (cp >= 0x1C && cp <= 0x1F); };
  size_t b = 0, e = cps.size();
  while (b < e && space(cps[b].cp)) ++b;
  while (e > b && space(cps[e - 1].cp)) --e;
  if (b == e) return {};
  return s.substr(cps[b].begin, cps[e - 1].begin + cps[e - 1].len - cps[b].begin);
}

const char* plain_marker(const std::string& role) {
  if (role == "user") return "User: ";
  if (role == "assistant") return "Assistant: ";
  return "";  // system: its content alone
}

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
        const std::string content = trim(m.content);
        if (!content.empty()) out.push_back(text(content, trained));
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
      // "\n\n" between messages; the caller ends the last one (EOD, or the assistant's marker).
      for (size_t i = 0; i < messages.size(); ++i) {
        const auto& m = messages[i];
        if (i > 0) out.push_back(text("\n\n"));
        if (*plain_marker(m.role) != '\0') out.push_back(text(plain_marker(m.role)));
        if (!m.content.empty()) out.push_back(text(m.content, m.role == "assistant"));
      }
      break;
  }
}

}  // namespace

std::vector<TemplatePiece> render_conversation(ChatTemplate t, const Conversation& conversation) {
  if (!conversation.prompt_completion || t != ChatTemplate::plain) return render_chat(t, conversation.messages);
  check_roles(conversation.messages);
  std::vector<TemplatePiece> out;
  for (const auto& m : conversation.messages)
    if (!m.content.empty()) out.push_back(text(m.content, m.role == "assistant"));
  out.push_back({Kind::eod, "", true});
  return out;
}

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
      out.push_back(text("\n\n"));
      out.push_back(text(plain_marker("assistant")));
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

namespace {

void append(TokenizedSample& out, const std::vector<int32_t>& ids, bool trained) {
  out.ids.insert(out.ids.end(), ids.begin(), ids.end());
  out.mask.insert(out.mask.end(), ids.size(), trained ? uint8_t{1} : uint8_t{0});
}

// A stretch of text pieces between two special tokens, encoded as one string (header comment).
void append_text_run(TokenizedSample& out, std::span<const TemplatePiece> run, const Tokenizer& tokenizer) {
  if (run.empty()) return;
  std::string joined;
  std::vector<uint8_t> byte_trained;  // per byte of `joined`
  bool mixed = false;
  // Each piece normalized as the tokenizer will (NFC for Qwen2's), so the bytes the tokens spell
  // line up with the pieces' (a piece starting with a combining mark, which NFC could join to the
  // piece before, is the one case where they may not).
  for (const auto& p : run) {
    const std::string value = tokenizer.normalize(p.value);
    joined += value;
    byte_trained.insert(byte_trained.end(), value.size(), p.trained ? uint8_t{1} : uint8_t{0});
    mixed = mixed || p.trained != run.front().trained;
  }
  if (!mixed) return append(out, tokenizer.encode(joined), run.front().trained);
  if (!tokenizer.decodes_exactly()) {
    for (const auto& p : run) append(out, tokenizer.encode(p.value), p.trained);
    return;
  }
  const std::vector<int32_t> ids = tokenizer.encode(joined);
  std::vector<size_t> ends(ids.size());
  size_t total = 0;
  for (size_t k = 0; k < ids.size(); ++k) ends[k] = total += tokenizer.decode(std::span(&ids[k], 1)).size();
  // A tokenizer that adds a prefix space spells one byte more than the text: the text is the last
  // `joined.size()` bytes of what the tokens spell.
  const size_t shift = total > joined.size() ? total - joined.size() : 0;
  size_t begin = 0;
  for (size_t k = 0; k < ids.size(); ++k) {
    const size_t b = begin > shift ? begin - shift : 0, e = ends[k] > shift ? ends[k] - shift : 0;
    bool trained = false;
    for (size_t i = b; i < e && i < byte_trained.size() && !trained; ++i) trained = byte_trained[i] != 0;
    out.ids.push_back(ids[k]);
    out.mask.push_back(trained ? 1 : 0);
    begin = ends[k];
  }
}

}  // namespace

TokenizedSample tokenize_pieces(const std::vector<TemplatePiece>& pieces, const Tokenizer& tokenizer) {
  TokenizedSample out;
  size_t run_begin = 0;
  for (size_t i = 0; i <= pieces.size(); ++i) {
    if (i < pieces.size() && pieces[i].kind == Kind::text) continue;
    append_text_run(out, std::span(pieces).subspan(run_begin, i - run_begin), tokenizer);
    run_begin = i + 1;
    if (i == pieces.size()) break;
    const auto& p = pieces[i];
    if (p.kind == Kind::eod) {
      append(out, {tokenizer.eod_id()}, p.trained);
      continue;
    }
    const auto id = tokenizer.special_id(p.value);
    if (!id)
      throw std::runtime_error("the " + tokenizer.name() + " tokenizer has no special token " + p.value +
                               ", which this chat template needs; use a tokenizer that defines it (the model's "
                               "tokenizer.json) or --chat-template plain, which works with every tokenizer");
    append(out, {*id}, p.trained);
  }
  return out;
}

}  // namespace recipe::data
