// Spawning, log routing, failure propagation, signal forwarding and reaping for a child group.
#include "executors/process_group.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "plan/exit_codes.hpp"

namespace recipe::exec {

namespace {

// Self-pipe: the handler only write()s the signal number; the supervision loop does the rest.
int g_signal_pipe[2] = {-1, -1};

extern "C" void on_group_signal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  if (g_signal_pipe[1] >= 0) {
    ssize_t ignored = ::write(g_signal_pipe[1], &b, 1);
    (void)ignored;
  }
  errno = saved;
}

class SignalForwarder {
 public:
  explicit SignalForwarder(bool enabled) : enabled_(enabled) {
    if (!enabled_) return;
    if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe2 failed");
    struct sigaction sa {};
    sa.sa_handler = on_group_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
    sigaction(SIGUSR1, &sa, &old_usr1_);
    sigaction(SIGHUP, &sa, &old_hup_);
  }
  ~SignalForwarder() {
    if (!enabled_) return;
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGUSR1, &old_usr1_, nullptr);
    sigaction(SIGHUP, &old_hup_, nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  int read_fd() const { return enabled_ ? g_signal_pipe[0] : -1; }
  SignalForwarder(const SignalForwarder&) = delete;
  SignalForwarder& operator=(const SignalForwarder&) = delete;

 private:
  bool enabled_;
  struct sigaction old_int_ {
  }, old_term_{}, old_usr1_{}, old_hup_{};
};

struct Child {
  pid_t pid = -1;
  int out_fd = -1;      // read end of the child's stdout+stderr pipe
  std::string partial;  // bytes after the last newline
  bool reaped = false;
  int status = 0;  // exit status or 128+signal
};

int decode_status(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return exit_code_for_signal(WTERMSIG(wstatus));
  return 1;
}

// The child side of fork(): only async-signal-safe calls until exec (the environment was
// prepared by the parent).
[[noreturn]] void exec_child(const ChildSpec& spec, char** envp, pid_t pgid, int write_fd, pid_t launcher) {
  ::setpgid(0, pgid);
  // Die with the launcher: a `kill -9` of `recipe` must not leave ranks training with nobody to
  // stop them or record the outcome. SIGTERM rather than SIGKILL, so an mpirun child stops its own
  // ranks in turn. (The signal follows the forking thread: run_process_group forks on the thread
  // that supervises the group until every child is reaped.) If the launcher died before this line,
  // the signal was never armed: our parent is then another process.
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != launcher) ::_exit(exit_code_for_signal(SIGTERM));
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGINT, &dfl, nullptr);
  sigaction(SIGTERM, &dfl, nullptr);
  sigaction(SIGHUP, &dfl, nullptr);
  sigaction(SIGUSR1, &dfl, nullptr);
  sigaction(SIGPIPE, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  ::dup2(write_fd, STDOUT_FILENO);
  ::dup2(write_fd, STDERR_FILENO);
  int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
  std::vector<char*> args;
  for (const auto& a : spec.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvpe(args[0], args.data(), envp);
  const char* msg = "recipe: cannot start ";
  ssize_t ignored = ::write(STDERR_FILENO, msg, std::strlen(msg));
  ignored = ::write(STDERR_FILENO, args[0], std::strlen(args[0]));
  ignored = ::write(STDERR_FILENO, "\n", 1);
  (void)ignored;
  ::_exit(kExitExecFailed);
}

// The launcher's environment with `extra` added or replaced, as owned strings.
std::vector<std::string> merged_env(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos && extra.count(kv.substr(0, eq))) continue;
    out.push_back(std::move(kv));
  }
  for (const auto& [k, v] : extra) out.push_back(k + "=" + v);
  return out;
}

// "[<jobid>,<rank>]<stdout>:" or "<stderr>:" (Open MPI --tag-output) at `pos`: (rank, tag length).
std::optional<std::pair<int, size_t>> mpi_tag_at(const std::string& line, size_t pos) {
  if (pos >= line.size() || line[pos] != '[') return std::nullopt;
  size_t comma = line.find(',', pos);
  size_t close = line.find(']', pos);
  if (comma == std::string::npos || close == std::string::npos || comma > close || comma + 1 == close)
    return std::nullopt;
  int rank = 0;
  for (size_t i = comma + 1; i < close; ++i) {
    if (line[i] < '0' || line[i] > '9') return std::nullopt;
    rank = rank * 10 + (line[i] - '0');
  }
  for (const char* stream : {"<stdout>:", "<stderr>:"}) {
    size_t len = std::strlen(stream);
    if (line.compare(close + 1, len, stream) == 0) return std::make_pair(rank, close + 1 + len - pos);
  }
  return std::nullopt;
}

