// The Hugging Face tokenizer.json reader against ids from the `tokenizers` library itself
// (tests/data/hf_tokenizer/, written by tests/reference/tokenizer_ref.py): byte-level BPEs trained on Shakespeare
// with Llama 3's and GPT-2's pre-tokenizers, on a slice of Hamlet and on hand-made edge cases; plus
// the Unicode classes, BOS/EOS/special ids and the rejection of what the reader does not implement.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <filesystem>

#include "core/data/pretokenize.hpp"
#include "core/data/tokenizer.hpp"
#include "core/data/unicode.hpp"
#include "core/data/unicode_nfc.hpp"
#include "tests/core/data/temp_dir.hpp"

TEST_SUITE_BEGIN("core/data");

using namespace recipe::data;
using recipe::data::testing::read_file;
using recipe::data::testing::TempDir;
using recipe::data::testing::write_file;

namespace {

const std::string kDir = std::string(RECIPE_SOURCE_DIR) + "/tests/data/hf_tokenizer/";

// Expected ids: little-endian uint16, as tests/reference/tokenizer_ref.py writes them.
std::vector<int32_t> read_ids(const std::string& path) {
  const std::string raw = read_file(path);
  REQUIRE_MESSAGE(!raw.empty(), path);
  std::vector<int32_t> ids(raw.size() / 2);
  for (size_t k = 0; k < ids.size(); ++k)
    ids[k] = static_cast<unsigned char>(raw[2 * k]) | (static_cast<unsigned char>(raw[2 * k + 1]) << 8);
  return ids;
}

// Compares id by id so a failure names the first differing position and the text around it.
void check_ids(const Tokenizer& tok, const std::vector<int32_t>& got, const std::vector<int32_t>& want,
               const std::string& what) {
  size_t k = 0;
  while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
  if (k == got.size() && k == want.size()) return;
  const size_t lo = k >= 3 ? k - 3 : 0;
  auto around = [&](const std::vector<int32_t>& ids) {
    return tok.decode(std::span<const int32_t>(ids).subspan(lo, std::min<size_t>(ids.size() - lo, 6)));
  };
  FAIL_CHECK(what << ": first difference at id " << k << " of " << want.size() << " (got " << got.size()
                  << "); got text \"" << around(got) << "\", expected \"" << around(want) << "\"");
}

// decode(encode(text)) is the text, or with a normalizer its NFC (`nfc`).
void check_against_reference(const std::string& json_path, const std::string& name,
                             const std::vector<std::string>& texts, bool nfc_text = false) {
  auto tok = make_tokenizer("hf", "", "", json_path);
  for (const auto& text_name : texts) {
    const std::string text = read_file(kDir + text_name + ".txt");
    const std::string stem = kDir + name + "." + text_name;
    const auto ids = tok->encode(text);
    check_ids(*tok, ids, read_ids(stem + ".ids"), name + " " + text_name);
    const std::string specials = stem + ".specials.ids";
    check_ids(*tok, tok->encode_with_specials(text),
              std::filesystem::exists(specials) ? read_ids(specials) : read_ids(stem + ".ids"),
              name + " " + text_name + " with specials");
    CHECK_MESSAGE(tok->decode(ids) == (nfc_text ? nfc(text) : text),
                  name << " " << text_name << " decode(encode(text)) != text");
  }
}

nlohmann::json load_json(const std::string& path) { return nlohmann::json::parse(read_file(path)); }

// A literal's bytes, NULs included.
template <size_t N>
std::string bytes(const char (&s)[N]) {
  return std::string(s, N - 1);
}

}  // namespace

TEST_CASE("hf: Llama 3 style tokenizer.json gives the library's ids on Shakespeare and edge cases") {
  check_against_reference(kDir + "llama3_style.tokenizer.json", "llama3_style", {"corpus", "edge"});
}

TEST_CASE("hf: GPT-2 style tokenizer.json (ByteLevel pre-tokenizer, \"a b\" merges) gives the library's ids") {
  check_against_reference(kDir + "gpt2_style.tokenizer.json", "gpt2_style", {"corpus", "edge"});
}

