// Run directory creation and the small files in it.
#include "runs/run_dir.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <iterator>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "plan/exit_codes.hpp"

namespace fs = std::filesystem;

namespace recipe::exec {

namespace {

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + path.string() + ": " + std::strerror(errno));
  out << text;
  if (!out.flush()) throw std::runtime_error("cannot write " + path.string() + ": " + std::strerror(errno));
}

// run-<N> → N, anything else → -1.
long run_index(const std::string& name) {
  if (name.rfind("run-", 0) != 0 || name.size() == 4) return -1;
  long n = 0;
  for (size_t i = 4; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    n = n * 10 + (name[i] - '0');
    if (n > 1'000'000'000) return -1;
  }
  return n;
}

long next_free_index(const fs::path& root) {
  long max_seen = 0;
  std::error_code ec;
  if (fs::is_directory(root, ec)) {
    for (const auto& entry : fs::directory_iterator(root, ec))
      max_seen = std::max(max_seen, run_index(entry.path().filename().string()));
  }
  return max_seen + 1;
}

}  // namespace

std::string experiment_root(const std::string& experiments_dir, const std::string& name) {
  return fs::absolute(fs::path(experiments_dir.empty() ? "." : experiments_dir) / name).lexically_normal().string();
}

std::string next_run_path(const std::string& root) {
  return (fs::path(root) / ("run-" + std::to_string(next_free_index(root)))).string();
}

std::string allocate_run_dir(const std::string& root) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw std::runtime_error("cannot create experiment folder " + root + ": " + ec.message());
  long n = next_free_index(root);
  for (int attempt = 0; attempt < 1000; ++attempt, ++n) {
    fs::path dir = fs::path(root) / ("run-" + std::to_string(n));
    if (::mkdir(dir.c_str(), 0755) == 0) {
      fs::create_directories(dir / "logs", ec);
      if (ec) throw std::runtime_error("cannot create " + (dir / "logs").string() + ": " + ec.message());
      return dir.string();
    }
    if (errno != EEXIST)
      throw std::runtime_error("cannot create run folder " + dir.string() + ": " + std::strerror(errno));
  }
  throw std::runtime_error("no free run-<N> folder under " + root);
}

std::string named_run_dir(const std::string& root, const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
    throw std::runtime_error("\"" + name + "\" cannot name a run folder");
  const fs::path dir = fs::path(root) / name;
  std::error_code ec;
  fs::create_directories(dir / "logs", ec);
  if (ec) throw std::runtime_error("cannot create " + (dir / "logs").string() + ": " + ec.message());
  return dir.string();
}

void populate_run_dir(const std::string& run_dir, const RunDirContents& c) {
  fs::path dir(run_dir);
  std::error_code ec;
  if (!c.recipe_file.empty()) {
    fs::path src(c.recipe_file);
    std::string ext = src.extension().string();
    if (ext.empty()) ext = ".lua";
    fs::copy_file(src, dir / ("recipe" + ext), fs::copy_options::overwrite_existing, ec);
    if (ec) throw std::runtime_error("cannot copy recipe " + src.string() + " into " + run_dir + ": " + ec.message());
  }
  std::string overrides;
  for (const auto& arg : c.command_line) overrides += arg + "\n";
  write_file(dir / "overrides.txt", overrides);
  write_file(dir / "resolved.toml", c.resolved_toml);
  // Launching a run dir refuses one that group or others can write (runs/run_dir_owner.hpp): what
  // it runs is its own, whatever the umask (002 is common where users have private groups).
  for (const fs::path& p : {dir, dir / "resolved.toml"}) {
    fs::permissions(p, fs::perms::group_write | fs::perms::others_write, fs::perm_options::remove, ec);
    if (ec) throw std::runtime_error("cannot set the mode of " + p.string() + ": " + ec.message());
  }

  std::string git_dir =
      c.recipe_file.empty() ? fs::current_path().string() : fs::absolute(c.recipe_file).parent_path().string();
  GitInfo git = git_info(git_dir);
  write_file(dir / "git.json", git.json.dump(2) + "\n");
  if (!git.patch.empty()) write_file(dir / "git.patch", git.patch);

  write_file(dir / "host.json", c.host.dump(2) + "\n");
  write_file(dir / "launch.sh", c.launch_script);
  fs::permissions(dir / "launch.sh", fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                  fs::perm_options::add, ec);
  RunStatus status;
  set_launcher(status);
  write_status(run_dir, status);
}