class LineRouter {
 public:
  LineRouter(const ProcessGroupOptions& opts) : opts_(opts) {
    for (int r = 0; r < opts_.log_ranks; ++r) log_for(r);
  }

  // One physical line read from a child. mpirun tags every chunk a rank writes, not every line:
  // a rank that writes "text" and then "\n" arrives as "[1,0]<stdout>:text[1,0]<stdout>:", and
  // chunks of two ranks can share a line. Each tagged segment goes to its rank; a rank's line is
  // complete when its segment ends the physical line.
  void line(int default_rank, const std::string& raw) {
    if (!opts_.parse_mpi_tags) {
      emit(default_rank, raw);
      return;
    }
    struct Tag {
      size_t pos, len;
      int rank;
    };
    std::vector<Tag> tags;
    for (size_t pos = raw.find('['); pos != std::string::npos; pos = raw.find('[', pos + 1))
      if (auto t = mpi_tag_at(raw, pos)) tags.push_back({pos, t->second, t->first});
    if (tags.empty() || tags.front().pos > 0) {
      // Untagged text (mpirun's own messages) belongs to the default rank and ends here.
      std::string text = partial_[default_rank] + raw.substr(0, tags.empty() ? raw.size() : tags.front().pos);
      partial_.erase(default_rank);
      emit(default_rank, text);
    }
    for (size_t i = 0; i < tags.size(); ++i) {
      const size_t begin = tags[i].pos + tags[i].len;
      const size_t end = i + 1 < tags.size() ? tags[i + 1].pos : raw.size();
      std::string& partial = partial_[tags[i].rank];
      partial += raw.substr(begin, end - begin);
      if (i + 1 == tags.size()) {
        std::string text = std::move(partial);
        partial_.erase(tags[i].rank);
        emit(tags[i].rank, text);
      }
    }
  }

  // Splits `data` (appended to child.partial) into lines; a carriage return (a progress-line
  // redraw) ends a line too.
  void feed(Child& child, int rank, const char* data, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      char c = data[i];
      if (c == '\n' || c == '\r') {
        if (!child.partial.empty()) line(rank, child.partial);
        child.partial.clear();
      } else {
        child.partial += c;
      }
    }
  }

  void flush_partial(Child& child, int rank) {
    if (!child.partial.empty()) line(rank, child.partial);
    child.partial.clear();
    for (auto& [r, text] : partial_)
      if (!text.empty()) emit(r, text);
    partial_.clear();
  }

 private:
  void emit(int rank, const std::string& text) {
    if (text.empty()) return;
    if (opts_.terminal) {
      if (rank < 0)
        *opts_.terminal << "[launcher] " << text << "\n";
      else
        *opts_.terminal << "[rank " << rank << "] " << text << "\n";
      opts_.terminal->flush();
    }
    if (std::ofstream* log = log_for(rank)) {
      *log << text << "\n";
      log->flush();
    }
    if (opts_.on_line) opts_.on_line(rank, text);
  }

  std::ofstream* log_for(int rank) {
    if (opts_.log_dir.empty()) return nullptr;
    auto it = logs_.find(rank);
    if (it == logs_.end()) {
      std::error_code ec;
      std::filesystem::create_directories(opts_.log_dir, ec);
      auto f = std::make_unique<std::ofstream>(
          (std::filesystem::path(opts_.log_dir) /
           (rank < 0 ? std::string("launcher.log") : "rank-" + std::to_string(rank) + ".log"))
              .string(),
          std::ios::app);
      it = logs_.emplace(rank, std::move(f)).first;
    }
    return *it->second ? it->second.get() : nullptr;
  }

  const ProcessGroupOptions& opts_;
  std::map<int, std::unique_ptr<std::ofstream>> logs_;
  std::map<int, std::string> partial_;  // a rank's text whose line has not ended yet (tagged mode)
};

using Clock = std::chrono::steady_clock;

