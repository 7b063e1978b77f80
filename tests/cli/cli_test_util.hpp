// Helpers for the tests of cli/ and executors/: run verbs in-process or through the built binary, temp dirs.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"

namespace recipe::cli::testing {

struct CliRun {
  int code = -1;
  std::string out, err;
};

inline CliRun run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  CliRun r;
  r.code = run_cli(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

inline std::string recipe_binary() { return RECIPE_BINARY_DIR "/bin/recipe"; }

// Runs the built binary through the shell; returns its exit status and combined output.
inline CliRun run_binary(const std::string& args) {
  CliRun r;
  std::string cmd = recipe_binary() + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("recipe_cli_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline int count_lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

// Makes launch.sh in in-process runs point at the real binary, not the test executable.
inline void use_built_binary_for_launch() { ::setenv("RECIPE_EXECUTABLE", RECIPE_BINARY_DIR "/bin/recipe", 1); }

}  // namespace recipe::cli::testing
