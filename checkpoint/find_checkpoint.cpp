// Resolving what a user names (checkpoint, checkpoints dir, run dir) to one complete checkpoint.
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <optional>
#include <system_error>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/file_io.hpp"

namespace recipe::ckpt {

namespace {

namespace fs = std::filesystem;

bool has_shard_files(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().filename().string().starts_with("shard-")) return true;
  return false;
}

std::optional<int64_t> step_number(const std::string& name) {
  if (!name.starts_with("step-") || name.size() == 5) return std::nullopt;
  int64_t step = 0;
  auto [p, err] = std::from_chars(name.data() + 5, name.data() + name.size(), step);
  if (err != std::errc() || p != name.data() + name.size()) return std::nullopt;
  return step;
}

// The newest complete step-<N> directory, for a checkpoints dir whose `latest` was never written
// (a crash between the first commit's rename and its `latest` write).
std::string newest_complete_step(const fs::path& dir) {
  std::error_code ec;
  std::optional<int64_t> best;
  std::string best_path;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    auto step = step_number(entry.path().filename().string());
    if (step && (!best || *step > *best) && fs::exists(entry.path() / "metadata.json", ec)) {
      best = step;
      best_path = entry.path().string();
    }
  }
  return best_path;
}

std::string trim(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(s.find_last_not_of(ws) + 1);
  s.erase(0, std::min(s.size(), s.find_first_not_of(ws)));
  return s;
}

}  // namespace

std::string find_checkpoint(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  if (!fs::exists(p, ec))
    throw CheckpointError(path +
                          ": does not exist (expected a checkpoint, a checkpoints directory or a run directory)");
  if (!fs::is_directory(p, ec))
    throw CheckpointError(path +
                          ": not a directory (expected a checkpoint, a checkpoints directory or a run directory)");
  if (fs::exists(p / "metadata.json", ec)) return path;

  const fs::path latest = p / "latest";
  if (fs::exists(latest, ec)) {
    const std::string name = trim(io::read_file(latest.string()));
    if (name.empty()) throw CheckpointError(latest.string() + ": empty (it should name a step-<N> directory)");
    const fs::path target = p / name;
    if (!fs::is_directory(target, ec))
      throw CheckpointError(latest.string() + " names \"" + name + "\", but " + target.string() +
                            " does not exist (the checkpoint was removed; point `latest` at another step-<N>)");
    if (!fs::exists(target / "metadata.json", ec))
      throw CheckpointError("partial checkpoint (no metadata.json): " + target.string() + " (named by " +
                            latest.string() + ")");
    return target.string();
  }
  if (fs::is_directory(p / "checkpoints", ec)) return find_checkpoint((p / "checkpoints").string());
  if (has_shard_files(p)) throw CheckpointError("partial checkpoint (no metadata.json): " + path);
  return newest_complete_step(p);
}

}  // namespace recipe::ckpt
