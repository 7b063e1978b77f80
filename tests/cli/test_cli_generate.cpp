// `recipe generate` end to end on CPU: text from a pretrained run dir and from a LoRA fine-tune of
// it (greedy twice gives the same text, a sampling seed reproduces its text), a conversation with
// --messages and a chat template; and the errors a user can act on: no tokenizer in the plan, a
// prompt longer than the model, a missing checkpoint, no prompt.
#include <doctest/doctest.h>

#include "cli_test_util.hpp"
#include "plan/exit_codes.hpp"

TEST_SUITE_BEGIN("cli");

using namespace recipe;
using namespace recipe::cli::testing;
namespace fs = std::filesystem;

namespace {

fs::path only_run(const fs::path& experiments, const std::string& name) {
  std::vector<fs::path> runs;
  for (const auto& e : fs::directory_iterator(experiments / name)) runs.push_back(e.path());
  REQUIRE(runs.size() == 1);
  return runs[0];
}

}  // namespace

TEST_CASE("recipe generate: text from a pretrained run and from its LoRA fine-tune; errors") {
  use_built_binary_for_launch();
  TempDir tmp;
  auto pre = run({"pretrain", "gpt_tiny", "--device", "cpu", "--max-steps", "3", "--experiments-dir", tmp.str(),
                  "--name", "base"});
  REQUIRE_MESSAGE(pre.code == 0, (pre.err + pre.out));
  const std::string run_dir = only_run(tmp.path(), "base").string();

  // gpt_tiny trains on mock tokens and names no tokenizer: the user must give one.
  auto none = run({"generate", run_dir, "--prompt", "Hello"});
  CHECK(none.code == kExitUsage);
  CHECK(none.err.find("names no tokenizer") != std::string::npos);
  CHECK(none.err.find("--tokenizer byte") != std::string::npos);

  const std::vector<std::string> greedy = {"generate", run_dir,       "--prompt", "Hello",    "--max-new-tokens",
                                           "8",        "--tokenizer", "byte",     "--device", "cpu"};
  auto g1 = run(greedy), g2 = run(greedy);
  REQUIRE_MESSAGE(g1.code == 0, g1.err);
  CHECK(g1.out == g2.out);
  CHECK(!g1.out.empty());
  CHECK(g1.err.find("generate: 5 prompt tokens") != std::string::npos);
  CHECK(g1.err.find("tok/s") != std::string::npos);
  // The same as an override of the plan's key instead of the flag.
  auto g3 = run({"generate", run_dir, "data.tokenizer=byte", "--prompt", "Hello", "-n", "8"});
  CHECK(g3.code == 0);
  CHECK(g3.out == g1.out);

  // Without -n: 128 new tokens, or what the model's 64 positions leave after the prompt.
  auto fill = run({"generate", run_dir, "--prompt", "Hello", "--tokenizer", "byte"});
  CHECK_MESSAGE(fill.code == 0, fill.err);
  CHECK(
      (fill.err.find("59 new") != std::string::npos || fill.err.find("stopped at the end token") != std::string::npos));

  std::vector<std::string> sampled = greedy;
  sampled.insert(sampled.end(), {"--temperature", "1.5", "--top-k", "50", "--top-p", "0.95", "--seed", "4"});
  auto s1 = run(sampled), s2 = run(sampled);
  REQUIRE_MESSAGE(s1.code == 0, s1.err);
  CHECK(s1.out == s2.out);

  // A conversation, rendered with the plain template.
  const fs::path messages = tmp.path() / "chat.json";
  std::ofstream(messages) << R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])";
  auto chat = run({"generate", run_dir, "--messages", messages.string(), "--chat-template", "plain", "--tokenizer",
                   "byte", "-n", "4"});
  CHECK_MESSAGE(chat.code == 0, chat.err);
  // "Be brief.\n\nUser: Hi\n\nAssistant: ": 9 + 2 + 6 + 2 + 2 + 11 bytes.
  CHECK(chat.err.find("generate: 32 prompt tokens") != std::string::npos);
  auto no_template = run({"generate", run_dir, "--messages", messages.string(), "--tokenizer", "byte"});
  CHECK(no_template.code == kExitUsage);
  CHECK(no_template.err.find("--chat-template") != std::string::npos);

  // A LoRA fine-tune of the run: its checkpoint loads through the same path and generates.
  auto ft = run({"finetune", "gpt_tiny_lora", "checkpoint.load=" + run_dir, "--device", "cpu", "--max-steps", "2",
                 "--experiments-dir", tmp.str(), "--name", "lora"});
  REQUIRE_MESSAGE(ft.code == 0, (ft.err + ft.out));
  auto lora =
      run({"generate", only_run(tmp.path(), "lora").string(), "--prompt", "Hello", "-n", "8", "--tokenizer", "byte"});
  CHECK_MESSAGE(lora.code == 0, lora.err);

  // Errors: too long for the model's 64 positions, no checkpoint, no prompt.
  auto long_prompt = run({"generate", run_dir, "--prompt", std::string(60, 'a'), "-n", "10", "--tokenizer", "byte"});
  CHECK(long_prompt.code == kExitUsage);
  CHECK(long_prompt.err.find("model.max_position_embeddings=64") != std::string::npos);
  CHECK(long_prompt.err.find("shorten the prompt or lower --max-new-tokens") != std::string::npos);
  auto missing = run({"generate", (tmp.path() / "nope").string(), "--prompt", "x"});
  CHECK(missing.code == kExitUsage);
  CHECK(missing.err.find("does not exist") != std::string::npos);
  fs::create_directories(tmp.path() / "empty");
  auto empty = run({"generate", (tmp.path() / "empty").string(), "--prompt", "x"});
  CHECK(empty.code == kExitUsage);
  CHECK(empty.err.find("holds no checkpoint") != std::string::npos);
  auto no_prompt = run({"generate", run_dir, "--tokenizer", "byte"});
  CHECK(no_prompt.code == kExitUsage);
  CHECK(no_prompt.err.find("--prompt") != std::string::npos);
  auto bad_top_p =
      run({"generate", run_dir, "--prompt", "x", "--tokenizer", "byte", "--temperature", "1", "--top-p", "0"});
  CHECK(bad_top_p.code == kExitUsage);
  CHECK(bad_top_p.err.find("--top-p") != std::string::npos);
}

TEST_SUITE_END();