TEST_CASE("hf: Qwen2's split pattern (single digits) gives the library's ids") {
  TempDir dir;
  std::string text = read_file(kDir + "llama3_style.tokenizer.json");
  const std::string llama = nlohmann::json(std::string(split_pattern_regex(SplitPattern::kLlama3))).dump();
  const std::string qwen = nlohmann::json(std::string(split_pattern_regex(SplitPattern::kQwen2))).dump();
  const size_t at = text.find(llama);
  REQUIRE(at != std::string::npos);
  text.replace(at, llama.size(), qwen);
  write_file(dir / "qwen.json", text);
  check_against_reference(dir / "qwen.json", "qwen2_pattern", {"edge"});
  // Digit runs really split differently (else the comparison above would not tell the patterns apart).
  CHECK(read_ids(kDir + "qwen2_pattern.edge.ids") != read_ids(kDir + "llama3_style.edge.ids"));
}

TEST_CASE("hf: Qwen2's NFC normalizer gives the library's ids on multilingual text, composed or not") {
  const std::string path = kDir + "qwen2_nfc.tokenizer.json";
  check_against_reference(path, "qwen2_nfc", {"edge", "corpus"}, /*nfc_text=*/true);
  // The multilingual texts hold the accented added token "[[café]]", which the ByteLevel decoder
  // (the library's too) reads as the bytes its characters spell: ids only there.
  auto tok = make_tokenizer("hf", "", "", path);
  const std::string composed = read_file(kDir + "multilingual.txt"), nfd = read_file(kDir + "multilingual_nfd.txt");
  for (const auto& [name, text] : {std::pair{"multilingual", composed}, std::pair{"multilingual_nfd", nfd}}) {
    const std::string stem = kDir + "qwen2_nfc." + name;
    check_ids(*tok, tok->encode(text), read_ids(stem + ".ids"), std::string("qwen2_nfc ") + name);
    check_ids(*tok, tok->encode_with_specials(text), read_ids(stem + ".specials.ids"),
              std::string("qwen2_nfc ") + name + " with specials");
  }
  // The decomposed text normalizes to the composed one, so both give the same ids (the library's).
  CHECK(nfd != composed);
  CHECK(tok->encode(nfd) == tok->encode(composed));
  // The accented added token ("normalized": true) is found on the normalized text only: written
  // decomposed it is still one id; the special ones ("normalized": false) are found on the raw text.
  const int32_t cafe = *tok->special_id("[[caf\u00e9]]");
  CHECK(tok->encode("x [[cafe\u0301]] y") == tok->encode("x [[caf\u00e9]] y"));
  const std::vector<int32_t> decomposed = tok->encode("x [[cafe\u0301]] y");
  CHECK(std::count(decomposed.begin(), decomposed.end(), cafe) == 1);
  CHECK(tok->encode_with_specials("<|im_start|>").size() == 1);

  // Negative control: the same file without its normalizer tokenizes the decomposed text (and the
  // composed one, which holds singletons such as the Angstrom sign) differently.
  TempDir dir;
  auto j = load_json(path);
  j["normalizer"] = nullptr;
  write_file(dir / "plain.json", j.dump());
  auto plain = make_tokenizer("hf", "", "", dir / "plain.json");
  CHECK(plain->encode(nfd) != read_ids(kDir + "qwen2_nfc.multilingual_nfd.ids"));
  CHECK(plain->encode(composed) != read_ids(kDir + "qwen2_nfc.multilingual.ids"));
}

TEST_CASE("unicode: NFC composes, reorders and maps singletons; ASCII and invalid bytes pass through") {
  CHECK(nfc("cafe\u0301") == "caf\u00e9");
  CHECK(nfc("\u1112\u1161\u11ab") == "\ud55c");   // Hangul jamo → the syllable
  CHECK(nfc("\u304b\u3099") == "\u304c");         // kana + combining voiced mark
  CHECK(nfc("\u212b") == "\u00c5");               // ANGSTROM SIGN → Å (a singleton)
  CHECK(nfc("\u0958") == "\u0915\u093c");         // Devanagari qa: excluded from composition
  CHECK(nfc("a\u0301\u0323") == "\u1ea1\u0301");  // dot below (class 220) first, then composes
  const std::string ascii = bytes("plain ASCII\0with NUL\t");
  CHECK(nfc(ascii) == ascii);
  CHECK(nfc(bytes("e\u0301\xff\xfe"
                  "e\u0301\0")) == bytes("\u00e9\xff\xfe\u00e9\0"));
  CHECK(nfc("") == "");
}

