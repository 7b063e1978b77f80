// Helpers for the executor tests: synthetic run dirs, process liveness, a throw-away Slurm.
#pragma once

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "executors/slurm_executor.hpp"

#include "tests/cli/cli_test_util.hpp"

namespace recipe::exec::testing {

using cli::testing::read_text;
using cli::testing::TempDir;

inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

// A run dir as the trainer leaves it: status.json, resolved.toml, metrics.jsonl, timing.jsonl.
inline std::filesystem::path make_run(const std::filesystem::path& exp_dir, const std::string& name,
                                      const std::string& id, const std::string& resolved_toml, int steps, double loss0,
                                      const std::string& state = "completed") {
  auto dir = exp_dir / name / id;
  std::filesystem::create_directories(dir / "logs");
  write_text(dir / "resolved.toml", resolved_toml);
  write_text(dir / "status.json", "{\"state\": \"" + state +
                                      "\", \"start_time\": \"2025-01-02T03:04:05Z\", \"end_time\": null, "
                                      "\"exit_code\": 0, \"steps\": " +
                                      std::to_string(steps) + ", \"message\": \"\", \"pid\": 0}\n");
  std::string metrics, timing;
  for (int s = 1; s <= steps; ++s) {
    metrics += "{\"step\":" + std::to_string(s) + ",\"loss\":" + std::to_string(loss0 - 0.1 * s) +
               ",\"lr\":" + std::to_string(0.001 * s / steps) +
               ",\"grad_norm\":1.5,\"consumed_samples\":" + std::to_string(8 * s) + "}\n";
    timing += "{\"step\":" + std::to_string(s) + ",\"step_ms\":100.0,\"tokens_per_sec\":" + std::to_string(1000 * s) +
              ",\"tflops\":0.5,\"mfu\":null,\"peak_memory_bytes\":1024}\n";
  }
  write_text(dir / "metrics.jsonl", metrics);
  write_text(dir / "timing.jsonl", timing);
  return dir;
}

// Alive and not a zombie.
inline bool process_running(long pid) {
  if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) != 0) return false;
  std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'Z';
}

// Processes whose command line (arguments joined by spaces) contains `needle`.
inline std::vector<long> pids_with_cmdline(const std::string& needle) {
  std::vector<long> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = read_text(e.path() / "cmdline");
    for (char& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.find(needle) != std::string::npos && process_running(std::stol(name))) out.push_back(std::stol(name));
  }
  return out;
}

// The value of `key` in a process's initial environment ("" when absent or unreadable).
inline std::string environ_value(long pid, const std::string& key) {
  std::string env = read_text("/proc/" + std::to_string(pid) + "/environ");
  size_t at = 0;
  while (at < env.size()) {
    size_t end = env.find('\0', at);
    if (end == std::string::npos) end = env.size();
    if (env.compare(at, key.size() + 1, key + "=") == 0)
      return env.substr(at + key.size() + 1, end - at - key.size() - 1);
    at = end + 1;
  }
  return "";
}

// A single-node Slurm started by tests/executors/slurm_cluster.sh for the lifetime of the object;
// `up` is false (and the reason is in `dir`.err) where Slurm or root is missing.
struct SlurmCluster {
  std::string dir;
  bool up = false;
  std::string script = RECIPE_SOURCE_DIR "/tests/executors/slurm_cluster.sh";
  explicit SlurmCluster(const std::string& d) : dir(d) {
    int rc = std::system((script + " start " + dir + " >/dev/null 2>" + dir + ".err").c_str());
    up = WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
    if (up) ::setenv("SLURM_CONF", (dir + "/slurm.conf").c_str(), 1);
  }
  ~SlurmCluster() {
    if (!up) return;
    std::system((script + " stop " + dir + " >/dev/null 2>&1").c_str());
    ::unsetenv("SLURM_CONF");
  }
  std::string why_down() const { return read_text(dir + ".err"); }
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;
};

// Polls Slurm until the job reaches a final state (completed, failed, interrupted) or `seconds` pass;
// returns the last Slurm state seen.
inline std::string wait_slurm_final(const std::string& job, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::string st;
  while (std::chrono::steady_clock::now() < end) {
    st = query_slurm_job(job).state;
    std::string mapped = run_state_of(st);
    if (mapped == "completed" || mapped == "failed" || mapped == "interrupted") return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return st;
}

}  // namespace recipe::exec::testing
