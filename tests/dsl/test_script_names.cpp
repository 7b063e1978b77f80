// Names and values that executors write into launch scripts: the resolver rejects what a shell
// would read as code (issue 18 A), and experiment.name must be one plain folder name.
#include "helpers.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using namespace recipe::dsl::test;

namespace {

ResolveResult resolve_with(const json& patch) { return resolve_json(with(tiny_gpt(), patch)); }

bool mentions(const ResolveResult& r, const std::string& path, const std::string& needle) {
  for (const auto& v : r.violations)
    if (v.path == path && (v.message + " " + v.fix).find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("script names: hostile executor.env keys and values are rejected with key, value and fix") {
  json env = json::object();
  env["A=1; touch /tmp/recipe_injected; B"] = "2";
  auto r = resolve_with(json{{"executor", {{"env", env}}}});
  REQUIRE_FALSE(r.ok());
  const Violation* v = find_violation(r, "executor.env");
  REQUIRE(v != nullptr);
  CHECK(v->message.find("A=1; touch /tmp/recipe_injected; B") != std::string::npos);
  CHECK(v->message.find("not an environment variable name") != std::string::npos);
  CHECK_FALSE(v->fix.empty());

  for (const char* bad : {"1ABC", "A-B", "", "A B", "A\nB"}) {
    CAPTURE(bad);
    json e = json::object();
    e[bad] = "x";
    CHECK(find_violation(resolve_with(json{{"executor", {{"env", e}}}}), "executor.env") != nullptr);
  }
  // A value may hold anything a shell word can (it is quoted), but no line break or control byte.
  auto newline = resolve_with(json{{"executor", {{"env", {{"NCCL_DEBUG", "WARN\ntouch /tmp/x"}}}}}});
  REQUIRE(find_violation(newline, "executor.env.NCCL_DEBUG") != nullptr);
  CHECK(find_violation(newline, "executor.env.NCCL_DEBUG")->message.find("WARN\\ntouch") != std::string::npos);
  CHECK(resolve_with(json{{"executor", {{"env", {{"NCCL_DEBUG", "$(touch /tmp/x) 'q' \"d\" `b`"}}}}}}).ok());
  CHECK(resolve_with(json{{"executor", {{"env", {{"_OK_1", "1"}}}}}}).ok());
}

// issue 35 item 13: a recipe (or a run dir's resolved.toml) that sets LD_PRELOAD ran its library
// in every rank, as whoever launched it.
TEST_CASE("script names: executor.env may not set loader or shell-startup variables") {
  for (const char* name : {"LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "BASH_ENV", "ENV", "GCONV_PATH", "PATH"}) {
    CAPTURE(name);
    json e = json::object();
    e[name] = "/tmp/evil.so";
    const auto r = resolve_with(json{{"executor", {{"env", e}}}});
    REQUIRE_FALSE(r.ok());
    const Violation* v = find_violation(r, "executor.env");
    REQUIRE(v != nullptr);
    CHECK(v->message.find(std::string("executor.env.") + name) != std::string::npos);
    CHECK(v->message.find("because") != std::string::npos);
    CHECK(v->fix.find("shell that starts") != std::string::npos);
  }
  CHECK(resolve_with(json{{"executor", {{"env", {{"NCCL_DEBUG", "WARN"}, {"OMP_NUM_THREADS", "4"}}}}}}).ok());
}

TEST_CASE("script names: Slurm names, directives and MPI values cannot carry a shell line") {
  const json slurm = {{"kind", "slurm"}, {"gpus_per_node", 0}};
  struct Case {
    json executor;
    const char* path;
    const char* needle;
  };
  const Case cases[] = {
      {{{"partition", "gpu\ntouch /tmp/recipe_injected"}}, "executor.partition", "not a Slurm name"},
      {{{"partition", "gpu;reboot"}}, "executor.partition", "not a Slurm name"},
      {{{"account", "a b"}}, "executor.account", "not a Slurm name"},
      {{{"qos", "$(id)"}}, "executor.qos", "not a Slurm name"},
      {{{"sbatch_directives", {"--mem=0\ntouch /tmp/x"}}}, "executor.sbatch_directives", "control character"},
      {{{"sbatch_directives", {"touch /tmp/x"}}}, "executor.sbatch_directives", "not an sbatch option"},
      {{{"mpirun_args", {"--x\r"}}}, "executor.mpirun_args", "control character"},
      {{{"mca", {{"btl;x", "tcp"}}}}, "executor.mca", "not an MCA parameter name"},
      {{{"mca", {{"btl", "tcp\nx"}}}}, "executor.mca.btl", "control character"},
      {{{"hostfile", "h\n"}}, "executor.hostfile", "control character"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.executor.dump());
    json ex = slurm;
    ex.merge_patch(c.executor);
    auto r = resolve_with(json{{"executor", ex}});
    CHECK(mentions(r, c.path, c.needle));
  }
  json good = slurm;
  good.merge_patch(json{{"partition", "gpu,gpu-long"},
                        {"account", "proj_1.a-b"},
                        {"qos", "high"},
                        {"sbatch_directives", {"--constraint=h100&a100", "--comment=two words"}}});
  auto r = resolve_with(json{{"executor", good}});
  CHECK_MESSAGE(r.ok(), report(r));
}

TEST_CASE("script names: experiment.name is one plain folder name") {
  for (const std::string& bad :
       std::vector<std::string>{".", "..", "a/b", "run 1", "run\n1", std::string(101, 'x'), "a$b"}) {
    CAPTURE(bad);
    auto r = resolve_with(json{{"experiment", {{"name", bad}}}});
    REQUIRE(find_violation(r, "experiment.name") != nullptr);
    CHECK(find_violation(r, "experiment.name")->fix.find("letters, digits") != std::string::npos);
  }
  for (const std::string& good : std::vector<std::string>{"wiki", "gpt3_345m", "run-1.v2", std::string(100, 'x')}) {
    CAPTURE(good);
    CHECK(find_violation(resolve_with(json{{"experiment", {{"name", good}}}}), "experiment.name") == nullptr);
  }
}

TEST_SUITE_END();