TEST_CASE("hf: BOS from TemplateProcessing, EOD by rule or data.eod_token, special ids") {
  auto llama = make_tokenizer("hf", "", "", kDir + "llama3_style.tokenizer.json");
  REQUIRE(llama->special_id("<|begin_of_text|>"));
  CHECK(llama->bos_id() == llama->special_id("<|begin_of_text|>"));
  CHECK(llama->eod_id() == *llama->special_id("<|end_of_text|>"));
  CHECK(llama->name() == "hf");
  CHECK_FALSE(llama->special_id("<|not_a_token|>"));
  const int32_t eot = *llama->special_id("<|eot_id|>");
  CHECK(llama->encode_with_specials("hi<|eot_id|>").back() == eot);
  CHECK(llama->encode("hi<|eot_id|>").back() != eot);  // plain encode: a document cannot forge it
  CHECK(llama->decode(std::vector<int32_t>{eot}) == "<|eot_id|>");
  CHECK(llama->vocab_size() == 4097);  // 4096 trained + the added "[[note]]"
  CHECK_THROWS_AS(llama->decode(std::vector<int32_t>{4097}), std::out_of_range);

  CHECK(make_tokenizer("hf", "", "", kDir + "llama3_style.tokenizer.json", "<|eot_id|>")->eod_id() == eot);
  CHECK_THROWS_WITH_AS(make_tokenizer("hf", "", "", kDir + "llama3_style.tokenizer.json", "<|nope|>"),
                       doctest::Contains("data.eod_token \"<|nope|>\""), std::runtime_error);

  auto gpt2 = make_tokenizer("hf", "", "", kDir + "gpt2_style.tokenizer.json");
  CHECK(gpt2->eod_id() == *gpt2->special_id("<|endoftext|>"));
  CHECK_FALSE(gpt2->bos_id());
  // The existing tokenizers have no special ids.
  CHECK_FALSE(make_tokenizer("byte", "", "", "")->special_id("<|endoftext|>"));
}

TEST_CASE("hf: ignore_merges makes an in-vocabulary pre-token one id") {
  TempDir dir;
  auto j = load_json(kDir + "llama3_style.tokenizer.json");
  j["model"]["merges"] = nlohmann::json::array();  // only ignore_merges can then form " the"
  write_file(dir / "t.json", j.dump());
  CHECK(make_tokenizer("hf", "", "", dir / "t.json")->encode(" the").size() == 1);
  j["model"]["ignore_merges"] = false;
  write_file(dir / "t.json", j.dump());
  CHECK(make_tokenizer("hf", "", "", dir / "t.json")->encode(" the").size() == 4);
}

