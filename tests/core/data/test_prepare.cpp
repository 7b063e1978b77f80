#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "core/data/indexed_dataset.hpp"
#include "core/data/prepare.hpp"
#include "core/data/remove_on_signal.hpp"
#include "core/data/tokenizer.hpp"
#include "tests/core/data/temp_dir.hpp"

TEST_SUITE_BEGIN("core/data");

using namespace recipe::data;
using recipe::data::testing::TempDir;
using recipe::data::testing::write_file;

namespace {

std::vector<int32_t> bytes_then_eod(const std::string& s) {
  std::vector<int32_t> v(s.begin(), s.end());
  v.push_back(0);
  return v;
}

std::string prepare_error(const PrepareOptions& o) {
  try {
    prepare_dataset(o);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("prepare: .txt and .jsonl documents round-trip through .bin/.idx") {
  TempDir dir;
  write_file(dir / "a.txt", "hello world\n");
  write_file(dir / "b.jsonl", "{\"text\": \"first doc\", \"id\": 1}\n\n{\"text\": \"second\"}\n{\"text\": \"\"}\n");
  PrepareOptions o;
  o.inputs = {dir / "a.txt", dir / "b.jsonl"};
  o.output_prefix = dir / "out/corpus";
  const PrepareStats st = prepare_dataset(o);
  CHECK(st.documents == 3);         // the empty jsonl document is skipped
  CHECK(st.tokens == 13 + 10 + 7);  // text bytes + one eod each
  CHECK(st.vocab_size == 256);

  IndexedDataset ds(o.output_prefix);
  CHECK(ds.dtype() == TokenDType::uint16);
  REQUIRE(ds.num_documents() == 3);
  CHECK(ds.document(0) == bytes_then_eod("hello world\n"));
  CHECK(ds.document(1) == bytes_then_eod("first doc"));
  CHECK(ds.document(2) == bytes_then_eod("second"));
  for (const auto& entry : std::filesystem::directory_iterator(dir.path / "out"))
    CHECK(entry.path().string().find(".tmp-") == std::string::npos);
}

TEST_CASE("prepare: an hf tokenizer.json ends each document with its end-of-text token (or --eod-token)") {
  TempDir dir;
  const std::string json = std::string(RECIPE_SOURCE_DIR) + "/tests/data/hf_tokenizer/llama3_style.tokenizer.json";
  write_file(dir / "a.jsonl", "{\"text\": \"To be, or not to be<|eot_id|>\"}\n{\"text\": \"that is the question\"}\n");
  PrepareOptions o;
  o.inputs = {dir / "a.jsonl"};
  o.output_prefix = dir / "corpus";
  o.tokenizer = "hf";
  o.tokenizer_model = json;
  const PrepareStats st = prepare_dataset(o);
  const auto tok = make_tokenizer("hf", "", "", json);
  CHECK(st.vocab_size == tok->vocab_size());
  IndexedDataset ds(o.output_prefix);
  REQUIRE(ds.num_documents() == 2);
  auto want = tok->encode("To be, or not to be<|eot_id|>");  // the special in the text stays text
  want.push_back(*tok->special_id("<|end_of_text|>"));
  CHECK(ds.document(0) == want);
  CHECK(tok->decode(ds.document(1)) == "that is the question<|end_of_text|>");

  o.eod_token = "<|eot_id|>";
  prepare_dataset(o);
  CHECK(IndexedDataset(o.output_prefix).document(1).back() == *tok->special_id("<|eot_id|>"));
}

TEST_CASE("prepare: split_paragraphs makes one document per blank-line-separated paragraph") {
  TempDir dir;
  write_file(dir / "p.txt", "one\nline two\n\n\n  \nthree\n\nfour");
  PrepareOptions o;
  o.inputs = {dir / "p.txt"};
  o.output_prefix = dir / "p";
  o.split_paragraphs = true;
  o.append_eod = false;
  CHECK(prepare_dataset(o).documents == 3);
  IndexedDataset ds(o.output_prefix);
  const auto doc0 = ds.document(0);
  CHECK(std::string(doc0.begin(), doc0.end()) == "one\nline two");
  const auto doc2 = ds.document(2);
  CHECK(std::string(doc2.begin(), doc2.end()) == "four");
}

TEST_CASE("prepare: bad input is an error naming file and line, and leaves nothing behind") {
  TempDir dir;
  PrepareOptions o;
  o.output_prefix = dir / "bad";

  SUBCASE("invalid JSON on line 2") {
    write_file(dir / "x.jsonl", "{\"text\": \"ok\"}\n{\"text\": oops}\n");
    o.inputs = {dir / "x.jsonl"};
    const std::string err = prepare_error(o);
    CHECK(err.find(dir / "x.jsonl" + ":2:") != std::string::npos);
  }
  SUBCASE("missing key on line 3") {
    write_file(dir / "y.jsonl", "{\"text\": \"a\"}\n\n{\"body\": \"b\"}\n");
    o.inputs = {dir / "y.jsonl"};
    const std::string err = prepare_error(o);
    CHECK(err.find(dir / "y.jsonl" + ":3:") != std::string::npos);
    CHECK(err.find("\"text\"") != std::string::npos);
  }
  SUBCASE("non-string field") {
    write_file(dir / "z.jsonl", "{\"text\": 5}\n");
    o.inputs = {dir / "z.jsonl"};
    CHECK(prepare_error(o).find(":1: field \"text\" is not a string") != std::string::npos);
  }
  SUBCASE("missing input") {
    o.inputs = {dir / "nope.txt"};
    CHECK(prepare_error(o).find("nope.txt: input file not found") != std::string::npos);
  }
  SUBCASE("unsupported extension") {
    write_file(dir / "a.csv", "x");
    o.inputs = {dir / "a.csv"};
    CHECK(prepare_error(o).find("unsupported input type") != std::string::npos);
  }
  SUBCASE("unknown tokenizer") {
    write_file(dir / "a.txt", "x");
    o.inputs = {dir / "a.txt"};
    o.tokenizer = "wordpiece";
    CHECK(prepare_error(o).find("unknown tokenizer \"wordpiece\"") != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(o.output_prefix + ".bin"));
  CHECK_FALSE(std::filesystem::exists(o.output_prefix + ".idx"));
  int leftovers = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path))
    leftovers += entry.path().string().find(".tmp-") != std::string::npos;
  CHECK(leftovers == 0);
}

TEST_CASE("prepare: an existing dataset is replaced only when the new one is complete") {
  TempDir dir;
  write_file(dir / "a.txt", "abc");
  PrepareOptions o;
  o.inputs = {dir / "a.txt"};
  o.output_prefix = dir / "ds";
  prepare_dataset(o);
  write_file(dir / "b.jsonl", "not json\n");
  o.inputs = {dir / "b.jsonl"};
  CHECK_THROWS(prepare_dataset(o));
  IndexedDataset ds(o.output_prefix);  // the first dataset is intact
  CHECK(ds.document(0) == bytes_then_eod("abc"));
}

TEST_CASE("prepare's temporary files go with a SIGINT or SIGTERM, and the process still ends by it") {
  for (const int sig : {SIGINT, SIGTERM}) {
    TempDir dir;
    const std::string a = dir / "x.bin.tmp-1", b = dir / "x.idx.tmp-1";
    const std::string kept = dir / "x.bin";
    for (const std::string& p : {a, b, kept}) write_file(p, "bytes");
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      const RemoveOnSignal cleanup({a, b});
      ::raise(sig);
      ::_exit(0);  // not reached: the signal ends the process
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == sig);
    CHECK_FALSE(std::filesystem::exists(a));
    CHECK_FALSE(std::filesystem::exists(b));
    CHECK(std::filesystem::exists(kept));  // only the registered paths
  }
  // Out of scope, the handlers are the ones before it: a second guard may follow the first.
  struct sigaction before {};
  ::sigaction(SIGINT, nullptr, &before);
  { const RemoveOnSignal first({}); }
  { const RemoveOnSignal second({}); }
  struct sigaction after {};
  ::sigaction(SIGINT, nullptr, &after);
  CHECK((after.sa_handler == before.sa_handler));
}

TEST_SUITE_END();
