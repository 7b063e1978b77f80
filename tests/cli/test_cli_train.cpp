// End-to-end runs through the CLI: run dir contents, data prepare → indexed training, the worker
// verb, exit codes of the real binary, interruption.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "plan/exit_codes.hpp"
#include "cli_test_util.hpp"
#include "kernels/ops.hpp"

TEST_SUITE_BEGIN("cli");

using namespace recipe;
using namespace recipe::cli::testing;
namespace fs = std::filesystem;

namespace {

fs::path only_run_dir(const fs::path& experiments, const std::string& name) {
  fs::path root = experiments / name;
  std::vector<fs::path> runs;
  if (fs::is_directory(root))
    for (const auto& e : fs::directory_iterator(root)) runs.push_back(e.path());
  REQUIRE(runs.size() == 1);
  return runs[0];
}

}  // namespace

TEST_CASE("pretrain gpt_tiny on CPU fills a complete run dir") {
  use_built_binary_for_launch();
  TempDir tmp;
  auto r = run({"pretrain", "gpt_tiny", "--device", "cpu", "--max-steps", "5", "--experiments-dir", tmp.str(), "--name",
                "tiny", "optimizer.lr=0.001"});
  REQUIRE_MESSAGE(r.code == 0, (r.err + r.out));
  fs::path dir = only_run_dir(tmp.path(), "tiny");
  CHECK(dir.filename() == "run-1");
  CHECK(r.out.find("run dir: " + dir.string()) != std::string::npos);
  CHECK(r.out.find("finished: 5 steps") != std::string::npos);

  for (const char* f : {"recipe.lua", "overrides.txt", "resolved.toml", "git.json", "host.json", "launch.sh",
                        "status.json", "logs/rank-0.log", "metrics.jsonl"}) {
    CAPTURE(f);
    CHECK(fs::is_regular_file(dir / f));
  }
  CHECK(read_text(dir / "overrides.txt") ==
        "optimizer.lr=0.001\n--max-steps 5\n--device cpu\n--name tiny\n--experiments-dir " + tmp.str() + "\n");
  std::string metrics = read_text(dir / "metrics.jsonl");
  CHECK(count_lines(metrics) == 5);
  auto first = nlohmann::json::parse(metrics.substr(0, metrics.find('\n')));
  CHECK(first["step"] == 1);
  CHECK(first.contains("loss"));

  auto status = nlohmann::json::parse(read_text(dir / "status.json"));
  CHECK(status["state"] == "completed");
  CHECK(status["exit_code"] == 0);
  CHECK(status["steps"] == 5);
  CHECK(status["end_time"].is_string());

  auto host = nlohmann::json::parse(read_text(dir / "host.json"));
  CHECK(host["cpu"]["cores"].get<int>() > 0);
  CHECK(host["libraries"]["lua"].get<std::string>().find("Lua 5.4") == 0);
  auto git = nlohmann::json::parse(read_text(dir / "git.json"));
  CHECK(git.contains("repo"));
  if (!git["repo"].is_null() && git["dirty"].get<bool>()) CHECK(fs::is_regular_file(dir / "git.patch"));

  std::string launch = read_text(dir / "launch.sh");
  CHECK(launch.find("worker --run-dir " + dir.string()) != std::string::npos);
  CHECK(read_text(dir / "resolved.toml").find("max_steps = 5") != std::string::npos);
  CHECK(read_text(dir / "logs/rank-0.log").find("finished: 5 steps") != std::string::npos);

  // The worker verb reruns the same run dir from resolved.toml alone.
  auto w = run({"worker", "--run-dir", dir.string()});
  CHECK_MESSAGE(w.code == 0, w.err);
  CHECK(nlohmann::json::parse(read_text(dir / "status.json"))["state"] == "completed");

  // A second launch gets the next run id.
  auto r2 = run({"pretrain", "gpt_tiny", "--device", "cpu", "--max-steps", "1", "--experiments-dir", tmp.str(),
                 "--name", "tiny", "schedule.warmup_steps=0"});
  CHECK(r2.code == 0);
  CHECK(fs::is_directory(tmp.path() / "tiny" / "run-2"));
}

TEST_CASE("worker on a folder that is not a run dir is a usage error") {
  TempDir tmp;
  CHECK(run({"worker", "--run-dir", tmp.str()}).code == recipe::kExitUsage);
}

TEST_CASE("data prepare then pretrain on the indexed dataset") {
  TempDir tmp;
  fs::path text = tmp.path() / "corpus.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 200; ++i)
      out << "Paragraph " << i << ": the quick brown fox jumps over the lazy dog, again and again.\n\n";
  }
  std::string prefix = (tmp.path() / "corpus").string();
  auto prep = run(
      {"data", "prepare", "--input", text.string(), "--tokenizer", "byte", "--split-paragraphs", "--output", prefix});
  REQUIRE_MESSAGE(prep.code == 0, prep.err);
  CHECK(prep.out.find("200 documents") != std::string::npos);
  CHECK(fs::is_regular_file(prefix + ".bin"));
  CHECK(fs::is_regular_file(prefix + ".idx"));

  auto r = run({"pretrain", "gpt_tiny", "data.kind=indexed", "data.path=" + prefix, "data.tokenizer=byte", "--device",
                "cpu", "--max-steps", "3", "--experiments-dir", tmp.str(), "--name", "indexed"});
  REQUIRE_MESSAGE(r.code == 0, (r.err + r.out));
  fs::path dir = only_run_dir(tmp.path(), "indexed");
  CHECK(count_lines(read_text(dir / "metrics.jsonl")) == 3);

  auto bad = run({"data", "prepare", "--input", text.string(), "--tokenizer", "gpt2_bpe", "--output", prefix});
  CHECK(bad.code == recipe::kExitUsage);
  CHECK(bad.err.find("--vocab-file") != std::string::npos);
}

