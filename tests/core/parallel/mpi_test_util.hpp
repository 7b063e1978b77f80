// Helpers for multi-rank tests: start a program as an Open MPI world on this host, capture its
// output, and never leave a process behind.
//
// The world runs with `mpirun -np N --oversubscribe --bind-to none --mca btl self,vader` (shared
// memory between ranks of one host: works in containers without a network, and more ranks than
// cores are fine). Root is allowed (containers), and OpenBLAS is kept to one thread per rank so
// N ranks on two cores do not fight over threads.
//
// mpirun runs in its own process group (setsid); on timeout the whole group gets SIGTERM, then
// SIGKILL after a short grace, so ranks stuck in a collective end too.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace recipe::testing {

struct MpiRun {
  int exit_code = -1;  // the program's exit status; 128+signal when killed; 124 on timeout
  std::string output;  // stdout and stderr of every rank, interleaved as they arrived
};

// The built helper program tests/tools/<name>.cpp.
inline std::string tool_path(const std::string& name) { return RECIPE_BINARY_DIR "/bin/recipe_" + name; }

// An executable named `name` on PATH ("" if none).
inline std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return "";
  std::string p = path;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return "";
}

inline bool mpirun_available() { return !find_on_path("mpirun").empty(); }

namespace detail {
inline void kill_group(pid_t pgid, int& status, bool& reaped) {
  ::kill(-pgid, SIGTERM);
  const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < grace) {
    pid_t r = ::waitpid(pgid, &status, WNOHANG);
    if (r == pgid) {
      reaped = true;
      break;
    }
    ::usleep(20000);
  }
  // mpirun may be gone while a rank still hangs: the group gets SIGKILL either way.
  ::kill(-pgid, SIGKILL);
  if (!reaped && ::waitpid(pgid, &status, 0) == pgid) reaped = true;
}
}  // namespace detail

// Runs `argv` (program and arguments) as an np-rank world. `env` entries are exported to every rank
// (mpirun forwards its own environment to local ranks).
inline MpiRun run_mpi(int np, const std::vector<std::string>& argv,
                      const std::vector<std::pair<std::string, std::string>>& env = {}, int timeout_s = 120) {
  MpiRun result;
  const std::string mpirun = find_on_path("mpirun");
  if (mpirun.empty()) {
    result.exit_code = 127;
    result.output = "mpirun not found on PATH";
    return result;
  }
  std::vector<std::string> args = {mpirun,  "-np", std::to_string(np), "--oversubscribe", "--bind-to", "none",
                                   "--mca", "btl", "self,vader"};
  args.insert(args.end(), argv.begin(), argv.end());

  int fds[2];
  if (::pipe(fds) != 0) {
    result.output = "pipe failed";
    return result;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    result.output = "fork failed";
    return result;
  }
  if (pid == 0) {
    ::setsid();  // own process group: the timeout kills mpirun and every rank together
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    ::execv(cargs[0], cargs.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  bool timed_out = false, reaped = false;
  int status = 0;
  char buf[4096];
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int rc = ::poll(&p, 1, int(std::min<long long>(left, 200)));
    if (rc < 0 && errno != EINTR) break;
    bool eof = false;
    if (rc > 0) {
      for (;;) {
        ssize_t n = ::read(fds[0], buf, sizeof buf);
        if (n > 0) {
          result.output.append(buf, size_t(n));
          continue;
        }
        if (n == 0) eof = true;
        break;  // EAGAIN or EOF
      }
    }
    if (!reaped && ::waitpid(pid, &status, WNOHANG) == pid) reaped = true;
    // Done when mpirun has exited and nothing more is buffered; a straggler still holding the pipe
    // is cut off by the group kill below.
    if (eof || (reaped && rc == 0)) break;
  }
  if (timed_out) {
    detail::kill_group(pid, status, reaped);
    result.output += "\n[run_mpi: timed out after " + std::to_string(timeout_s) + " s; process group killed]\n";
  } else {
    if (!reaped && ::waitpid(pid, &status, 0) == pid) reaped = true;
    ::kill(-pid, SIGKILL);  // anything of the group that outlived mpirun
  }
  for (;;) {  // drain what is left without blocking
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    result.output.append(buf, size_t(n));
  }
  ::close(fds[0]);
  if (timed_out)
    result.exit_code = 124;
  else if (WIFEXITED(status))
    result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    result.exit_code = 128 + WTERMSIG(status);
  return result;
}

// Sets environment variables for one scope (nullopt: unset) and restores what was there before.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::vector<std::pair<std::string, std::optional<std::string>>> vars) {
    for (auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_.push_back({k, old ? std::optional<std::string>(old) : std::nullopt});
      if (v)
        ::setenv(k.c_str(), v->c_str(), 1);
      else
        ::unsetenv(k.c_str());
    }
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace recipe::testing