// Every descendant of `root` on this host outside process group `pgid`, from /proc/<pid>/stat.
// mpirun puts each rank into a process group of its own, so a signal to our group reaches mpirun
// but not the ranks: a stop at once must reach them directly (mpirun would relay SIGINT as SIGTERM,
// which a rank reads as "stop after this step with a checkpoint").
std::vector<pid_t> descendants_outside(pid_t root, pid_t pgid) {
  std::multimap<pid_t, std::pair<pid_t, pid_t>> children_of;  // parent → (pid, its process group)
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    const auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    long ppid = 0, pgrp = 0;
    if (rest >> state >> ppid >> pgrp)
      children_of.emplace(static_cast<pid_t>(ppid),
                          std::make_pair(static_cast<pid_t>(std::stol(name)), static_cast<pid_t>(pgrp)));
  }
  std::vector<pid_t> out;
  std::vector<pid_t> unvisited = {root};  // depth-first over the process tree
  while (!unvisited.empty()) {
    const pid_t p = unvisited.back();
    unvisited.pop_back();
    for (auto [it, end] = children_of.equal_range(p); it != end; ++it) {
      if (it->second.second != pgid) out.push_back(it->second.first);
      unvisited.push_back(it->second.first);
    }
  }
  return out;
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "signal " + std::to_string(sig);
  }
}

}  // namespace

std::optional<std::pair<int, std::string>> parse_mpi_tag(const std::string& line) {
  auto tag = mpi_tag_at(line, 0);
  if (!tag) return std::nullopt;
  return std::make_pair(tag->first, line.substr(tag->second));
}

