// Chat/instruction data: template rendering (exact pieces and ids), `data prepare --format chat`
// with its loss-mask companion (round trip and validation), and SFT packing (boundaries,
// positions, targets).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>

#include <nlohmann/json.hpp>

#include "core/data/chat_template.hpp"
#include "core/data/indexed_dataset.hpp"
#include "core/data/loss_mask.hpp"
#include "core/data/prepare.hpp"
#include "core/data/sample_source.hpp"
#include "core/data/sft_dataset.hpp"
#include "core/data/tokenizer.hpp"
#include "tests/core/data/temp_dir.hpp"

TEST_SUITE_BEGIN("core/data");

using namespace recipe::data;
using recipe::data::testing::read_file;
using recipe::data::testing::TempDir;
using recipe::data::testing::write_file;
using Kind = TemplatePiece::Kind;

namespace {

// Bytes as ids (like the byte tokenizer) plus named special tokens above 255, standing in for a
// tokenizer.json with added tokens.
class SpecialsTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string s;
    for (int32_t id : ids) s.push_back(static_cast<char>(id));
    return s;
  }
  int vocab_size() const override { return 300; }
  int32_t eod_id() const override { return 299; }
  std::string name() const override { return "specials"; }
  std::optional<int32_t> special_id(const std::string& name) const override {
    static const std::map<std::string, int32_t> ids = {{"<|begin_of_text|>", 256}, {"<|start_header_id|>", 257},
                                                       {"<|end_header_id|>", 258}, {"<|eot_id|>", 259},
                                                       {"<|im_start|>", 260},      {"<|im_end|>", 261}};
    auto it = ids.find(name);
    return it == ids.end() ? std::nullopt : std::optional<int32_t>(it->second);
  }
};

const std::vector<ChatMessage> kConversation = {{"system", "S"}, {"user", "Hi"}, {"assistant", "Yo"}};

std::vector<int32_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

template <class T>
std::vector<T> cat(std::initializer_list<std::vector<T>> parts) {
  std::vector<T> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::vector<uint8_t> flags(size_t n, uint8_t v) { return std::vector<uint8_t>(n, v); }

}  // namespace

TEST_CASE("llama3 template: exact pieces, special tokens as single ids, assistant content and <|eot_id|> trained") {
  const auto pieces = render_chat(ChatTemplate::llama3, kConversation);
  const std::vector<TemplatePiece> expected = {{Kind::special, "<|begin_of_text|>", false},
                                               {Kind::special, "<|start_header_id|>", false},
                                               {Kind::text, "system", false},
                                               {Kind::special, "<|end_header_id|>", false},
                                               {Kind::text, "\n\n", false},
                                               {Kind::text, "S", false},
                                               {Kind::special, "<|eot_id|>", false},
                                               {Kind::special, "<|start_header_id|>", false},
                                               {Kind::text, "user", false},
                                               {Kind::special, "<|end_header_id|>", false},
                                               {Kind::text, "\n\n", false},
                                               {Kind::text, "Hi", false},
                                               {Kind::special, "<|eot_id|>", false},
                                               {Kind::special, "<|start_header_id|>", false},
                                               {Kind::text, "assistant", false},
                                               {Kind::special, "<|end_header_id|>", false},
                                               {Kind::text, "\n\n", false},
                                               {Kind::text, "Yo", true},
                                               {Kind::special, "<|eot_id|>", true}};
  CHECK(pieces == expected);

  const auto s = tokenize_pieces(pieces, SpecialsTokenizer());
  const auto ids = cat<int32_t>({{256, 257},
                                 bytes("system"),
                                 {258},
                                 bytes("\n\nS"),
                                 {259, 257},
                                 bytes("user"),
                                 {258},
                                 bytes("\n\nHi"),
                                 {259, 257},
                                 bytes("assistant"),
                                 {258},
                                 bytes("\n\nYo"),
                                 {259}});
  CHECK(s.ids == ids);
  // Everything up to the assistant's "\n\n" is untrained; "Yo" and <|eot_id|> are trained.
  CHECK(s.mask == cat<uint8_t>({flags(ids.size() - 3, 0), flags(3, 1)}));
}