TEST_CASE("hf: what the reader does not implement is rejected with the file and the field") {
  TempDir dir;
  const auto base = load_json(kDir + "llama3_style.tokenizer.json");
  auto rejects = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& field) {
    auto j = base;
    edit(j);
    write_file(dir / "bad.json", j.dump());
    const std::string want = dir / "bad.json" + ": " + field;
    CHECK_THROWS_WITH_AS(make_tokenizer("hf", "", "", dir / "bad.json"), doctest::Contains(want.c_str()),
                         std::runtime_error);
  };
  rejects([](auto& j) { j["model"]["type"] = "WordPiece"; }, "model.type is WordPiece");
  rejects([](auto& j) { j["model"]["byte_fallback"] = true; }, "model.byte_fallback");
  rejects([](auto& j) { j["normalizer"] = {{"type", "NFKC"}}; }, "normalizer is NFKC; supported: NFC");
  rejects(
      [](auto& j) {
        j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}};
      },
      "normalizer is Sequence");
  rejects([](auto& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+"; },
          "pre_tokenizer.pretokenizers[0].pattern.Regex is \"\\\\w+\"");
  rejects([](auto& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}}; }, "pre_tokenizer.type is Metaspace");
  rejects([](auto& j) { j["added_tokens"][0]["lstrip"] = true; }, "added_tokens[0].lstrip");
  rejects([](auto& j) { j["model"]["merges"][0] = "a"; }, "model.merges[0]");
  rejects([](auto& j) { j["added_tokens"] = nlohmann::json::array(); }, "no end-of-document token");
  CHECK_THROWS_WITH_AS(make_tokenizer("hf", "", "", dir / "absent.json"), doctest::Contains("absent.json"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(make_tokenizer("hf", "", "", ""), doctest::Contains("data.tokenizer_model"), std::runtime_error);
}

TEST_CASE("unicode: classes follow the Unicode database, not ASCII or str.isspace") {
  CHECK(is_letter(0x17F));        // ſ
  CHECK(is_letter(0x10400));      // 𐐀, outside the BMP
  CHECK(is_letter(0x2B0));        // ʰ, a modifier letter (Lm)
  CHECK_FALSE(is_letter(0x301));  // combining acute accent is a mark, not a letter
  CHECK(is_number(0x2160));       // Ⅰ (Nl)
  CHECK(is_number(0xBD));         // ½ (No)
  CHECK(is_number(0x967));        // Devanagari one (Nd)
  CHECK_FALSE(is_number(0x4E00));
  CHECK(is_whitespace(0x85));
  CHECK(is_whitespace(0x3000));
  CHECK_FALSE(is_whitespace(0x1C));    // Python's isspace() says yes; White_Space says no
  CHECK_FALSE(is_whitespace(0x200B));  // zero width space is not White_Space
}

TEST_CASE("pretokenize: piece boundaries on the edge cases equal the library's Split for each pattern") {
  const std::string text = read_file(kDir + "edge.txt");
  for (const auto& named : std::vector<std::pair<std::string, SplitPattern>>{
           {"gpt2", SplitPattern::kGpt2}, {"llama3", SplitPattern::kLlama3}, {"qwen2", SplitPattern::kQwen2}}) {
    const std::string& name = named.first;  // not a structured binding: CHECK_MESSAGE's lambda captures it
    const SplitPattern pattern = named.second;
    const auto want = read_ids(kDir + name + "_pattern.edge.pieces");
    std::vector<int32_t> got;
    for (const auto& piece : pretokenize(text, pattern)) got.push_back(static_cast<int32_t>(piece.second));
    size_t k = 0, at = 0;
    while (k < got.size() && k < want.size() && got[k] == want[k]) at += static_cast<size_t>(got[k++]);
    CHECK_MESSAGE((k == got.size() && k == want.size()), name << ": piece " << k << " differs at byte " << at << " (\""
                                                              << text.substr(at, std::min<size_t>(12, text.size() - at))
                                                              << "\"...)");
  }
}

TEST_CASE("pretokenize: Llama 3's pattern, piece by piece") {
  auto pieces = [](const std::string& text, SplitPattern p) {
    std::vector<std::string> out;
    for (const auto& [b, n] : pretokenize(text, p)) out.push_back(text.substr(b, n));
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(pieces("I'LL 12345", SplitPattern::kLlama3) == V{"I", "'LL", " ", "123", "45"});
  CHECK(pieces("12345", SplitPattern::kQwen2) == V{"1", "2", "3", "4", "5"});
  CHECK(pieces("I'LL", SplitPattern::kGpt2) == V{"I", "'", "LL"});  // GPT-2's contractions are lower case
  CHECK(pieces("a\r\n\r\n  b", SplitPattern::kLlama3) == V{"a", "\r\n\r\n", " ", " b"});
  CHECK(pieces("x  \n", SplitPattern::kLlama3) == V{"x", "  \n"});
  CHECK(pieces("\tfoo...\n\nbar", SplitPattern::kLlama3) == V{"\tfoo", "...\n\n", "bar"});
  CHECK(pieces("end   ", SplitPattern::kLlama3) == V{"end", "   "});
  CHECK(split_pattern_from_regex(split_pattern_regex(SplitPattern::kQwen2)) == SplitPattern::kQwen2);
  CHECK_FALSE(split_pattern_from_regex("\\s+"));
}

TEST_SUITE_END();