nlohmann::ordered_json status_json(const RunStatus& s) {
  nlohmann::ordered_json j;
  j["state"] = s.state;
  j["start_time"] = s.start_time.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.start_time);
  j["end_time"] = s.end_time.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.end_time);
  j["exit_code"] = s.exit_code ? nlohmann::ordered_json(*s.exit_code) : nlohmann::ordered_json(nullptr);
  j["steps"] = s.steps;
  j["message"] = s.message;
  j["pid"] = s.pid;
  j["launcher_start"] = s.launcher_start;
  return j;
}

void write_status(const std::string& run_dir, const RunStatus& s) {
  fs::path final_path = fs::path(run_dir) / "status.json";
  fs::path tmp = fs::path(run_dir) / ("status.json.tmp." + std::to_string(::getpid()));
  write_file(tmp, status_json(s).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
  std::error_code ec;
  fs::rename(tmp, final_path, ec);
  if (ec) throw std::runtime_error("cannot write " + final_path.string() + ": " + ec.message());
}

RunStatus read_status(const std::string& run_dir) {
  fs::path path = fs::path(run_dir) / "status.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string() + ": not a run directory?");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path.string() + " is not valid JSON: " + e.what());
  }
  RunStatus s;
  s.state = j.value("state", "");
  if (j.contains("start_time") && j["start_time"].is_string()) s.start_time = j["start_time"];
  if (j.contains("end_time") && j["end_time"].is_string()) s.end_time = j["end_time"];
  if (j.contains("exit_code") && j["exit_code"].is_number_integer()) s.exit_code = j["exit_code"].get<int>();
  s.steps = j.value("steps", 0);
  s.message = j.value("message", "");
  s.pid = j.value("pid", 0L);
  s.launcher_start = j.value("launcher_start", 0LL);
  return s;
}

long long process_start_ticks(long pid) {
  if (pid <= 0) return 0;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // "pid (comm) state ppid ...": comm may hold spaces and ')', so fields count from the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  // Field 3 (state) is the first after ')'; starttime is field 22.
  for (int i = 3; i <= 22 && fields >> field; ++i)
    if (i == 22) return std::atoll(field.c_str());
  return 0;
}

void set_launcher(RunStatus& s) {
  s.pid = static_cast<long>(::getpid());
  s.launcher_start = process_start_ticks(s.pid);
}

bool launcher_alive(const RunStatus& s) {
  if (s.pid <= 0) return false;
  if (::kill(static_cast<pid_t>(s.pid), 0) != 0 && errno != EPERM) return false;
  const long long started = process_start_ticks(s.pid);
  // A zombie still has its /proc entry; its state letter is Z.
  std::ifstream in("/proc/" + std::to_string(s.pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (const auto close = stat.rfind(')');
      close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z')
    return false;
  return s.launcher_start == 0 || started == 0 || started == s.launcher_start;
}

std::string now_iso8601() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::optional<std::string> capture_output(const std::vector<std::string>& argv) {
  if (argv.empty()) return std::nullopt;
  int fds[2];
  if (::pipe(fds) != 0) return std::nullopt;
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, STDERR_FILENO);
      ::dup2(devnull, STDIN_FILENO);
    }
    ::close(fds[0]);
    ::close(fds[1]);
    ::execvp(args[0], args.data());
    ::_exit(kExitExecFailed);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return out;
}

}  // namespace recipe::exec