TEST_CASE("chatml template: exact pieces and ids; the newline after <|im_end|> is never trained") {
  const auto pieces = render_chat(ChatTemplate::chatml, {{"user", "Hi"}, {"assistant", "Yo"}});
  const std::vector<TemplatePiece> expected = {{Kind::special, "<|im_start|>", false},
                                               {Kind::text, "user\n", false},
                                               {Kind::text, "Hi", false},
                                               {Kind::special, "<|im_end|>", false},
                                               {Kind::text, "\n", false},
                                               {Kind::special, "<|im_start|>", false},
                                               {Kind::text, "assistant\n", false},
                                               {Kind::text, "Yo", true},
                                               {Kind::special, "<|im_end|>", true},
                                               {Kind::text, "\n", false}};
  CHECK(pieces == expected);
  const auto s = tokenize_pieces(pieces, SpecialsTokenizer());
  CHECK(
      s.ids ==
      cat<int32_t>({{260}, bytes("user\nHi"), {261}, bytes("\n"), {260}, bytes("assistant\nYo"), {261}, bytes("\n")}));
  CHECK(s.mask == cat<uint8_t>({flags(1 + 7 + 1 + 1 + 1 + 10, 0), flags(3, 1), flags(1, 0)}));
}

TEST_CASE("plain template: role markers and separators for messages; a prompt/completion pair back to back") {
  const auto pieces = render_conversation(ChatTemplate::plain, prompt_completion_conversation("Q?", " A"));
  const std::vector<TemplatePiece> expected = {
      {Kind::text, "Q?", false}, {Kind::text, " A", true}, {Kind::eod, "", true}};
  CHECK(pieces == expected);
  const auto byte = make_byte_tokenizer();
  const auto s = tokenize_pieces(pieces, *byte);
  CHECK(s.ids == std::vector<int32_t>{'Q', '?', ' ', 'A', 0});
  CHECK(s.mask == std::vector<uint8_t>{0, 0, 1, 1, 1});
  // Messages: system content, "User: ", "Assistant: " markers, "\n\n" between; only the assistant's
  // content and the closing EOD trained.
  const auto multi = tokenize_pieces(render_chat(ChatTemplate::plain, kConversation), *byte);
  const std::string shown = "S\n\nUser: Hi\n\nAssistant: Yo";
  CHECK(multi.ids == cat<int32_t>({bytes(shown), {0}}));
  CHECK(multi.mask == cat<uint8_t>({flags(shown.size() - 2, 0), flags(3, 1)}));
  // A later message follows an assistant turn after "\n\n" (untrained); the prompt for generation
  // ends with the assistant's marker.
  const auto two = tokenize_pieces(
      render_chat(ChatTemplate::plain, {{"user", "a"}, {"assistant", "b"}, {"user", "c"}, {"assistant", "d"}}), *byte);
  CHECK(byte->decode(two.ids) == "User: a\n\nAssistant: b\n\nUser: c\n\nAssistant: d");
  const std::string trained = [&] {
    std::string t;
    for (size_t i = 0; i < two.ids.size(); ++i)
      if (two.mask[i] != 0) t += two.ids[i] == 0 ? std::string("<eod>") : std::string(1, char(two.ids[i]));
    return t;
  }();
  CHECK(trained == "bd<eod>");
  const auto prompt = tokenize_pieces(render_chat_prompt(ChatTemplate::plain, {{"user", "a"}}), *byte);
  CHECK(byte->decode(prompt.ids) == "User: a\n\nAssistant: ");
}

TEST_CASE("chat data reads messages, ShareGPT, Alpaca and prompt/completion lines") {
  const auto conv = [](const char* line) { return conversation_of(nlohmann::json::parse(line), "f:1: "); };
  const auto sharegpt = conv(R"({"conversations": [{"from": "system", "value": "S"}, {"from": "human", "value": "H"}, )"
                             R"({"from": "gpt", "value": "G"}]})");
  CHECK(sharegpt.messages.size() == 3);
  CHECK(sharegpt.messages[1].role == "user");
  CHECK(sharegpt.messages[2].role == "assistant");
  CHECK(sharegpt.messages[2].content == "G");
  CHECK(!sharegpt.prompt_completion);
  const auto alpaca = conv(R"({"instruction": "Translate", "input": "chat", "output": "cat"})");
  REQUIRE(alpaca.messages.size() == 2);
  CHECK(alpaca.messages[0].content == "Translate\n\nchat");
  CHECK(alpaca.messages[1].content == "cat");
  CHECK(conv(R"({"instruction": "Say hi", "input": "", "output": "hi"})").messages[0].content == "Say hi");
  CHECK(conv(R"({"prompt": "p", "completion": "c"})").prompt_completion);
  CHECK_THROWS_WITH_AS(conv(R"({"conversations": [{"from": "tool", "value": "x"}]})"),
                       doctest::Contains("f:1: conversations[0]: \"from\" is \"tool\""), std::runtime_error);
  CHECK_THROWS_WITH_AS(conv(R"({"instruction": "x"})"), doctest::Contains("no \"output\""), std::runtime_error);
  CHECK_THROWS_WITH_AS(conv(R"({"text": "x"})"), doctest::Contains("ShareGPT"), std::runtime_error);
}

