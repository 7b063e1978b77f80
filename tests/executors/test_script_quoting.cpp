// Launch scripts quote every value they carry (issue 18 A). These plans are built in code, past
// the resolver's checks, so the executors' own defences are what is tested: the generated
// scripts are run by a real shell with stand-ins for srun, mpirun, scontrol and the recipe binary,
// and none of the commands hidden in the values may run.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "executors/launch.hpp"
#include "tests/executors/exec_test_util.hpp"

TEST_SUITE_BEGIN("executors");

using namespace recipe::exec;
using namespace recipe::exec::testing;
namespace fs = std::filesystem;

namespace {

void write_executable(const fs::path& p, const std::string& text) {
  write_text(p, text);
  fs::permissions(p, fs::perms::owner_all, fs::perm_options::add);
}

// Stand-ins on PATH: they record what reached them and exit 0.
fs::path make_stubs(const fs::path& root) {
  fs::path bin = root / "bin";
  const std::string seen = shell_quote((root / "seen").string());
  write_executable(bin / "srun", "#!/bin/sh\nexit 0\n");  // `srun --mpi=list` prints no pmix: mpirun is used
  write_executable(bin / "scontrol", "#!/bin/sh\nexit 0\n");
  write_executable(bin / "mpirun", "#!/bin/sh\nprintf '%s' \"$HOSTILE\" > " + seen + "\nexit 0\n");
  write_executable(bin / "recipe", "#!/bin/sh\nexit 0\n");
  return bin;
}

int run_script(const fs::path& bin, const std::string& shell, const fs::path& script) {
  const std::string cmd = "PATH=" + shell_quote(bin.string()) + ":\"$PATH\" SLURM_JOB_ID=7 HOSTILE= " + shell + " " +
                          shell_quote(script.string()) + " >/dev/null 2>&1";
  return std::system(cmd.c_str());
}

recipe::plan::Plan plan_of(recipe::plan::ExecutorKind kind, const std::string& env_value) {
  recipe::plan::Plan plan;
  plan.trainer.device = recipe::plan::Device::cpu;
  plan.parallelism.world_size = 2;
  plan.parallelism.dp = 2;
  plan.executor.kind = kind;
  plan.executor.cpu_ranks = 2;
  plan.executor.env = {{"HOSTILE", env_value}};
  plan.experiment.name = "quoting";
  return plan;
}

}  // namespace

TEST_CASE("launch scripts: hostile values run as data, never as commands") {
  TempDir tmp;
  const fs::path bin = make_stubs(tmp.path());
  const std::string marker = (tmp.path() / "injected").string();
  // A run dir whose name is itself hostile: it appears in #SBATCH --output and in every command.
  const fs::path run_dir = tmp.path() / ("run $(touch " + marker + "-dir) 'q'");
  fs::create_directories(run_dir / "logs");

  const std::string env_value =
      "$(touch " + marker + "-1) `touch " + marker + "-2` '; touch " + marker + "-3; ' \"\n touch " + marker + "-4\n";
  for (auto kind :
       {recipe::plan::ExecutorKind::slurm, recipe::plan::ExecutorKind::local, recipe::plan::ExecutorKind::mpi}) {
    CAPTURE(static_cast<int>(kind));
    auto plan = plan_of(kind, env_value);
    if (kind == recipe::plan::ExecutorKind::slurm) {
      // Shell metacharacters in Slurm fields stay inside their quoted #SBATCH words.
      plan.executor.partition = "gpu$(touch " + marker + "-5)";
      plan.executor.account = "a;touch " + marker + "-6";
      plan.executor.sbatch_directives = {"--comment=x`touch " + marker + "-7`"};
      plan.experiment.name = "n$(touch " + marker + "-8)";
    }
    const LaunchCommand cmd = launch_command(plan, run_dir.string(), (bin / "recipe").string());
    const fs::path script = tmp.path() / "launch.sh";
    write_text(script, cmd.script);
    fs::remove(tmp.path() / "seen");
    CHECK(run_script(bin, kind == recipe::plan::ExecutorKind::slurm ? "bash" : "sh", script) == 0);
    // The value arrived whole, and nothing in it ran.
    CHECK(read_text(tmp.path() / "seen") == env_value);
    for (const auto& e : fs::directory_iterator(tmp.path()))
      CHECK_MESSAGE(e.path().filename().string().rfind("injected", 0) != 0, "ran: " << e.path());
    if (kind == recipe::plan::ExecutorKind::slurm) {
      CHECK(cmd.script.find("#SBATCH '--partition=gpu$(touch ") != std::string::npos);
      CHECK(cmd.script.find("#SBATCH " + shell_quote("--output=" + run_dir.string() + "/logs/slurm-%j.out") + "\n") !=
            std::string::npos);
    }
  }
}

TEST_CASE("launch scripts: a name that cannot be quoted, or a line break in an #SBATCH line, is refused") {
  auto plan = plan_of(recipe::plan::ExecutorKind::local, "1");
  plan.executor.env = {{"A=1; touch /tmp/recipe_injected; B", "2"}};
  CHECK_THROWS_AS(launch_command(plan, "/runs/x/run-1", "/opt/recipe"), std::invalid_argument);
  // A plan built in code cannot set what the resolver refuses either (issue 35 item 13).
  for (const char* name : {"LD_PRELOAD", "BASH_ENV"}) {
    CAPTURE(name);
    plan.executor.env = {{name, "/tmp/recipe_injected.so"}};
    CHECK_THROWS_WITH_AS(launch_command(plan, "/runs/x/run-1", "/opt/recipe"),
                         doctest::Contains("which a recipe may not set"), std::invalid_argument);
  }

  for (const char* field : {"partition", "account", "qos", "directive", "name"}) {
    CAPTURE(field);
    auto slurm = plan_of(recipe::plan::ExecutorKind::slurm, "1");
    const std::string hostile = "gpu\ntouch /tmp/recipe_injected";
    if (std::string(field) == "partition") slurm.executor.partition = hostile;
    if (std::string(field) == "account") slurm.executor.account = hostile;
    if (std::string(field) == "qos") slurm.executor.qos = hostile;
    if (std::string(field) == "directive") slurm.executor.sbatch_directives = {"--mem=0\ntouch /tmp/recipe_injected"};
    if (std::string(field) == "name") slurm.experiment.name = hostile;
    CHECK_THROWS_AS(launch_command(slurm, "/runs/x/run-1", "/opt/recipe"), std::invalid_argument);
  }
  CHECK_FALSE(fs::exists("/tmp/recipe_injected"));
}

TEST_SUITE_END();
