// The git facts a run dir records (git.json, git.patch). A recipe's folder may be a repository
// someone else prepared, and its .git/config can name commands that `git status` and `git diff`
// would run: core.fsmonitor, filter.<driver>.clean/process (through .gitattributes), diff.external,
// diff.<driver>.command/textconv, core.pager, hooks. Recording git state must run none of them.
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "runs/run_dir.hpp"

namespace recipe::exec {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// `git` with the config that would run a command overridden. `-c` settings reach the git
// processes git itself starts (through GIT_CONFIG_PARAMETERS).
std::vector<std::string> git_base(const std::string& dir) {
  return {"git", "--no-pager",     "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
          "-c",  "diff.external=", "-c", "core.pager=cat",       "-C", dir};
}

// Filter drivers run while git hashes a changed file; their names come from the repository's
// config, so each is switched off by name (an empty command is no filter). nullopt where a name
// cannot be written as `-c filter.<name>.clean=` (it holds '='): then the dirty state is not read.
std::optional<std::vector<std::string>> filters_off(const std::string& dir) {
  std::vector<std::string> argv = git_base(dir);
  for (const char* a : {"config", "--name-only", "--get-regexp", "^filter\\..*\\.(clean|smudge|process|required)$"})
    argv.push_back(a);
  std::vector<std::string> out;
  const auto names = capture_output(argv);  // exits 1 when there is none
  if (!names) return out;
  std::size_t pos = 0;
  while (pos < names->size()) {
    std::size_t end = names->find('\n', pos);
    if (end == std::string::npos) end = names->size();
    const std::string key = names->substr(pos, end - pos);  // filter.<name>.<field>
    pos = end + 1;
    const std::size_t last = key.rfind('.');
    if (key.size() < 8 || last == std::string::npos || last < 7) continue;
    const std::string name = key.substr(7, last - 7);
    if (name.find('=') != std::string::npos) return std::nullopt;
    for (const char* field : {"clean=", "smudge=", "process=", "required=false"}) {
      out.push_back("-c");
      out.push_back("filter." + name + "." + field);
    }
  }
  return out;
}

std::optional<std::string> git(const std::string& dir, const std::vector<std::string>& extra_config,
                               std::initializer_list<const char*> args) {
  std::vector<std::string> argv = git_base(dir);
  argv.insert(argv.begin() + 1, extra_config.begin(), extra_config.end());
  for (const char* a : args) argv.push_back(a);
  return capture_output(argv);
}

}  // namespace

GitInfo git_info(const std::string& dir) {
  GitInfo info;
  auto top = git(dir, {}, {"rev-parse", "--show-toplevel"});
  if (!top) {
    info.json = {{"repo", nullptr}};
    return info;
  }
  auto commit = git(dir, {}, {"rev-parse", "HEAD"});
  auto branch = git(dir, {}, {"rev-parse", "--abbrev-ref", "HEAD"});
  const auto off = filters_off(dir);
  // Submodules' own configs are not read here: their dirty work trees are not looked into.
  auto status = off ? git(dir, *off, {"status", "--porcelain", "--untracked-files=no", "--ignore-submodules=dirty"})
                    : std::nullopt;
  bool dirty = status && !trim(*status).empty();
  info.json = {{"repo", trim(*top)},
               {"commit", commit ? nlohmann::ordered_json(trim(*commit)) : nlohmann::ordered_json(nullptr)},
               {"branch", branch ? nlohmann::ordered_json(trim(*branch)) : nlohmann::ordered_json(nullptr)},
               {"dirty", off ? nlohmann::ordered_json(dirty) : nlohmann::ordered_json(nullptr)}};  // null: not read
  if (dirty && commit) {
    if (auto patch = git(dir, *off, {"diff", "--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty", "HEAD"}))
      info.patch = *patch;
  }
  return info;
}

}  // namespace recipe::exec