// Ids and masks against transformers' apply_chat_template (tests/data/chat_templates/, written by
// tests/reference/chat_template_ref.py): the text between special tokens is tokenized as one
// string, so a content starting with "\n" merges with the header's new lines as the library's does,
// llama3 trims contents, and a token is trained when any of its bytes is the assistant's.
TEST_CASE("chat templates equal apply_chat_template: ids, assistant masks and generation prompts") {
  const std::string dir = std::string(RECIPE_SOURCE_DIR) + "/tests/data/chat_templates/";
  // chatml_qwen2_nfc: Qwen2's NFC normalizer, with contents in decomposed form.
  for (const char* name : {"llama3", "chatml", "chatml_qwen2_nfc"}) {
    CAPTURE(name);
    const auto expected = nlohmann::json::parse(read_file(dir + name + ".expected.json"));
    const auto tmpl = parse_chat_template(expected["template"].get<std::string>());
    REQUIRE(tmpl.has_value());
    const auto tokenizer =
        make_hf_tokenizer(std::string(RECIPE_SOURCE_DIR) + "/" + expected["tokenizer"].get<std::string>());
    int n = 0;
    for (const auto& c : expected["conversations"]) {
      CAPTURE(n++);
      std::vector<ChatMessage> messages;
      for (const auto& m : c["messages"]) messages.push_back({m["role"], m["content"]});
      const auto s = tokenize_pieces(render_chat(*tmpl, messages), *tokenizer);
      CHECK(s.ids == c["ids"].get<std::vector<int32_t>>());
      CHECK(s.mask == c["mask"].get<std::vector<uint8_t>>());
      messages.pop_back();
      CHECK(tokenize_pieces(render_chat_prompt(*tmpl, messages), *tokenizer).ids ==
            c["prompt_ids"].get<std::vector<int32_t>>());
    }
  }
}

TEST_CASE("chat templates reject bad conversations and tokenizers without the template's special tokens") {
  CHECK_THROWS_WITH_AS(render_chat(ChatTemplate::plain, {{"bot", "x"}, {"assistant", "y"}}),
                       doctest::Contains("role \"bot\""), std::invalid_argument);
  CHECK_THROWS_WITH_AS(render_chat(ChatTemplate::chatml, {{"user", "x"}}), doctest::Contains("no assistant message"),
                       std::invalid_argument);
  const auto byte = make_byte_tokenizer();
  CHECK(!byte->special_id("<|eot_id|>").has_value());
  for (auto t : {ChatTemplate::llama3, ChatTemplate::chatml})
    CHECK_THROWS_WITH_AS(tokenize_pieces(render_chat(t, kConversation), *byte),
                         doctest::Contains("--chat-template plain"), std::runtime_error);
  CHECK(parse_chat_template("chatml") == ChatTemplate::chatml);
  CHECK(!parse_chat_template("alpaca").has_value());
}

