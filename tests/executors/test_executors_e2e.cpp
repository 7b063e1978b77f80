// `recipe pretrain` through the executors with the built binary: one gpt_tiny recipe file, two
// data-parallel CPU ranks, run by the local executor (mpirun on this host), the mpi executor and a
// real single-node Slurm (2 tasks) gives one resolved plan and one loss curve; a killed local
// rank ends its run at once; a Slurm job whose ranks fail is reported failed; the time-limit
// signal requeues a Slurm job.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/data/indexed_dataset.hpp"
#include "runs/run_dir.hpp"
#include "runs/runs_diff.hpp"
#include "runs/runs_index.hpp"
#include "executors/slurm_executor.hpp"
#include "tests/executors/exec_test_util.hpp"

TEST_SUITE_BEGIN("executors");

namespace fs = std::filesystem;
using namespace recipe::exec;
using namespace recipe::exec::testing;
using recipe::cli::testing::count_lines;
using recipe::cli::testing::recipe_binary;
using recipe::cli::testing::run_binary;

namespace {

// gpt_tiny, mock data, dp = 2 on 2 CPU ranks, 10 steps: the file every executor runs unchanged.
fs::path write_tiny_dp2_recipe(const fs::path& dir, int max_steps = 10) {
  auto path = dir / "tiny_dp2.toml";
  write_text(path,
             "preset = \"gpt_tiny\"\n"
             "\n[trainer]\nmax_steps = " +
                 std::to_string(max_steps) +
                 "\nglobal_batch_size = 16\ndevice = \"cpu\"\n"
                 "\n[data]\nkind = \"mock\"\n"
                 "\n[parallelism]\ndp = 2\n"
                 "\n[executor]\ncpu_ranks = 2\n"
                 "\n[experiment]\nname = \"tiny_dp2\"\n");
  return path;
}

// resolved.toml as flat keys, without the [executor] section (which names the executor).
std::map<std::string, std::string> plan_without_executor(const fs::path& run) {
  std::map<std::string, std::string> keys = flatten_toml_file((run / "resolved.toml").string());
  std::erase_if(keys, [](const auto& kv) { return kv.first.rfind("executor.", 0) == 0; });
  return keys;
}

std::vector<double> losses(const fs::path& run) {
  std::vector<double> out;
  std::ifstream in(run / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line).at("loss").get<double>());
  return out;
}

// Polls `done` every 100 ms for up to `seconds`.
template <class F>
bool until(F done, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return done();
}

// Steps of the runs that are stopped by a signal part-way: long enough to signal them mid-run.
constexpr int kLongSteps = 60;

}  // namespace

