// One function per verb; cli.cpp parses the command line and calls them.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "cli/plan_setup.hpp"
#include "core/data/prepare.hpp"

namespace recipe::cli {

// pretrain / finetune (mode "pretrain" | "finetune"): resolve, then --dry-run report or run.
int run_train(const PlanFlags& flags, const std::string& mode, bool dry_run, std::ostream& out,
              std::ostream& err);
// `runs resume`: runs a run dir's resolved.toml again with its executor (a Slurm run is
// resubmitted); training continues from the run's newest checkpoint.
int run_resume(const std::string& run_dir, std::ostream& out, std::ostream& err);
// The hidden worker: runs the plan in a run dir's resolved.toml.
int run_worker(const std::string& run_dir, std::ostream& out, std::ostream& err);
// The hidden job-state verb: a Slurm batch script records its job's start (`begin`) or end
// (`end_exit`: the job step's exit status) in the run dir's status.json.
int run_job_state(const std::string& run_dir, const std::string& job_id, bool begin, std::optional<int> end_exit,
                  bool requeued, std::ostream& out, std::ostream& err);

int run_list(std::ostream& out, std::ostream& err);
int run_show(const PlanFlags& flags, const std::string& format, std::ostream& out, std::ostream& err);
int run_validate(const PlanFlags& flags, std::ostream& out, std::ostream& err);
int run_version(std::ostream& out);
int run_data_prepare(const data::PrepareOptions& opts, std::ostream& out, std::ostream& err);

// "0.1.0" (the CMake project version).
std::string version_string();

}  // namespace recipe::cli