TEST_CASE("data prepare --format chat writes .bin/.idx and a mask that round-trips") {
  TempDir dir;
  write_file(dir / "chat.jsonl",
             "{\"messages\": [{\"role\": \"user\", \"content\": \"ab\"}, {\"role\": \"assistant\", \"content\": "
             "\"cd\"}]}\n\n{\"prompt\": \"x\", \"completion\": \"yz\"}\n");
  PrepareOptions o;
  o.inputs = {dir / "chat.jsonl"};
  o.format = "chat";
  o.chat_template = "plain";
  o.output_prefix = dir / "out/sft";
  const auto stats = prepare_dataset(o);
  // "User: ab\n\nAssistant: cd" + EOD (24 + 1 tokens), then the pair "x" "yz" + EOD (4).
  const std::string first = "User: ab\n\nAssistant: cd";
  CHECK(stats.documents == 2);
  CHECK(stats.tokens == int64_t(first.size()) + 1 + 4);
  CHECK(stats.trained_tokens == 6);

  const IndexedDataset ds(o.output_prefix);
  CHECK(ds.document(0) == cat<int32_t>({bytes(first), {0}}));
  CHECK(ds.document(1) == std::vector<int32_t>{'x', 'y', 'z', 0});
  const LossMask mask(ds);
  CHECK(mask.chat_template() == "plain");
  CHECK(mask.tokens() == stats.tokens);
  std::vector<uint8_t> m(first.size() + 1);
  mask.read_document(0, 0, int64_t(m.size()), m.data());
  CHECK(m == cat<uint8_t>({flags(first.size() - 2, 0), flags(3, 1)}));
  mask.read_document(1, 1, 3, m.data());
  CHECK(std::vector<uint8_t>(m.begin(), m.begin() + 3) == std::vector<uint8_t>{1, 1, 1});

  // Validation on read: a byte other than 0/1, a wrong length, a mask of another dataset.
  const std::string path = mask_path_of(o.output_prefix), good = read_file(path);
  std::string bad = good;
  bad[kLossMaskHeaderBytes + 2] = 7;
  write_file(path, bad);
  CHECK_THROWS_WITH_AS(LossMask{ds}, doctest::Contains("neither 0 nor 1"), std::runtime_error);
  write_file(path, good.substr(0, good.size() - 1));
  CHECK_THROWS_WITH_AS(LossMask{ds}, doctest::Contains("header + one byte per token"), std::runtime_error);
  bad = good;
  bad[16] = 8;  // N = 8, the .bin holds 9
  write_file(path, bad.substr(0, bad.size() - 1));
  CHECK_THROWS_WITH_AS(LossMask{ds}, doctest::Contains("belongs to another version of the dataset"),
                       std::runtime_error);
  std::remove(path.c_str());
  CHECK_THROWS_WITH_AS(LossMask{ds}, doctest::Contains("loss mask not found"), std::runtime_error);
}

TEST_CASE("data prepare --format chat: errors name file:line, and a failed run leaves nothing behind") {
  TempDir dir;
  write_file(dir / "bad.jsonl", "{\"prompt\": \"x\", \"completion\": \"y\"}\n{\"messages\": [{\"role\": \"user\"}]}\n");
  PrepareOptions o;
  o.inputs = {dir / "bad.jsonl"};
  o.format = "chat";
  o.output_prefix = dir / "sft";
  CHECK_THROWS_WITH_AS(prepare_dataset(o), doctest::Contains("bad.jsonl:2: messages[0]: no \"content\" field"),
                       std::runtime_error);
  CHECK(!std::filesystem::exists(o.output_prefix + ".bin"));
  CHECK(!std::filesystem::exists(mask_path_of(o.output_prefix)));
  write_file(dir / "ok.jsonl", "{\"prompt\": \"x\", \"completion\": \"y\"}\n");
  o.inputs = {dir / "ok.jsonl"};
  o.chat_template = "llama3";
  CHECK_THROWS_WITH_AS(prepare_dataset(o), doctest::Contains("no special token <|begin_of_text|>"), std::runtime_error);
}

namespace {

// A dataset of documents with given tokens and masks, written directly.
std::string write_sft(const TempDir& dir, const std::vector<std::vector<int32_t>>& docs,
                      const std::vector<std::vector<uint8_t>>& masks) {
  std::string prefix = dir / "packed";
  IndexedDatasetWriter w(bin_path_of(prefix), idx_path_of(prefix), TokenDType::uint16);
  LossMaskWriter m(mask_path_of(prefix), "plain");
  for (size_t i = 0; i < docs.size(); ++i) {
    w.add_document(docs[i]);
    m.add(masks[i]);
  }
  w.finish();
  m.finish();
  return prefix;
}

// Document d: tokens 10·(d+1) + t, the first half untrained.
std::vector<int32_t> doc_tokens(int d, int len) {
  std::vector<int32_t> v(static_cast<size_t>(len));
  std::iota(v.begin(), v.end(), 10 * (d + 1));
  return v;
}
std::vector<uint8_t> doc_mask(int len) {
  std::vector<uint8_t> m(static_cast<size_t>(len), 0);
  for (int t = len / 2; t < len; ++t) m[static_cast<size_t>(t)] = 1;
  return m;
}

}  // namespace

