#include "executors/slurm_executor.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <sstream>

#include "plan/exit_codes.hpp"
#include "runs/run_dir.hpp"
#include "runs/runs_index.hpp"

namespace fs = std::filesystem;

namespace recipe::exec {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

// "CANCELLED by 0" → "CANCELLED"; "RUNNING+" → "RUNNING".
std::string base_state(std::string s) {
  s = trim(s);
  auto sp = s.find_first_of(" +");
  return sp == std::string::npos ? s : s.substr(0, sp);
}

}  // namespace

CommandOutput run_command(const std::vector<std::string>& argv) {
  CommandOutput r;
  if (argv.empty()) return r;
  int fds[2];
  if (::pipe(fds) != 0) return r;
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return r;
  }
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execvp(args[0], args.data());
    ::_exit(kExitExecFailed);
  }
  ::close(fds[1]);
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n > 0)
      r.output.append(buf, static_cast<size_t>(n));
    else if (n < 0 && errno == EINTR)
      continue;
    else
      break;
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : exit_code_for_signal(WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return r;
}

void mark_submit_failed(const std::string& run_dir, const std::string& message, int exit_code) {
  RunStatus st;
  try {
    st = read_status(run_dir);
  } catch (const std::exception&) {}
  st.state = "failed";
  st.exit_code = exit_code;
  st.message = message;
  st.end_time = now_iso8601();
  st.pid = 0;
  try {
    write_status(run_dir, st);
  } catch (const std::exception&) {}  // the error the caller prints says it all
}

namespace {

SlurmSubmitResult submit_failed(const std::string& run_dir, SlurmSubmitResult res, int exit_code) {
  res.exit_code = exit_code;
  mark_submit_failed(run_dir, res.message, exit_code);
  return res;
}

}  // namespace

SlurmSubmitResult submit_slurm(const std::string& run_dir) {
  SlurmSubmitResult res;
  const std::string script = (fs::path(run_dir) / "launch.sh").string();
  CommandOutput out = run_command({"sbatch", "--parsable", script});
  if (out.status == 127 || out.status < 0) {
    res.message =
        "sbatch not found: this host is not a Slurm submit host\n"
        "  fix: run on a login node of the cluster, or use --executor local|mpi";
    return submit_failed(run_dir, res, kExitEnvironment);
  }
  if (out.status != 0) {
    // The controller cannot be reached, or refused the job (partition, account, limits).
    res.message = "sbatch failed (status " + std::to_string(out.status) + "): " + trim(out.output);
    return submit_failed(run_dir, res, kExitEnvironment);
  }
  // --parsable prints "<jobid>" or "<jobid>;<cluster>"; warnings may precede it on other lines.
  std::istringstream lines(out.output);
  std::string line, last;
  while (std::getline(lines, line))
    if (!trim(line).empty()) last = trim(line);
  res.job_id = last.substr(0, last.find(';'));
  if (res.job_id.empty() || res.job_id.find_first_not_of("0123456789_") != std::string::npos) {
    res.message = "could not read a job id from sbatch's output: " + trim(out.output);
    return submit_failed(run_dir, res, kExitRuntime);
  }
  record_slurm_job(run_dir, res.job_id, script);
  RunStatus st;
  try {
    st = read_status(run_dir);
  } catch (const std::exception&) {}
  st.state = "queued";
  st.message = "slurm job " + res.job_id;
  st.pid = 0;
  write_status(run_dir, st);
  res.ok = true;
  return res;
}

SlurmJobState query_slurm_job(const std::string& job_id) {
  SlurmJobState s;
  CommandOutput q = run_command({"squeue", "-h", "-j", job_id, "-o", "%T"});
  if (q.status == 0 && !trim(q.output).empty()) {
    s.state = base_state(trim(q.output));
    s.source = "squeue";
    return s;
  }
  CommandOutput a = run_command({"sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State,ExitCode"});
  if (a.status == 0 && !trim(a.output).empty()) {
    std::string first = trim(a.output.substr(0, a.output.find('\n')));
    auto bar = first.find('|');
    s.state = base_state(first.substr(0, bar));
    if (bar != std::string::npos) s.exit_code = first.substr(bar + 1);
    s.source = "sacct";
    return s;
  }
  // Without accounting storage, scontrol still knows a job for MinJobAge (300 s) after it ends.
  CommandOutput c = run_command({"scontrol", "show", "job", "-o", job_id});
  if (c.status == 0) {
    std::istringstream words(c.output);
    std::string w;
    while (words >> w) {
      if (w.rfind("JobState=", 0) == 0) s.state = base_state(w.substr(9));
      if (w.rfind("ExitCode=", 0) == 0) s.exit_code = w.substr(9);
    }
    if (!s.state.empty()) s.source = "scontrol";
  }
  return s;
}

std::string run_state_of(const std::string& st) {
  if (st == "PENDING" || st == "CONFIGURING" || st == "REQUEUED" || st == "REQUEUE_HOLD" || st == "REQUEUE_FED" ||
      st == "RESV_DEL_HOLD" || st == "SUSPENDED")
    return "queued";
  if (st == "RUNNING" || st == "COMPLETING" || st == "STAGE_OUT" || st == "SIGNALING" || st == "RESIZING")
    return "running";
  if (st == "COMPLETED") return "completed";
  if (st == "CANCELLED" || st == "PREEMPTED" || st == "DEADLINE") return "interrupted";
  if (st.empty()) return "";
  return "failed";  // FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, BOOT_FAIL
}

std::string cancel_slurm_job(const std::string& job_id) {
  CommandOutput c = run_command({"scancel", job_id});
  if (c.status == 0) return "";
  if (c.status == 127 || c.status < 0) return "scancel not found (not a Slurm host)";
  return "scancel " + job_id + " failed: " + trim(c.output);
}

}  // namespace recipe::exec