TEST_CASE("the recipe binary's exit codes") {
  REQUIRE(fs::exists(recipe_binary()));
  TempDir tmp;
  CHECK(run_binary("").code == recipe::kExitUsage);
  CHECK(run_binary("pretrain").code == recipe::kExitUsage);
  CHECK(run_binary("show no_such_preset").code == recipe::kExitInvalidRecipe);
  CHECK(run_binary("validate llama3_70b --nodes 4 --gpus-per-node 8").code == 0);
  auto bad = run_binary("validate llama3_70b --nodes 4 --gpus-per-node 6");
  CHECK(bad.code == recipe::kExitInvalidRecipe);
  CHECK(bad.out.find("world") != std::string::npos);
  if (!(kernels::built_with_cuda() && kernels::query_gpus().count > 0)) {
    auto cuda = run_binary("pretrain gpt_tiny --device cuda --max-steps 1 --experiments-dir " + tmp.str());
    CHECK(cuda.code == recipe::kExitEnvironment);
    CHECK(cuda.out.find("--device cpu") != std::string::npos);
    CHECK(fs::is_empty(tmp.path()));
  }
  auto ok =
      run_binary("pretrain gpt_tiny schedule.warmup_steps=0 --device cpu --max-steps 2 --experiments-dir " + tmp.str());
  CHECK_MESSAGE(ok.code == 0, ok.out);
}

TEST_CASE("SIGINT marks the run interrupted and exits 130") {
  REQUIRE(fs::exists(recipe_binary()));
  TempDir tmp;
  fs::path log = tmp.path() / "out.log";
  // Unflushed test output would otherwise be written twice: by the child's freopen and the parent.
  std::fflush(stdout);
  std::cout.flush();
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    FILE* f = std::freopen(log.c_str(), "w", stdout);
    (void)f;
    ::dup2(STDOUT_FILENO, STDERR_FILENO);
    std::string dir = tmp.str();
    ::execl(recipe_binary().c_str(), "recipe", "pretrain", "gpt_tiny", "--device", "cpu", "--max-steps", "1000000",
            "--experiments-dir", dir.c_str(), "--name", "long", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Wait until training is underway (status "running" and at least one metrics line).
  fs::path run = tmp.path() / "long" / "run-1";
  bool running = false;
  for (int i = 0; i < 600 && !running; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (fs::is_regular_file(run / "status.json") && fs::is_regular_file(run / "metrics.jsonl") &&
        read_text(run / "status.json").find("\"running\"") != std::string::npos &&
        !read_text(run / "metrics.jsonl").empty())
      running = true;
  }
  CHECK(running);
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == recipe::kExitInterrupted);
  auto st = nlohmann::json::parse(read_text(run / "status.json"));
  CHECK(st["state"] == "interrupted");
  CHECK(st["exit_code"] == 130);
  // How far it got and when it ended, written by the handler (metrics.jsonl has a line per step).
  CHECK(st["steps"].get<int>() >= 1);
  CHECK(st["end_time"].is_string());
  CHECK(st["end_time"].get<std::string>().size() == 20);
  CHECK(st["end_time"].get<std::string>().rfind("20", 0) == 0);
  CHECK(st["end_time"].get<std::string>() >= st["start_time"].get<std::string>());
}

TEST_CASE("settings this version cannot execute fail validate and train with exit 1, naming the key, and no run dir") {
  const struct {
    std::vector<std::string> recipe;  // preset + overrides
    const char* key;
    const char* fix;
  } cases[] = {
      {{"gpt_tiny", "parallelism.tp=2", "parallelism.cp=2", "executor.cpu_ranks=4", "parallelism.sequence_parallel=true"},
       "parallelism.sequence_parallel",
       "set parallelism.sequence_parallel=false or parallelism.cp=1"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.recipe[0]);
    CAPTURE(c.key);
    std::vector<std::string> validate = {"validate"};
    validate.insert(validate.end(), c.recipe.begin(), c.recipe.end());
    auto v = run(validate);
    CHECK(v.code == recipe::kExitInvalidRecipe);
    CHECK_MESSAGE(v.err.find(c.key) != std::string::npos, v.err);
    CHECK_MESSAGE(v.err.find("not implemented in this version") != std::string::npos, v.err);
    CHECK_MESSAGE(v.err.find(c.fix) != std::string::npos, v.err);

    TempDir tmp;
    const bool lora = std::string(c.key) == "peft.kind";
    std::vector<std::string> train = {lora ? "finetune" : "pretrain"};
    train.insert(train.end(), c.recipe.begin(), c.recipe.end());
    for (const char* a : {"--device", "cpu", "--max-steps", "1", "--experiments-dir"}) train.push_back(a);
    train.push_back(tmp.str());
    auto t = run(train);
    CHECK(t.code == recipe::kExitInvalidRecipe);
    CHECK_MESSAGE(t.err.find(c.key) != std::string::npos, t.err);
    CHECK(fs::is_empty(tmp.path()));  // no run dir, no process
  }
}

TEST_SUITE_END();
