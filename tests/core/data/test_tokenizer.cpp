#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <map>

#include "core/data/tokenizer.hpp"
#include "tests/core/data/temp_dir.hpp"

#if defined(RECIPE_HAVE_SENTENCEPIECE_TRAIN)
#include <sentencepiece_trainer.h>
#endif

TEST_SUITE_BEGIN("core/data");

using namespace recipe::data;
using recipe::data::testing::TempDir;
using recipe::data::testing::write_file;

namespace {

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80)
    s.push_back(static_cast<char>(cp));
  else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

// GPT-2's byte alphabet, written out independently of the tokenizer: printable bytes stand for
// themselves, the rest take U+0100, U+0101, ... in byte order.
std::string byte_symbol(unsigned char b) {
  auto printable = [](int x) { return (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE); };
  if (printable(b)) return utf8(b);
  uint32_t n = 0;
  for (int x = 0; x < b; ++x) n += !printable(x);
  return utf8(256 + n);
}

struct HandmadeBpe {
  TempDir dir;
  std::map<std::string, int> vocab;
  std::unique_ptr<Tokenizer> tok;

  explicit HandmadeBpe(const std::vector<std::string>& merges) {
    for (int b = 0; b < 256; ++b) vocab[byte_symbol(static_cast<unsigned char>(b))] = b;
    std::string merges_txt = "#version: 0.2\n";
    for (const auto& m : merges) {
      merges_txt += m + "\n";
      const size_t sp = m.find(' ');
      vocab[m.substr(0, sp) + m.substr(sp + 1)] = static_cast<int>(vocab.size());
    }
    vocab["<|endoftext|>"] = static_cast<int>(vocab.size());
    write_file(dir / "vocab.json", nlohmann::json(vocab).dump());
    write_file(dir / "merges.txt", merges_txt);
    tok = make_tokenizer("gpt2_bpe", dir / "vocab.json", dir / "merges.txt", "");
  }
  std::vector<std::string> pieces(const std::string& text) const {
    std::map<int, std::string> by_id;
    for (const auto& [k, v] : vocab) by_id[v] = k;
    std::vector<std::string> out;
    for (int32_t id : tok->encode(text)) out.push_back(by_id.at(id));
    return out;
  }
};

using Pieces = std::vector<std::string>;

}  // namespace

TEST_CASE("byte tokenizer: UTF-8 bytes round-trip, eod is 0, NUL is dropped") {
  auto tok = make_tokenizer("byte", "", "", "");
  CHECK(tok->vocab_size() == 256);
  CHECK(tok->eod_id() == 0);
  const std::string text = "Hello, wörld! 日本語\n\ttabs";
  const auto ids = tok->encode(text);
  CHECK(ids.size() == text.size());
  CHECK(ids[0] == 'H');
  CHECK(tok->decode(ids) == text);
  CHECK(tok->encode(std::string("a\0b", 3)) == std::vector<int32_t>{'a', 'b'});
  CHECK_THROWS(tok->decode(std::vector<int32_t>{300}));
}

TEST_CASE("gpt2_bpe: ranked merges on a handmade vocabulary") {
  HandmadeBpe bpe({"l l", "h e", "he ll", "hell o", "Ġ w", "o r", "Ġw or"});
  CHECK(bpe.pieces("hello world") == Pieces{"hello", "Ġwor", "l", "d"});
  CHECK(bpe.tok->eod_id() == static_cast<int>(bpe.vocab.size()) - 1);
  CHECK(bpe.tok->vocab_size() == static_cast<int>(bpe.vocab.size()));
  // the second call is served from the cache and must agree
  CHECK(bpe.pieces("hello world") == Pieces{"hello", "Ġwor", "l", "d"});
}

