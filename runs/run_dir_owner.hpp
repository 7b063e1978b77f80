// Whether a run dir may be launched by this user. Launching (`runs resume`, the worker verb) runs
// what the run dir's resolved.toml says: its executor.env, paths and launch settings. A run dir is
// data; one that another user owns or can write is code of theirs, and running it as yourself (as
// root above all) runs their choices with your rights.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace recipe::exec {

struct OwnershipProblem {
  std::string message;  // what is wrong, naming the file, its owner or mode
  std::string fix;
};

// nullopt where `run_dir` and its resolved.toml (a regular file, not a link) both belong to `uid`
// and neither is writable by group or others; else the first problem found.
std::optional<OwnershipProblem> launch_ownership_problem(const std::string& run_dir, uid_t uid);

}  // namespace recipe::exec