TEST_CASE("SFT packing: greedy in order, boundaries, positions restarting, targets masked at boundaries") {
  TempDir dir;
  const std::vector<int> lens = {3, 4, 2, 11, 1};
  std::vector<std::vector<int32_t>> docs;
  std::vector<std::vector<uint8_t>> masks;
  for (int d = 0; d < 5; ++d) {
    docs.push_back(doc_tokens(d, lens[static_cast<size_t>(d)]));
    masks.push_back(doc_mask(lens[static_cast<size_t>(d)]));
  }
  const std::string prefix = write_sft(dir, docs, masks);
  auto ds = std::make_shared<const IndexedDataset>(prefix);
  auto mask = std::make_shared<const LossMask>(*ds);
  const int T = 8;
  const SftDataset packed(ds, mask, {0, 5}, T, 7, /*pack=*/true, /*pad_id=*/1, 300);

  // 3 + 4 = 7 fit; 2 does not (9 > 8) and starts a pack; 11 > 8 stands alone, cut; 1 starts the last.
  REQUIRE(packed.size() == 4);
  CHECK(packed.pack_documents(0) == std::vector<int64_t>{0, 1});
  CHECK(packed.pack_documents(1) == std::vector<int64_t>{2});
  CHECK(packed.pack_documents(2) == std::vector<int64_t>{3});
  CHECK(packed.pack_documents(3) == std::vector<int64_t>{4});
  CHECK(packed.stats().truncated == 1);  // 11 > T + 1

  // Find the global index that reads pack 0 in epoch 0.
  int64_t idx0 = 0;
  while (packed.pack_of(idx0) != 0) ++idx0;
  Sequence s;
  packed.sequence(idx0, s);
  CHECK(s.inputs == std::vector<int32_t>{10, 11, 12, 20, 21, 22, 23, 1});
  CHECK(s.positions == std::vector<int32_t>{0, 1, 2, 0, 1, 2, 3, 0});
  CHECK(s.cu_seqlens == std::vector<int32_t>{0, 3, 7});
  // Doc 0 (mask 0,1,1): targets 11 and 12 trained; its last position would predict doc 1: -1.
  // Doc 1 (mask 0,0,1,1): 21 untrained, 22 and 23 trained, last position -1; padding -1.
  CHECK(s.targets == std::vector<int32_t>{11, 12, -1, -1, 22, 23, -1, -1});
  CHECK(packed.trained_tokens(idx0) == 4);

  // The cut conversation: T positions, targets through token T (inside the conversation).
  int64_t idx2 = 0;
  while (packed.pack_of(idx2) != 2) ++idx2;
  packed.sequence(idx2, s);
  CHECK(s.cu_seqlens == std::vector<int32_t>{0, 8});
  CHECK(s.inputs == doc_tokens(3, 8));
  // mask of 11 tokens: 1 from token 5 on → targets of positions 4..7 (tokens 5..8).
  CHECK(s.targets == std::vector<int32_t>{-1, -1, -1, -1, 45, 46, 47, 48});

  // Every index is pure and each epoch reads every pack once.
  std::vector<int> seen(4, 0);
  for (int64_t i = 4; i < 8; ++i) ++seen[static_cast<size_t>(packed.pack_of(i))];
  CHECK(seen == std::vector<int>{1, 1, 1, 1});
  Sequence again;
  packed.sequence(idx0, again);
  CHECK(again.targets == std::vector<int32_t>{11, 12, -1, -1, 22, 23, -1, -1});
  CHECK(packed.stats().trained_tokens == 4 + 1 + 4 + 0);
  CHECK(packed.stats().untrained == 1);  // doc 4: one token, no target

  // pack = false: one conversation per sequence, padded at the end.
  const SftDataset single(ds, mask, {0, 5}, T, 7, /*pack=*/false, /*pad_id=*/1, 300);
  CHECK(single.size() == 5);
  int64_t idx1 = 0;
  while (single.pack_of(idx1) != 1) ++idx1;
  single.sequence(idx1, s);
  CHECK(s.inputs == std::vector<int32_t>{20, 21, 22, 23, 1, 1, 1, 1});
  CHECK(s.positions == std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 3});  // padding: one run of its own
  CHECK(s.targets == std::vector<int32_t>{-1, 22, 23, -1, -1, -1, -1, -1});
  CHECK(s.cu_seqlens == std::vector<int32_t>{0, 4});
  CHECK(single.loss_masked());

  // data.max_samples_per_pack: at most 1 conversation per pack packs like pack = false; at most 2
  // still puts docs 0 and 1 together.
  const SftDataset one(ds, mask, {0, 5}, T, 7, /*pack=*/true, /*pad_id=*/1, 300, "", /*max_samples_per_pack=*/1);
  CHECK(one.size() == 5);
  const SftDataset two(ds, mask, {0, 5}, T, 7, /*pack=*/true, /*pad_id=*/1, 300, "", /*max_samples_per_pack=*/2);
  CHECK(two.size() == 4);
  CHECK(two.pack_documents(0) == std::vector<int64_t>{0, 1});
}