TEST_CASE("one gpt_tiny recipe file, 2 data-parallel CPU ranks: local, mpi and slurm agree") {
  TempDir tmp;
  auto exp = tmp.path() / "exp";
  auto recipe = write_tiny_dp2_recipe(tmp.path());
  const std::string common = recipe.string() + " --experiments-dir " + exp.string();

  // local: mpirun on this host, rank-prefixed output, one log per rank.
  auto local = run_binary("pretrain " + common);
  REQUIRE_MESSAGE(local.code == 0, local.out);
  CHECK(local.out.find("[rank 0] ") != std::string::npos);
  CHECK(local.out.find("[rank 0] finished: 10 steps") != std::string::npos);
  auto run1 = exp / "tiny_dp2" / "run-1";
  CHECK(read_status(run1.string()).state == "completed");
  CHECK(read_status(run1.string()).steps == 10);
  CHECK(fs::exists(run1 / "logs" / "rank-0.log"));
  CHECK(fs::exists(run1 / "logs" / "rank-1.log"));
  CHECK(read_text(run1 / "logs" / "rank-0.log").find("world: 2 ranks") != std::string::npos);
  CHECK(read_text(run1 / "launch.sh").find("mpirun -np 2 --oversubscribe") != std::string::npos);
  const std::vector<double> curve = losses(run1);
  REQUIRE(curve.size() == 10);
  CHECK(curve.front() > curve.back());

  // mpi: the same file through the mpi executor (no hostfile: this host). --oversubscribe only
  // keeps a host whose cores Open MPI counts as fewer than 2 slots from refusing.
  auto mpi = run_binary("pretrain " + common + " --executor mpi executor.mpirun_args=[--oversubscribe]");
  REQUIRE_MESSAGE(mpi.code == 0, mpi.out);
  auto run2 = exp / "tiny_dp2" / "run-2";
  CHECK(read_status(run2.string()).state == "completed");
  CHECK(plan_without_executor(run2) == plan_without_executor(run1));
  CHECK(read_text(run2 / "metrics.jsonl") == read_text(run1 / "metrics.jsonl"));  // bitwise
  const std::vector<double> curve2 = losses(run2);
  REQUIRE(curve2.size() == curve.size());
  for (size_t i = 0; i < curve.size(); ++i) CHECK(curve2[i] == doctest::Approx(curve[i]).epsilon(1e-6));

  // `runs diff` of the two: only executor keys differ in the plan, nothing in the final metrics.
  RunsDiff d = diff_runs(run1.string(), run2.string());
  CHECK_FALSE(d.config.empty());
  for (const auto& k : d.config) CHECK_MESSAGE(k.key.rfind("executor.", 0) == 0, k.key);
  bool loss_differs = false;
  for (const auto& m : d.metrics) loss_differs |= m.key == "loss";
  CHECK_FALSE(loss_differs);

  SlurmCluster cluster((tmp.path() / "slurm").string());
  if (!cluster.up) {
    MESSAGE("slurm part skipped: no local Slurm (" << cluster.why_down() << ")");
    return;
  }
  auto sub = run_binary("pretrain " + common + " --executor slurm");
  REQUIRE_MESSAGE(sub.code == 0, sub.out);
  CHECK(sub.out.find("submitted slurm job") != std::string::npos);
  auto run3 = exp / "tiny_dp2" / "run-3";
  std::string job = recorded_slurm_job(run3.string());
  REQUIRE_FALSE(job.empty());
  CHECK(wait_slurm_final(job, 60) == "COMPLETED");
  CHECK_MESSAGE(read_status(run3.string()).state == "completed", read_text(run3 / "logs" / ("slurm-" + job + ".out")));
  CHECK(plan_without_executor(run3) == plan_without_executor(run1));
  CHECK(read_text(run3 / "metrics.jsonl") == read_text(run1 / "metrics.jsonl"));
  const std::vector<double> curve3 = losses(run3);
  REQUIRE(curve3.size() == curve.size());
  for (size_t i = 0; i < curve.size(); ++i) CHECK(curve3[i] == doctest::Approx(curve[i]).epsilon(1e-6));
  // srun writes each task's log; only world rank 0 prints progress and the summary, once.
  std::string log0 = read_text(run3 / "logs" / "rank-0.log");
  CHECK(log0.find("finished: 10 steps") != std::string::npos);
  CHECK(log0.find("finished: 10 steps") == log0.rfind("finished: 10 steps"));
  CHECK(fs::exists(run3 / "logs" / "rank-1.log"));
  CHECK(read_text(run3 / "logs" / "rank-1.log").find("finished") == std::string::npos);
  auto st = run_binary("runs status tiny_dp2/run-3 --experiments-dir " + exp.string());
  CHECK(st.out.find("tiny_dp2/run-3: completed") != std::string::npos);

  // A job whose ranks cannot start training fails, and both the job's own record and `recipe runs
  // status` say so. (A missing dataset is refused before submission now; token ids beyond
  // model.vocab_size are found only when the ranks read the data.)
  const std::string oov = (tmp.path() / "out_of_vocab").string();
  {
    recipe::data::IndexedDatasetWriter w(oov + ".bin", oov + ".idx", recipe::data::TokenDType::uint16);
    const std::vector<int32_t> doc(200, 60000);  // gpt_tiny's vocabulary is 256
    for (int d = 0; d < 100; ++d) w.add_document(doc);
    w.finish();
  }
  auto bad = run_binary("pretrain " + common + " --executor slurm data.kind=indexed data.path=" + oov);
  REQUIRE_MESSAGE(bad.code == 0, bad.out);
  auto run4 = exp / "tiny_dp2" / "run-4";
  std::string bad_job = recorded_slurm_job(run4.string());
  REQUIRE_FALSE(bad_job.empty());
  CHECK(wait_slurm_final(bad_job, 60) == "FAILED");
  auto bad_st = run_binary("runs status tiny_dp2/run-4 --experiments-dir " + exp.string());
  CHECK_MESSAGE(bad_st.out.find("tiny_dp2/run-4: failed") != std::string::npos, bad_st.out);
  RunStatus rs = read_status(run4.string());
  CHECK(rs.state == "failed");
  CHECK_MESSAGE(rs.message.find("rank ") != std::string::npos, rs.message);
  CHECK_MESSAGE(read_text(run4 / "logs" / "rank-0.log").find("out_of_vocab.bin holds token ids") != std::string::npos,
                read_text(run4 / "logs" / "rank-0.log"));

  // The time-limit warning (--signal=B:USR1@120 sends SIGUSR1 to the batch shell; here scancel
  // sends it at once): the script forwards it, the ranks save a checkpoint and stop, the job
  // requeues itself, and the requeued job resumes from the checkpoint and finishes: its metrics
  // equal those of an uninterrupted run, bitwise.
  const std::string long_steps = "trainer.max_steps=" + std::to_string(kLongSteps);
  auto longrun = run_binary("pretrain " + common + " --executor slurm " + long_steps);
  REQUIRE_MESSAGE(longrun.code == 0, longrun.out);
  auto run5 = exp / "tiny_dp2" / "run-5";
  std::string long_job = recorded_slurm_job(run5.string());
  REQUIRE_FALSE(long_job.empty());
  CHECK(until([&] { return recipe::cli::testing::count_lines(read_text(run5 / "metrics.jsonl")) >= 2; }, 60));
  CHECK(run_command({"scancel", "--signal=USR1", "--batch", long_job}).status == 0);
  CHECK(until([&] { return read_status(run5.string()).state == "queued"; }, 60));
  const std::string requeue_message = read_status(run5.string()).message;
  CHECK_MESSAGE(requeue_message.find("requeued") != std::string::npos, requeue_message);
  CHECK_MESSAGE(requeue_message.find("saved a checkpoint") != std::string::npos, requeue_message);
  const std::string final_state = wait_slurm_final(long_job, 240);
  const std::string long_log0 = read_text(run5 / "logs" / "rank-0.log");
  CHECK_MESSAGE(final_state == "COMPLETED", long_log0);
  CHECK(read_status(run5.string()).state == "completed");
  CHECK(long_log0.find("rank 0 received SIGUSR1: stopping after this step with a checkpoint") != std::string::npos);
  CHECK(read_text(run5 / "logs" / "rank-1.log").find("rank 1 received SIGUSR1") != std::string::npos);
  CHECK(long_log0.find("resumed from " + (run5 / "checkpoints" / "step-").string()) != std::string::npos);
  auto reference = run_binary("pretrain " + common + " " + long_steps);  // local, uninterrupted
  REQUIRE_MESSAGE(reference.code == 0, reference.out);
  CHECK(count_lines(read_text(run5 / "metrics.jsonl")) == kLongSteps);
  CHECK(read_text(run5 / "metrics.jsonl") == read_text(exp / "tiny_dp2" / "run-6" / "metrics.jsonl"));
}

