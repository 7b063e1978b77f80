// Ownership and mode of a run dir before it is launched (see run_dir_owner.hpp).
#include "runs/run_dir_owner.hpp"

#include <pwd.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <vector>

namespace recipe::exec {

namespace {

// "alice (uid 1001)", or "uid 1001" where the user database has no name for it.
std::string user_name(uid_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr && found->pw_name != nullptr)
    return std::string(found->pw_name) + " (uid " + std::to_string(uid) + ")";
  return "uid " + std::to_string(uid);
}

std::string mode_text(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

}  // namespace

std::optional<OwnershipProblem> launch_ownership_problem(const std::string& run_dir, uid_t uid) {
  const std::string resolved = (std::filesystem::path(run_dir) / "resolved.toml").string();
  const std::string copy_fix = "read its resolved.toml, then copy the run dir to a folder of your own (cp -r " +
                               run_dir +
                               " <your copy>) and resume the copy; or start a new run of your own from its "
                               "recipe (`recipe validate` it first)";
  struct Entry {
    const std::string& path;
    bool follow;  // the run dir may be reached through a link; its resolved.toml may not be one
  };
  for (const Entry& e : {Entry{run_dir, true}, Entry{resolved, false}}) {
    struct stat st {};
    if ((e.follow ? ::stat(e.path.c_str(), &st) : ::lstat(e.path.c_str(), &st)) != 0)
      continue;  // missing: the caller's own "not a run directory" error says so
    if (!e.follow && !S_ISREG(st.st_mode))
      return OwnershipProblem{resolved +
                                  " is not a regular file (a link or a special file): this run dir was not "
                                  "written by `recipe`, so it is not launched",
                              copy_fix};
    if (st.st_uid != uid)
      return OwnershipProblem{e.path + " is owned by " + user_name(st.st_uid) + ", not by you (" + user_name(uid) +
                                  "): launching it would run what its resolved.toml says (executor.env, paths) "
                                  "with your rights",
                              copy_fix};
    if (st.st_mode & (S_IWGRP | S_IWOTH))
      return OwnershipProblem{e.path + " is writable by group or others (mode " + mode_text(st.st_mode) +
                                  "): anyone who can write it chooses what launching this run does",
                              "chmod go-w " + run_dir + " " + resolved + " (after checking its resolved.toml)"};
  }
  return std::nullopt;
}

}  // namespace recipe::exec