TEST_CASE("SFT packing holds at most data.max_samples_per_pack conversations per sequence") {
  TempDir dir;
  std::vector<std::vector<int32_t>> docs;
  std::vector<std::vector<uint8_t>> masks;
  for (int d = 0; d < 10; ++d) {
    docs.push_back(doc_tokens(d, 2));
    masks.push_back(doc_mask(2));
  }
  const std::string prefix = write_sft(dir, docs, masks);
  auto ds = std::make_shared<const IndexedDataset>(prefix);
  auto mask = std::make_shared<const LossMask>(*ds);
  // 10 conversations of 2 tokens in sequences of 32: unbounded, one pack; at most 3, four packs.
  const SftDataset unbounded(ds, mask, {0, 10}, 32, 7, /*pack=*/true, /*pad_id=*/1, 300);
  CHECK(unbounded.size() == 1);
  const SftDataset bounded(ds, mask, {0, 10}, 32, 7, /*pack=*/true, /*pad_id=*/1, 300, "", 3);
  REQUIRE(bounded.size() == 4);
  for (int64_t k = 0; k < 4; ++k) CHECK(bounded.pack_documents(k).size() == (k < 3 ? 3u : 1u));
  // Positions: three samples, then the padding as one more run 0, 1, ... (at most 3 + 1 samples).
  Sequence s;
  int64_t idx = 0;
  while (bounded.pack_of(idx) != 0) ++idx;
  bounded.sequence(idx, s);
  CHECK(std::count(s.positions.begin(), s.positions.end(), 0) == 4);
  CHECK(s.positions[6] == 0);
  CHECK(s.positions[31] == 25);
}

TEST_CASE("SFT dataset checks token ids against the vocabulary") {
  TempDir dir;
  const std::string prefix = write_sft(dir, {{5, 400, 6}}, {{0, 1, 1}});
  auto ds = std::make_shared<const IndexedDataset>(prefix);
  auto mask = std::make_shared<const LossMask>(*ds);
  CHECK_THROWS_WITH_AS(SftDataset(ds, mask, {0, 1}, 4, 1, false, 0, 300), doctest::Contains("token id 400"),
                       std::runtime_error);
}

TEST_CASE("SFT dataset refuses a split in which no conversation has a trained target") {
  TempDir dir;
  // Doc 0: a mask of 0s. Doc 1: 10 tokens trained from token 8 on, cut to T + 1 = 5 tokens.
  const std::string prefix =
      write_sft(dir, {{5, 6, 7}, doc_tokens(1, 10)}, {{0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0, 1, 1}});
  auto ds = std::make_shared<const IndexedDataset>(prefix);
  auto mask = std::make_shared<const LossMask>(*ds);
  CHECK_THROWS_WITH_AS(SftDataset(ds, mask, {0, 2}, 4, 1, true, 0, 300),
                       doctest::Contains("none of its 2 conversations has a trained token within "
                                         "model.seq_length+1 = 5 tokens (their loss mask is 0 there; 1 are cut"),
                       std::runtime_error);
  // A longer sequence reaches doc 1's answer: it trains, and doc 0 counts as untrained.
  const SftDataset longer(ds, mask, {0, 2}, 16, 1, true, 0, 300);
  CHECK(longer.stats().untrained == 1);
  CHECK(longer.stats().trained_tokens == 2);  // tokens 8 and 9, the targets of positions 7 and 8
}

TEST_SUITE_END();