TEST_CASE("killing one local rank ends the run within seconds, marked failed, nothing left running") {
  TempDir tmp;
  auto exp = tmp.path() / "exp";
  auto recipe = write_tiny_dp2_recipe(tmp.path(), 100000);
  auto out_path = tmp.path() / "pretrain.out";
  pid_t driver = ::fork();
  if (driver == 0) {
    int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::execl(recipe_binary().c_str(), "recipe", "pretrain", recipe.c_str(), "--experiments-dir", exp.c_str(), nullptr);
    ::_exit(127);
  }
  REQUIRE(driver > 0);
  auto run = exp / "tiny_dp2" / "run-1";
  const std::string needle = "worker --run-dir " + run.string();

  // Wait until both ranks train (a few steps in metrics.jsonl). mpirun's command line holds the
  // worker's too; the ranks are the processes with an MPI rank in their environment.
  std::vector<long> workers;
  long rank1 = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline && rank1 == 0) {
    workers = pids_with_cmdline(needle);
    if (recipe::cli::testing::count_lines(read_text(run / "metrics.jsonl")) >= 3)
      for (long pid : workers)
        if (environ_value(pid, "OMPI_COMM_WORLD_RANK") == "1") rank1 = pid;
    if (rank1 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (rank1 == 0) {
    ::kill(driver, SIGTERM);
    ::waitpid(driver, nullptr, 0);
  }
  REQUIRE_MESSAGE(rank1 != 0, read_text(out_path));
  CHECK(workers.size() >= 3);  // mpirun and two ranks
  CHECK(read_status(run.string()).state == "running");
  CHECK(read_status(run.string()).pid == driver);  // the launcher's pid: `runs cancel` signals it

  const auto killed_at = std::chrono::steady_clock::now();
  REQUIRE(::kill(static_cast<pid_t>(rank1), SIGKILL) == 0);
  int wstatus = 0;
  pid_t got = 0;
  while ((got = ::waitpid(driver, &wstatus, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() - killed_at < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (got == 0) {
    ::kill(driver, SIGKILL);
    ::waitpid(driver, &wstatus, 0);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  REQUIRE_MESSAGE(got == driver, read_text(out_path));
  CHECK(seconds < 10);
  CHECK(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == 3);

  RunStatus st = read_status(run.string());
  CHECK(st.state == "failed");
  CHECK_MESSAGE(st.message.find("rank 1 was killed by signal 9") != std::string::npos, st.message);
  auto status = run_binary("runs status tiny_dp2/run-1 --experiments-dir " + exp.string());
  CHECK_MESSAGE(status.out.find("tiny_dp2/run-1: failed") != std::string::npos, status.out);
  for (long pid : workers) CHECK_MESSAGE(!process_running(pid), "worker " << pid << " still running");
  CHECK(pids_with_cmdline(needle).empty());
  CHECK(pids_with_cmdline(run.string()).empty());  // mpirun too
}

TEST_CASE("runs diff of two real runs that differ in one override shows exactly that key") {
  TempDir tmp;
  auto exp = tmp.path() / "exp";
  const std::string args = "pretrain gpt_tiny --max-steps 2 --experiments-dir " + exp.string();
  REQUIRE(run_binary(args).code == 0);
  REQUIRE(run_binary(args + " optimizer.lr=2e-3").code == 0);
  RunsDiff d = diff_runs((exp / "gpt_tiny" / "run-1").string(), (exp / "gpt_tiny" / "run-2").string());
  REQUIRE(d.config.size() == 1);
  CHECK(d.config[0].key == "optimizer.lr");
  auto out = run_binary("runs diff gpt_tiny/run-1 gpt_tiny/run-2 --experiments-dir " + exp.string());
  CHECK(out.code == 0);
  CHECK(out.out.find("resolved.toml: 1 difference\n  optimizer.lr: ") != std::string::npos);
}

TEST_CASE("one local rank inside a Slurm batch script (SLURM_PROCID without a job step) is a world of its own") {
  // What `sbatch -n 2` gives its batch shell: a task id and the allocation's task count, no step.
  // `recipe pretrain` with one local rank there must not take itself for rank 0 of 2.
  TempDir tmp;
  const char* step = std::getenv("SLURM_STEP_NUM_TASKS");
  if (step) {
    MESSAGE("skipped: the tests themselves run inside a Slurm job step");
    return;
  }
  ::setenv("SLURM_PROCID", "0", 1);
  ::setenv("SLURM_NTASKS", "2", 1);
  ::setenv("SLURM_LOCALID", "0", 1);
  auto r = run_binary("pretrain gpt_tiny --max-steps 2 --experiments-dir " + (tmp.path() / "exp").string());
  ::unsetenv("SLURM_PROCID");
  ::unsetenv("SLURM_NTASKS");
  ::unsetenv("SLURM_LOCALID");
  CHECK_MESSAGE(r.code == 0, r.out);
  CHECK(read_status((tmp.path() / "exp" / "gpt_tiny" / "run-1").string()).state == "completed");
}

namespace {

// Starts `recipe pretrain <args...>` in the background with its output in `out_path`.
pid_t start_pretrain(const std::vector<std::string>& args, const fs::path& out_path) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    std::vector<std::string> all = {"recipe", "pretrain"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    argv.reserve(all.size() + 1);
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(recipe_binary().c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid, double seconds) {
  int wstatus = 0;
  bool reaped = false;
  if (!until([&] { return reaped = reaped || ::waitpid(pid, &wstatus, WNOHANG) == pid; }, seconds)) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &wstatus, 0);
    return -1;
  }
  return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
}

// SIGUSR1 to a local run part-way: it saves a checkpoint, stops with exit 5 and state "stopped";
// `recipe runs resume` finishes it, and its metrics equal an uninterrupted run's, bitwise.
void stop_and_resume(const fs::path& tmp, const fs::path& recipe, const std::string& name, bool multi_rank) {
  const fs::path exp = tmp / "exp";
  const std::string steps = "trainer.max_steps=" + std::to_string(kLongSteps);
  const fs::path out_path = tmp / (name + ".out");
  const pid_t driver = start_pretrain({recipe.string(), "--experiments-dir", exp.string(), steps}, out_path);
  REQUIRE(driver > 0);
  const fs::path run = exp / name / "run-1";
  const bool started = until([&] { return count_lines(read_text(run / "metrics.jsonl")) >= 3; }, 60);
  if (!started) ::kill(driver, SIGKILL);
  REQUIRE_MESSAGE(started, read_text(out_path));
  REQUIRE(::kill(driver, SIGUSR1) == 0);
  const int code = wait_exit(driver, 60);
  const std::string out = read_text(out_path);
  REQUIRE_MESSAGE(code == 5, out);
  const RunStatus stopped = read_status(run.string());
  CHECK(stopped.state == "stopped");
  CHECK(stopped.exit_code == 5);
  CHECK_MESSAGE(stopped.message.find("recipe runs resume") != std::string::npos, stopped.message);
  CHECK(out.find("stopping after this step with a checkpoint") != std::string::npos);
  // A graceful stop looks normal: the ranks exit 0, so mpirun prints no abort report.
  CHECK_MESSAGE(out.find("aborted") == std::string::npos, out);
  CHECK_MESSAGE(out.find("non-zero") == std::string::npos, out);
  const int stopped_at = stopped.steps;
  CHECK(stopped_at < kLongSteps);
  CHECK(fs::exists(run / "checkpoints" / ("step-" + std::to_string(stopped_at)) / "metadata.json"));
  CHECK(read_text(run / "checkpoints" / "latest").find("step-" + std::to_string(stopped_at)) == 0);
  if (multi_rank)
    for (long pid : pids_with_cmdline("worker --run-dir " + run.string()))
      CHECK_MESSAGE(false, "left running: " << pid);

  auto runs = run_binary("runs status " + name + "/run-1 --experiments-dir " + exp.string());
  CHECK_MESSAGE(runs.out.find(name + "/run-1: stopped") != std::string::npos, runs.out);
  auto resumed = run_binary("runs resume " + name + "/run-1 --experiments-dir " + exp.string());
  REQUIRE_MESSAGE(resumed.code == 0, resumed.out);
  CHECK(resumed.out.find("resuming from " + (run / "checkpoints" / ("step-" + std::to_string(stopped_at))).string()) !=
        std::string::npos);
  CHECK(read_status(run.string()).state == "completed");
  CHECK(read_status(run.string()).steps == kLongSteps);

  auto reference = run_binary("pretrain " + recipe.string() + " --experiments-dir " + exp.string() + " " + steps);
  REQUIRE_MESSAGE(reference.code == 0, reference.out);
  CHECK(count_lines(read_text(run / "metrics.jsonl")) == kLongSteps);
  CHECK(read_text(run / "metrics.jsonl") == read_text(exp / name / "run-2" / "metrics.jsonl"));
  // The final checkpoint of both runs holds the same weights: compare the shard bytes.
  const std::string last = "step-" + std::to_string(kLongSteps);
  CHECK(read_text(run / "checkpoints" / last / "shard-0.safetensors") ==
        read_text(exp / name / "run-2" / "checkpoints" / last / "shard-0.safetensors"));
}

}  // namespace

TEST_CASE("SIGUSR1 stops a local run with a checkpoint; `runs resume` finishes it like an uninterrupted run") {
  TempDir tmp;
  SUBCASE("one process") {
    auto recipe = tmp.path() / "tiny_one.toml";
    write_text(recipe,
               "preset = \"gpt_tiny\"\n\n[trainer]\nglobal_batch_size = 16\ndevice = \"cpu\"\n"
               "\n[data]\nkind = \"mock\"\n\n[experiment]\nname = \"tiny_one\"\n");
    stop_and_resume(tmp.path(), recipe, "tiny_one", false);
  }
  SUBCASE("two data-parallel ranks under mpirun") {
    stop_and_resume(tmp.path(), write_tiny_dp2_recipe(tmp.path()), "tiny_dp2", true);
  }
}

namespace {

// A gpt_tiny recipe for `ranks` data-parallel CPU ranks that trains until stopped.
fs::path write_endless_recipe(const fs::path& dir, int ranks) {
  const std::string name = "endless" + std::to_string(ranks);
  auto path = dir / (name + ".toml");
  write_text(path,
             "preset = \"gpt_tiny\"\n\n[trainer]\nmax_steps = 100000\nglobal_batch_size = 16\ndevice = \"cpu\"\n"
             "\n[data]\nkind = \"mock\"\n\n[parallelism]\ndp = " +
                 std::to_string(ranks) + "\n\n[executor]\ncpu_ranks = " + std::to_string(ranks) +
                 "\n\n[experiment]\nname = \"" + name + "\"\n");
  return path;
}

struct SignalledRun {
  int code = -1;
  std::string out;
  fs::path run;
};

// Starts the endless recipe, waits for 3 steps, sends `sig` to `recipe` and waits for its exit.
SignalledRun signal_run(const fs::path& tmp, int ranks, int sig, const std::vector<std::string>& extra = {}) {
  SignalledRun res;
  const fs::path exp = tmp / ("exp-" + std::to_string(ranks) + "-" + std::to_string(sig));
  const fs::path out_path = exp.string() + ".out";
  std::vector<std::string> args = {write_endless_recipe(tmp, ranks).string(), "--experiments-dir", exp.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  const pid_t driver = start_pretrain(args, out_path);
  REQUIRE(driver > 0);
  res.run = exp / ("endless" + std::to_string(ranks)) / "run-1";
  const bool started = until([&] { return count_lines(read_text(res.run / "metrics.jsonl")) >= 3; }, 60);
  if (!started) ::kill(driver, SIGKILL);
  REQUIRE_MESSAGE(started, read_text(out_path));
  REQUIRE(::kill(driver, sig) == 0);
  res.code = wait_exit(driver, 60);
  res.out = read_text(out_path);
  return res;
}

}  // namespace

// Issue 18: SIGTERM to two ranks used to end "interrupted" (130) while the ranks still saved a
// checkpoint, and one rank "stopped" (5). Each signal has one meaning at any world size.
TEST_CASE("every signal means the same at world size 1 and 2: SIGTERM/SIGHUP stop with a checkpoint, SIGINT at once") {
  TempDir tmp;
  for (int ranks : {1, 2}) {
    for (int sig : {SIGTERM, SIGHUP}) {
      CAPTURE(ranks);
      CAPTURE(sig);
      SignalledRun r = signal_run(tmp.path(), ranks, sig);
      CHECK_MESSAGE(r.code == 5, r.out);
      const RunStatus st = read_status(r.run.string());
      CHECK(st.state == "stopped");
      CHECK(st.exit_code == 5);
      CHECK(fs::exists(r.run / "checkpoints" / ("step-" + std::to_string(st.steps)) / "metadata.json"));
      CHECK_MESSAGE(r.out.find("aborted") == std::string::npos, r.out);  // no mpirun abort report
      CHECK(pids_with_cmdline(r.run.string()).empty());
    }
    CAPTURE(ranks);
    SignalledRun r = signal_run(tmp.path(), ranks, SIGINT);
    CHECK_MESSAGE(r.code == 130, r.out);
    const RunStatus st = read_status(r.run.string());
    CHECK(st.state == "interrupted");
    CHECK(st.exit_code == 130);
    CHECK_FALSE(fs::exists(r.run / "checkpoints" / "latest"));  // at once: no checkpoint
    CHECK(pids_with_cmdline(r.run.string()).empty());
  }
}

// Issue 18: a stopped rank stalled a 2-rank run forever. The step watchdog (a short
// trainer.step_timeout_s here) ends it, names the rank and leaves nothing running.
TEST_CASE("step watchdog: a 2-rank run with one rank stopped (SIGSTOP) ends with exit 6, naming the rank") {
  TempDir tmp;
  const fs::path exp = tmp.path() / "exp";
  const fs::path out_path = tmp.path() / "hung.out";
  const pid_t driver = start_pretrain(
      {write_endless_recipe(tmp.path(), 2).string(), "--experiments-dir", exp.string(), "trainer.step_timeout_s=3"},
      out_path);
  REQUIRE(driver > 0);
  const fs::path run = exp / "endless2" / "run-1";
  const std::string needle = "worker --run-dir " + run.string();
  long rank1 = 0;
  until(
      [&] {
        if (count_lines(read_text(run / "metrics.jsonl")) < 3) return false;
        for (long pid : pids_with_cmdline(needle))
          if (environ_value(pid, "OMPI_COMM_WORLD_RANK") == "1") rank1 = pid;
        return rank1 != 0;
      },
      60);
  if (rank1 == 0) ::kill(driver, SIGKILL);
  REQUIRE_MESSAGE(rank1 != 0, read_text(out_path));
  REQUIRE(::kill(static_cast<pid_t>(rank1), SIGSTOP) == 0);
  const int code = wait_exit(driver, 90);  // -1: still running after 90 s (killed then)
  const std::string out = read_text(out_path);
  REQUIRE_MESSAGE(code == 6, out);
  const RunStatus st = read_status(run.string());
  CHECK(st.state == "failed");
  CHECK(st.exit_code == 6);
  CHECK_MESSAGE(st.message.find("step watchdog") != std::string::npos, st.message);
  CHECK_MESSAGE(st.message.find("rank 1 stopped responding") != std::string::npos, st.message);
  CHECK(out.find("step watchdog") != std::string::npos);
  CHECK_FALSE(process_running(rank1));
  CHECK(pids_with_cmdline(run.string()).empty());
}

// Issue 17: trainer.eval_iters counted micro-batches, so the validation loss of the same weights
// changed with the micro-batch and DP size. Validation now reads trainer.eval_samples samples.
TEST_CASE("validation reads trainer.eval_samples samples: dp1 and dp2 report the same validation loss") {
  TempDir tmp;
  const fs::path exp = tmp.path() / "exp";
  std::map<int, std::vector<double>> val;  // dp → val_loss per step
  for (int dp : {1, 2}) {
    CAPTURE(dp);
    const std::string name = "val" + std::to_string(dp);
    const fs::path recipe = tmp.path() / (name + ".toml");
    write_text(recipe,
               "preset = \"gpt_tiny\"\n\n[trainer]\nmax_steps = 3\nmicro_batch_size = 2\nglobal_batch_size = 8\n"
               "eval_interval = 1\neval_samples = 12\ndevice = \"cpu\"\n\n[data]\nkind = \"mock\"\n"
               "\n[parallelism]\ndp = " +
                   std::to_string(dp) + "\n\n[executor]\ncpu_ranks = " + std::to_string(dp) +
                   "\n\n[experiment]\nname = \"" + name + "\"\n");
    auto r = run_binary("pretrain " + recipe.string() + " --experiments-dir " + exp.string());
    REQUIRE_MESSAGE(r.code == 0, r.out);
    std::ifstream in(exp / name / "run-1" / "metrics.jsonl");
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) val[dp].push_back(nlohmann::json::parse(line).at("val_loss").get<double>());
    // The device the run resolved, for `runs status` (trainer.device may be "auto").
    const auto host = nlohmann::json::parse(read_text(exp / name / "run-1" / "host.json"));
    CHECK(host.at("device").at("kind") == "cpu");
    CHECK(host.at("device").at("ranks") == dp);
  }
  REQUIRE(val[1].size() == 3);
  REQUIRE(val[2].size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(val[2][i] == doctest::Approx(val[1][i]).epsilon(1e-5));

  auto list = run_binary("runs list --experiments-dir " + exp.string());
  CHECK(list.out.find("VAL LOSS") != std::string::npos);
  char last[16];
  std::snprintf(last, sizeof last, "%.4f", val[1][2]);
  CHECK_MESSAGE(list.out.find(last) != std::string::npos, list.out);

  // `recipe eval` of each run's newest checkpoint (step 3, saved at the end), as one process:
  // the loss the run logged after step 3.
  for (int dp : {1, 2}) {
    CAPTURE(dp);
    auto ev = run_binary("eval " + (exp / ("val" + std::to_string(dp)) / "run-1").string() + " --device cpu");
    REQUIRE_MESSAGE(ev.code == 0, ev.out);
    const auto at = ev.out.find("val_loss ");
    REQUIRE_MESSAGE(at != std::string::npos, ev.out);
    CHECK(std::stod(ev.out.substr(at + 9)) == doctest::Approx(val[dp][2]).epsilon(1e-5));
  }

  // A validation split smaller than eval_samples: `recipe eval` says its samples repeat.
  {
    const fs::path text = tmp.path() / "small.txt";
    std::string body;
    for (int i = 0; i < 40; ++i) body += "a short paragraph of text, number " + std::to_string(i) + "\n\n";
    write_text(text, body);
    auto prep = run_binary("data prepare --split-paragraphs --input " + text.string() + " --output " +
                           (tmp.path() / "small").string());
    REQUIRE_MESSAGE(prep.code == 0, prep.out);
    auto r = run_binary(
        "pretrain gpt_tiny --device cpu --max-steps 1 data.kind=indexed data.tokenizer=byte "
        "data.split=50,50,0 data.path=" +
        (tmp.path() / "small").string() + " --name small --experiments-dir " + exp.string());
    REQUIRE_MESSAGE(r.code == 0, r.out);
    auto ev = run_binary("eval " + (exp / "small" / "run-1").string() + " --device cpu trainer.eval_samples=400");
    REQUIRE_MESSAGE(ev.code == 0, ev.out);
    CHECK_MESSAGE(ev.out.find("sequences: some are read more than once") != std::string::npos, ev.out);

    // Another dataset, all of it held out (the user guide's form): data.path replaces the blend the
    // run stored, and the train split's checks do not apply to an evaluation.
    write_text(tmp.path() / "other.txt", body + body);
    auto other = run_binary("data prepare --split-paragraphs --input " + (tmp.path() / "other.txt").string() +
                            " --output " + (tmp.path() / "other").string());
    REQUIRE_MESSAGE(other.code == 0, other.out);
    auto ev_other = run_binary("eval " + (exp / "small" / "run-1").string() + " --device cpu data.split=0,100,0 " +
                               "data.path=" + (tmp.path() / "other").string());
    REQUIRE_MESSAGE(ev_other.code == 0, ev_other.out);
    CHECK(ev_other.out.find("val_loss ") != std::string::npos);
  }

  // 12 samples are not whole micro-batches of 2 × dp 4: refused before anything runs.
  auto bad = run_binary("validate " + (tmp.path() / "val2.toml").string() + " parallelism.dp=4 executor.cpu_ranks=4");
  CHECK(bad.code == 1);
  CHECK_MESSAGE(bad.out.find("trainer.eval_samples=12 is not a multiple of") != std::string::npos, bad.out);
}

TEST_SUITE_END();
