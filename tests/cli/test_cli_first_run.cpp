// A new user's first commands: a mistyped verb, `--help`, the "use it with:" line of `data prepare`,
// `show` on a machine without a GPU, and a run dir resumed from another directory.
#include <doctest/doctest.h>

#include <filesystem>
#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "kernels/ops.hpp"
#include "plan/exit_codes.hpp"
#include "tests/cli/cli_test_util.hpp"

TEST_SUITE_BEGIN("cli");

using namespace recipe::cli::testing;
namespace fs = std::filesystem;

namespace {

// GPT-2's byte → printable-unicode mapping (the alphabet of a byte-level vocab.json).
std::string byte_symbol(unsigned char b) {
  auto printable = [](int x) { return (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE); };
  uint32_t cp = b;
  if (!printable(b)) {
    cp = 256;
    for (int x = 0; x < b; ++x) cp += !printable(x);
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// The words after "use it with: " on the output's last such line.
std::vector<std::string> use_it_with(const std::string& out) {
  const size_t at = out.rfind("use it with: ");
  REQUIRE(at != std::string::npos);
  std::istringstream words(out.substr(at + 13, out.find('\n', at) - at - 13));
  std::vector<std::string> keys;
  for (std::string w; words >> w;) keys.push_back(w);
  return keys;
}

// Runs `f` with the working directory set to `dir`.
template <class F>
void in_dir(const fs::path& dir, F f) {
  const fs::path old = fs::current_path();
  fs::current_path(dir);
  f();
  fs::current_path(old);
}

}  // namespace

TEST_CASE("an unknown verb is named, with the verbs and a suggestion") {
  auto r = run({"pretrian", "gpt_tiny"});
  CHECK(r.code == recipe::kExitUsage);
  CHECK_MESSAGE(r.err.find("unknown verb 'pretrian'") != std::string::npos, r.err);
  CHECK(r.err.find("did you mean pretrain") != std::string::npos);
  CHECK(r.err.find("validate") != std::string::npos);
  CHECK(r.err.find("worker") == std::string::npos);  // hidden verbs stay hidden
  CHECK(r.err.find("were not expected") == std::string::npos);
  CHECK(run({"list"}).code == 0);  // a known verb still parses
}

TEST_CASE("recipe --help cites only files that exist") {
  auto r = run({"--help"});
  CHECK(r.code == 0);
  const std::regex file(R"(([A-Za-z0-9_./-]+/[A-Za-z0-9_.-]+\.(lua|toml|jsonl|md)))");
  int cited = 0;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), file), end; it != end; ++it, ++cited) {
    CAPTURE(it->str());
    CHECK(fs::exists(fs::path(RECIPE_SOURCE_DIR) / it->str()));
  }
  MESSAGE(cited << " file(s) cited");
}

TEST_CASE("data prepare's use-it-with line carries every key the resolver then needs") {
  TempDir tmp;
  const std::string text = (tmp.path() / "corpus.txt").string();
  {
    std::ofstream out(text);
    for (int i = 0; i < 100; ++i) out << "paragraph " << i << " of a small corpus for the tokenizer test\n\n";
  }
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_symbol(static_cast<unsigned char>(b))] = b;
  vocab["<|endoftext|>"] = 256;
  std::ofstream(tmp.path() / "vocab.json") << vocab.dump();
  std::ofstream(tmp.path() / "merges.txt") << "#version: 0.2\n";
  const std::string prefix = (tmp.path() / "corpus").string();
  auto prep = run({"data", "prepare", "--input", text, "--tokenizer", "gpt2_bpe", "--vocab-file",
                   (tmp.path() / "vocab.json").string(), "--merges-file", (tmp.path() / "merges.txt").string(),
                   "--split-paragraphs", "--output", prefix});
  REQUIRE_MESSAGE(prep.code == 0, prep.err);
  std::vector<std::string> args = {"validate", "gpt_tiny", "model.vocab_size=257"};
  for (const auto& k : use_it_with(prep.out)) args.push_back(k);
  CHECK(std::find(args.begin(), args.end(), "data.vocab_file=" + (tmp.path() / "vocab.json").string()) != args.end());
  auto v = run(args);
  CHECK_MESSAGE(v.code == 0, v.err);
}

TEST_CASE("show keeps trainer.device=auto portable on a machine without a GPU") {
  if (recipe::kernels::built_with_cuda() && recipe::kernels::query_gpus().count > 0) return;  // GPU host
  auto r = run({"show", "gpt3_345m", "--format", "toml"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK_MESSAGE(r.out.find("device = 'auto'") != std::string::npos, r.out);
  auto cpu = run({"show", "gpt3_345m", "--device", "cpu"});
  CHECK(cpu.out.find("device = 'cpu'") != std::string::npos);  // what the user asked for stays
}

TEST_CASE("a run dir made with relative data paths resumes from another directory") {
  TempDir tmp;
  fs::create_directories(tmp.path() / "work" / "data");
  {
    std::ofstream out(tmp.path() / "work" / "corpus.txt");
    for (int i = 0; i < 200; ++i) out << "line " << i << " of text to train a tiny model on\n\n";
  }
  in_dir(tmp.path() / "work", [&] {
    auto prep = run({"data", "prepare", "--input", "corpus.txt", "--tokenizer", "byte", "--split-paragraphs",
                     "--output", "data/corpus"});
    REQUIRE_MESSAGE(prep.code == 0, prep.err);
    auto r = run({"pretrain", "gpt_tiny", "data.kind=indexed", "data.path=data/corpus", "data.tokenizer=byte",
                  "--device", "cpu", "--max-steps", "2", "--experiments-dir", "exp", "--name", "rel"});
    REQUIRE_MESSAGE(r.code == 0, r.err);
  });
  const fs::path run_dir = tmp.path() / "work" / "exp" / "rel" / "run-1";
  const std::string resolved = read_text(run_dir / "resolved.toml");
  CHECK_MESSAGE(resolved.find((fs::canonical(tmp.path()) / "work" / "data" / "corpus").string()) != std::string::npos,
                resolved);
  in_dir(tmp.path(), [&] {  // elsewhere: the relative data path would not be found from here
    auto resumed = run({"runs", "resume", run_dir.string()});
    CHECK_MESSAGE(resumed.code == 0, (resumed.err + resumed.out));
  });
}

TEST_SUITE_END();
