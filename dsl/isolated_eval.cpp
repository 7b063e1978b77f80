// Recipe evaluation in a child process (see isolated_eval.hpp).
//
// Wire format, child → parent, one JSON document then EOF:
//   {"root": <config tree>, "origins": [[path, file, line, expr], ...], "source": "..."}
//   {"error": "<message>"}
// The tree is read back as nlohmann::json (std::map: O(log n) per key, where ordered_json's
// parser searches each object's keys linearly) and rebuilt in canonical order: the loaders
// canonicalize every tree, so no order is lost.
#include "dsl/isolated_eval.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <new>

#include "dsl/tree_merge.hpp"

namespace recipe::dsl::load_detail {
namespace {

using PlainJson = nlohmann::json;

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// Address space in use now (VmSize), so the child's limit is "what it has plus the bound".
std::size_t address_space_bytes() {
  std::ifstream in("/proc/self/statm");
  std::size_t pages = 0;
  in >> pages;
  return pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

[[noreturn]] void run_child(int fd, const std::string& label, const EvalBounds& bounds,
                            const std::function<ConfigTree()>& evaluate) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the process waiting for the answer
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGPIPE, SIG_DFL);
  const auto cpu = static_cast<rlim_t>(std::ceil(bounds.wall_seconds));
  const rlimit cpu_limit{cpu, cpu + 1};
  ::setrlimit(RLIMIT_CPU, &cpu_limit);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // (Sanitizer runtimes reserve terabytes of address space; there the wall clock is the bound.)
  const rlim_t as = address_space_bytes() + bounds.memory_bytes;
  const rlimit as_limit{as, as};
  ::setrlimit(RLIMIT_AS, &as_limit);
#endif
  std::string answer;
  try {
    ConfigTree tree = evaluate();
    Json origins = Json::array();
    for (const auto& [path, o] : tree.origins) origins.push_back(Json::array({path, o.file, o.line, o.expr}));
    Json doc = Json::object();
    doc["root"] = std::move(tree.root);
    doc["origins"] = std::move(origins);
    doc["source"] = tree.source;
    answer = dump(doc);
  } catch (const std::bad_alloc&) {
    answer = R"({"error": "memory"})";
  } catch (const std::exception& e) {
    try {
      answer = dump(Json{{"error", std::string(e.what())}});
    } catch (...) {
      answer = R"({"error": "memory"})";
    }
  } catch (...) {
    answer = R"({"error": "recipe evaluation failed"})";
  }
  write_all(fd, answer);
  ::close(fd);
  ::_exit(0);  // no atexit handlers, no flushing of the parent's buffered output
}

// nlohmann::json (sorted keys) → ordered_json, appending keys without a search each.
Json to_ordered(const PlainJson& j, int depth) {
  if (depth > kMaxTreeDepth) throw RecipeError("recipe tree nested too deeply");
  if (j.is_object()) {
    Json out = Json::object();
    for (const auto& [k, v] : j.items()) append_new_key(out, k, to_ordered(v, depth + 1));
    return out;
  }
  if (j.is_array()) {
    Json out = Json::array();
    for (const auto& v : j) out.push_back(to_ordered(v, depth + 1));
    return out;
  }
  return Json(j);
}

std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

ConfigTree evaluate_isolated(const std::string& label, const EvalBounds& bounds,
                             const std::function<ConfigTree()>& evaluate) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw RecipeError(label + ": cannot evaluate the recipe: pipe: " + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw RecipeError(label + ": cannot evaluate the recipe: fork: " + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
    run_child(fds[1], label, bounds, evaluate);
  }
  ::close(fds[1]);

  std::string answer;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(bounds.wall_seconds);
  char buf[65536];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      answer.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // EOF: the child is done
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}

  const std::string seconds = std::to_string(static_cast<long long>(std::ceil(bounds.wall_seconds)));
  const std::string exceeded_time = label + ": recipe evaluation exceeded " + seconds +
                                    " s; does it loop forever (a loop in a __gc finalizer, a string pattern "
                                    "on a long string, a table.sort comparator)?";
  const std::string exceeded_memory = label + ": recipe evaluation exceeded " + mib(bounds.memory_bytes) +
                                      " of memory; does it build an endless table or string?";
  if (timed_out) throw RecipeError(exceeded_time);
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    if (sig == SIGXCPU || sig == SIGKILL) throw RecipeError(exceeded_time);
    // Past RLIMIT_AS, an allocation that cannot throw (inside the C library or Lua's C code)
    // ends the child with SIGSEGV or SIGABRT.
    if (sig == SIGSEGV || sig == SIGABRT || sig == SIGBUS) throw RecipeError(exceeded_memory);
    throw RecipeError(label + ": recipe evaluation crashed (signal " + std::to_string(sig) + ")");
  }
  PlainJson doc;
  try {
    doc = PlainJson::parse(answer);
  } catch (const PlainJson::exception&) {
    throw RecipeError(label + ": recipe evaluation ended without an answer (exit status " +
                      std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
  }
  if (doc.contains("error")) {
    const std::string error = doc["error"].get<std::string>();
    if (error == "memory") throw RecipeError(exceeded_memory);
    throw RecipeError(error);
  }
  ConfigTree tree;
  tree.root = to_ordered(doc["root"], 0);
  canonicalize(tree.root);
  for (const auto& o : doc["origins"])
    tree.origins.emplace(o[0].get<std::string>(),
                         Origin{o[1].get<std::string>(), o[2].get<int>(), o[3].get<std::string>()});
  tree.source = doc["source"].get<std::string>();
  return tree;
}

}  // namespace recipe::dsl::load_detail