ProcessGroupResult run_process_group(const std::vector<ChildSpec>& specs, const ProcessGroupOptions& opts) {
  ProcessGroupResult result;
  if (specs.empty()) return result;
  SignalForwarder forwarder(opts.forward_signals);
  LineRouter router(opts);
  std::vector<Child> children(specs.size());
  pid_t pgid = 0;

  auto stop_group = [&](int sig) {
    if (pgid > 0) ::kill(-pgid, sig);
  };
  // The group and the processes below its children that left it (ranks in process groups of
  // their own).
  auto stop_all = [&](int sig) {
    stop_group(sig);
    for (const Child& c : children)
      if (c.pid > 0 && !c.reaped)
        for (pid_t d : descendants_outside(c.pid, pgid)) ::kill(d, sig);
  };

  // Spawn. Environments are built before fork so the child makes no allocations.
  const pid_t launcher = ::getpid();
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].argv.empty())
      throw std::invalid_argument("process group: child " + std::to_string(i) + " has no argv");
    std::vector<std::string> env = merged_env(specs[i].env);
    std::vector<char*> envp;
    envp.reserve(env.size() + 1);
    for (auto& kv : env) envp.push_back(kv.data());
    envp.push_back(nullptr);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      stop_group(SIGKILL);
      for (auto& c : children)
        if (c.pid > 0) ::waitpid(c.pid, nullptr, 0);
      throw std::runtime_error(std::string("cannot create a pipe: ") + std::strerror(errno));
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      int saved = errno;
      ::close(fds[0]);
      ::close(fds[1]);
      stop_group(SIGKILL);
      for (auto& c : children)
        if (c.pid > 0) ::waitpid(c.pid, nullptr, 0);
      throw std::runtime_error(std::string("cannot fork: ") + std::strerror(saved));
    }
    if (pid == 0) exec_child(specs[i], envp.data(), pgid, fds[1], launcher);
    // Both sides call setpgid so the group exists whichever runs first.
    ::setpgid(pid, pgid == 0 ? pid : pgid);
    if (pgid == 0) pgid = pid;
    ::close(fds[1]);
    children[i].pid = pid;
    children[i].out_fd = fds[0];
  }

  bool stopping = false;
  bool killed = false;
  Clock::time_point kill_deadline{};
  std::optional<Clock::time_point> drain_deadline;
  auto begin_stop = [&](int sig) {
    stop_group(sig);
    if (!stopping) {
      stopping = true;
      kill_deadline = Clock::now() + std::chrono::milliseconds(opts.kill_grace_ms);
    }
  };

  for (;;) {
    std::vector<pollfd> fds;
    std::vector<int> owner;
    for (size_t i = 0; i < children.size(); ++i) {
      if (children[i].out_fd >= 0) {
        fds.push_back({children[i].out_fd, POLLIN, 0});
        owner.push_back(static_cast<int>(i));
      }
    }
    if (forwarder.read_fd() >= 0) {
      fds.push_back({forwarder.read_fd(), POLLIN, 0});
      owner.push_back(-1);
    }
    int n = ::poll(fds.data(), fds.size(), 50);
    if (n < 0 && errno != EINTR) break;
    for (size_t k = 0; n > 0 && k < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (owner[k] < 0) {
        unsigned char sig;
        while (::read(fds[k].fd, &sig, 1) == 1) {
          const bool graceful =
              std::find(opts.graceful_signals.begin(), opts.graceful_signals.end(), sig) != opts.graceful_signals.end();
          if (graceful && result.stop_signal == 0 && !result.interrupted) {
            // "Checkpoint and stop" goes to the direct children only (see graceful_signals).
            result.stop_signal = sig;
            if (opts.terminal)
              *opts.terminal << "recipe: " << signal_name(sig)
                             << " received: the ranks stop after this step with a checkpoint (send it again, or "
                                "Ctrl-C, to stop at once)\n";
            for (auto& c : children)
              if (c.pid > 0 && !c.reaped) ::kill(c.pid, SIGUSR1);
            continue;
          }
          // A second interrupt while stopping means "now": skip the grace period.
          if (result.interrupted) {
            stop_all(SIGKILL);
            killed = true;
          } else {
            result.interrupted = true;
            result.interrupt_signal = sig;
            if (opts.terminal)
              *opts.terminal << "recipe: " << signal_name(sig) << " received; stopping all ranks now\n";
            const int now = sig == SIGINT ? SIGINT : SIGTERM;
            stop_all(now);
            begin_stop(now);
          }
        }
        continue;
      }
      Child& c = children[owner[k]];
      char buf[8192];
      ssize_t got = ::read(c.out_fd, buf, sizeof(buf));
      if (got > 0) {
        router.feed(c, specs[owner[k]].rank, buf, static_cast<size_t>(got));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        router.flush_partial(c, specs[owner[k]].rank);
        ::close(c.out_fd);
        c.out_fd = -1;
      }
    }

    bool all_reaped = true;
    for (size_t i = 0; i < children.size(); ++i) {
      Child& c = children[i];
      if (c.reaped) continue;
      int wstatus = 0;
      pid_t r = ::waitpid(c.pid, &wstatus, WNOHANG);
      if (r == c.pid || (r < 0 && errno == ECHILD)) {
        c.reaped = true;
        c.status = r == c.pid ? decode_status(wstatus) : 1;
        if (c.status != 0 && !stopping && !result.interrupted) {
          result.first_failed_child = static_cast<int>(i);
          result.exit_code = c.status;
          result.message = (specs[i].rank < 0 ? std::string("the launcher") : "rank " + std::to_string(specs[i].rank)) +
                           (c.status > 128 ? " was killed by signal " + std::to_string(c.status - 128)
                                           : " exited with status " + std::to_string(c.status));
          if (children.size() > 1) result.message += "; stopped the other ranks";
          begin_stop(SIGTERM);
        }
      } else {
        all_reaped = false;
      }
    }
    if (stopping && !killed && !all_reaped && Clock::now() >= kill_deadline) {
      stop_all(SIGKILL);
      killed = true;
    }
    if (all_reaped) {
      // Grandchildren that outlived their parent may still hold a pipe open: give them a moment,
      // then kill whatever is left in the group and stop reading.
      bool pipes_open = false;
      for (auto& c : children) pipes_open |= c.out_fd >= 0;
      if (!pipes_open) break;
      if (!drain_deadline) drain_deadline = Clock::now() + std::chrono::milliseconds(500);
      if (Clock::now() >= *drain_deadline) {
        stop_group(SIGKILL);
        for (size_t i = 0; i < children.size(); ++i) {
          if (children[i].out_fd >= 0) {
            router.flush_partial(children[i], specs[i].rank);
            ::close(children[i].out_fd);
            children[i].out_fd = -1;
          }
        }
        break;
      }
    }
  }

  for (auto& c : children) result.child_status.push_back(c.status);
  if (result.interrupted) {
    result.exit_code = exit_code_for_signal(result.interrupt_signal.value_or(SIGINT));
    result.message = "interrupted by " + signal_name(result.interrupt_signal.value_or(SIGINT)) + "; all ranks stopped";
  }
  return result;
}

}  // namespace recipe::exec
