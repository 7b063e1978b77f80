// The run directory: everything needed to understand and repeat one run.
//
//   <experiment.dir>/<experiment.name>/run-<N>/
//     recipe.<ext>      the recipe source as given (a preset's .lua file for a preset)
//     overrides.txt     the overrides and flags as given, one per line
//     resolved.toml     the resolved plan; workers read only this
//     git.json          commit/branch/dirty of the recipe's git repository ({"repo": null} if none)
//     git.patch         `git diff HEAD` when dirty
//     host.json         host, OS, CPU, GPU, driver, library versions
//     launch.sh         the exact command that starts the workers (executable)
//     status.json       created → running → completed | failed | interrupted
//     logs/rank-<r>.log worker output
//     metrics.jsonl, timing.jsonl, checkpoints/   written by the trainer
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace recipe::exec {

struct RunDirContents {
  std::string recipe_file;                // file copied as recipe.<ext>; "" = none
  std::vector<std::string> command_line;  // overrides and flags as given
  std::string resolved_toml;
  std::string launch_script;
  nlohmann::ordered_json host = nlohmann::ordered_json::object();
};

// `<experiments_dir>/<name>` as an absolute path.
std::string experiment_root(const std::string& experiments_dir, const std::string& name);

// The path the next run would get (run-<max+1>), without creating anything.
std::string next_run_path(const std::string& experiment_root);

// Creates the next free run-<N> under experiment_root (and its logs/ folder) and returns its
// absolute path. mkdir is the atomic step: a concurrent launch that took the same N makes this one
// try N+1. Throws std::runtime_error naming the path on failure.
std::string allocate_run_dir(const std::string& experiment_root);

// `<experiment_root>/<name>` (and its logs/ folder), created when missing: a sweep point's run dir,
// named for its settings ("mb4-seq2048-bf16"), which a resumed sweep finds again by that name.
// Throws std::runtime_error naming the path on failure or for a name that is not one folder.
std::string named_run_dir(const std::string& experiment_root, const std::string& name);

// Writes recipe.<ext>, overrides.txt, resolved.toml, git.json (+ git.patch), host.json, launch.sh
// (executable) and status.json ("created") into an allocated run dir. Throws std::runtime_error.
void populate_run_dir(const std::string& run_dir, const RunDirContents& contents);

// Git facts about the repository holding `dir` (a folder). `patch` gets `git diff HEAD` when
// the working tree has uncommitted changes to tracked files. The repository is data: git runs with
// every command its config could name (fsmonitor, hooks, filters, external diff, textconv, pager)
// turned off (runs/git_info.cpp).
// bugprone-exception-escape is a false positive in clang-tidy 14 here: the implicit noexcept move
// only moves a std::string and an nlohmann::json (whose move is noexcept); the check follows json's
// internals and reports a throw that cannot happen there.
struct GitInfo {                // NOLINT(bugprone-exception-escape)
  nlohmann::ordered_json json;  // {"repo", "commit", "branch", "dirty"} or {"repo": null}
  std::string patch;
};
GitInfo git_info(const std::string& dir);

struct RunStatus {
  std::string state = "created";     // created | running | completed | failed | interrupted
  std::string start_time, end_time;  // ISO 8601 UTC, "" = not yet
  std::optional<int> exit_code;
  int steps = 0;
  std::string message;
  long pid = 0;                  // the launcher (`recipe pretrain`, `runs resume`); 0 = none (Slurm)
  long long launcher_start = 0;  // its start time (clock ticks after boot, /proc/<pid>/stat), so a
                                 // reused pid is not taken for the launcher; 0 = unknown
};
nlohmann::ordered_json status_json(const RunStatus& s);
// Written to a temporary file and renamed, so readers never see a partial status.json. Text that
// is not valid UTF-8 (an error message quoting a corrupt file's bytes) is written with U+FFFD in
// place of the bad bytes: the status write must not fail because of what a message says.
void write_status(const std::string& run_dir, const RunStatus& s);
RunStatus read_status(const std::string& run_dir);

// Records this process as the run's launcher: pid and its start time.
void set_launcher(RunStatus& s);
// Start time of process `pid` in clock ticks after boot; 0 when there is no such process.
long long process_start_ticks(long pid);
// The launcher that status.json names is still this same process (pid alive and, when recorded,
// started at the recorded time). A run whose launcher is gone cannot be running any more.
bool launcher_alive(const RunStatus& s);

std::string now_iso8601();

// Runs argv (no shell) and returns its stdout; nullopt when it cannot start or exits non-zero.
std::optional<std::string> capture_output(const std::vector<std::string>& argv);

}  // namespace recipe::exec
