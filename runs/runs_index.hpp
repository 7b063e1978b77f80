// Reading run directories back: finding runs, naming them, and summarizing what they did.
// Pure readers of the files a run dir holds (status.json, metrics.jsonl, timing.jsonl,
// slurm_job.json); `recipe runs ...` prints what these return.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runs/run_dir.hpp"

namespace recipe::exec {

struct MetricPoint {
  int step = 0;
  double value = 0;
};

// The curves of one run (from metrics.jsonl and timing.jsonl; lines that do not parse are skipped).
struct RunCurves {
  std::vector<MetricPoint> loss, lr, grad_norm, val_loss, tokens_per_sec;
};
RunCurves read_run_curves(const std::string& run_dir);

struct RunSummary {
  std::string path;  // absolute run dir
  std::string name;  // experiment name (the parent folder)
  std::string id;    // "run-3"
  RunStatus status;  // status.json ("unknown" state when missing or unreadable)
  int steps = 0;     // last step in metrics.jsonl (or status.steps when larger)
  std::optional<double> last_loss, last_val_loss, last_lr, last_grad_norm;
  std::optional<double> tokens_per_sec;  // mean over the logged steps after the first (warm-up)
  std::string executor;                  // "local" | "mpi" | "slurm" (from resolved.toml; "" unknown)
  std::string slurm_job_id;              // from slurm_job.json, "" when none
  std::string device;  // host.json's resolved device: "cuda (NVIDIA H100 80GB HBM3)", "cpu"; "" unknown
};
RunSummary summarize_run(const std::string& run_dir);

// Every run dir (a folder holding status.json or resolved.toml) under `<experiments_dir>/<name>/`,
// sorted by name then run number.
std::vector<RunSummary> list_runs(const std::string& experiments_dir);

// A run named by a path (absolute or relative, holding resolved.toml or status.json) or by
// `<name>/<run-id>` under experiments_dir; `<name>/latest` or `<name>` picks the highest run-<N>.
// Throws std::runtime_error listing what was tried and the known runs of that name.
std::string resolve_run(const std::string& ref, const std::string& experiments_dir);

// Slurm job id recorded in the run dir (slurm_job.json {"job_id": "123", ...}); "" when none.
std::string recorded_slurm_job(const std::string& run_dir);
void record_slurm_job(const std::string& run_dir, const std::string& job_id, const std::string& script_path);

// "1.2k", "35.0M" style number for tables.
std::string human_count(double v);

}  // namespace recipe::exec