TEST_CASE("gpt2_bpe: pre-tokenization follows GPT-2's pattern (merges never cross its pieces)") {
  HandmadeBpe bpe({"Ġ b", "Ġ Ġ", "n '", "' t", "c 1", "Ġ !", "Ġ! !", "a Ã", "aÃ ¼"});
  // \s+(?!\S): the last space of a run goes with the next word
  CHECK(bpe.pieces("a   b") == Pieces{"a", "ĠĠ", "Ġb"});
  // contractions split off: "n'" is never formed
  CHECK(bpe.pieces("don't") == Pieces{"d", "o", "n", "'t"});
  // letters and digits are separate pieces
  CHECK(bpe.pieces("abc123") == Pieces{"a", "b", "c", "1", "2", "3"});
  // ` ?[^\s\p{L}\p{N}]+` keeps a leading space with a punctuation run
  CHECK(bpe.pieces("x !!") == Pieces{"x", "Ġ!!"});
  // non-ASCII letters belong to the word (ü = C3 BC)
  CHECK(bpe.pieces("aüb") == Pieces{"aÃ¼", "b"});
  // trailing whitespace stays one piece
  CHECK(bpe.pieces("b  ") == Pieces{"b", "ĠĠ"});
}

TEST_CASE("gpt2_bpe: decode inverts encode for any text") {
  HandmadeBpe bpe({"l l", "h e", "he ll", "Ġ w"});
  for (const std::string& text : std::vector<std::string>{
           "hello world", "  spaces   and\ttabs\n\n", "ünïcödé 日本語 123.45!?", std::string("bytes \xff\xfe end")}) {
    CHECK(bpe.tok->decode(bpe.tok->encode(text)) == text);
  }
}

TEST_CASE("gpt2_bpe: missing or malformed files are named") {
  TempDir dir;
  CHECK_THROWS_WITH_AS(make_tokenizer("gpt2_bpe", dir / "none.json", dir / "none.txt", ""),
                       doctest::Contains("none.json"), std::runtime_error);
  write_file(dir / "v.json", "{\"a\": 0}");
  write_file(dir / "m.txt", "a b\n");
  CHECK_THROWS_WITH_AS(make_tokenizer("gpt2_bpe", dir / "v.json", dir / "m.txt", ""),
                       doctest::Contains("<|endoftext|>"), std::runtime_error);
  write_file(dir / "v.json", "{\"a\": 0, \"<|endoftext|>\": 1}");
  write_file(dir / "m.txt", "#version: 0.2\na b\nbroken\n");
  CHECK_THROWS_WITH_AS(make_tokenizer("gpt2_bpe", dir / "v.json", dir / "m.txt", ""), doctest::Contains("m.txt:3"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(make_tokenizer("gpt2_bpe", "", "", ""), doctest::Contains("merges.txt"), std::runtime_error);
}

TEST_CASE("sentencepiece: a missing model is named") {
  TempDir dir;
  CHECK_THROWS_WITH_AS(make_tokenizer("sentencepiece", "", "", dir / "absent.model"), doctest::Contains("absent.model"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(make_tokenizer("sentencepiece", "", "", ""), doctest::Contains("data.tokenizer_model"),
                       std::runtime_error);
}

#if defined(RECIPE_HAVE_SENTENCEPIECE_TRAIN)
TEST_CASE("sentencepiece: a tiny trained model encodes, decodes and ends documents with eos") {
  TempDir dir;
  std::string corpus;
  for (int i = 0; i < 200; ++i)
    corpus += "the quick brown fox jumps over the lazy dog " + std::to_string(i % 17) + "\n";
  write_file(dir / "corpus.txt", corpus);
  const auto status =
      sentencepiece::SentencePieceTrainer::Train("--input=" + (dir / "corpus.txt") + " --model_prefix=" + (dir / "sp") +
                                                 " --vocab_size=60 --model_type=bpe --minloglevel=2");
  REQUIRE_MESSAGE(status.ok(), status.ToString());
  auto tok = make_tokenizer("sentencepiece", "", "", dir / "sp.model");
  CHECK(tok->vocab_size() == 60);
  CHECK(tok->eod_id() == 2);  // SentencePiece's default: unk 0, bos 1, eos 2
  const auto ids = tok->encode("the lazy fox");
  CHECK(!ids.empty());
  CHECK(tok->decode(ids) == "the lazy fox");
}
#endif

TEST_SUITE_END();
