// keep_last (see prune.hpp). checkpoint.dir is a path the user chose, shared with whatever else
// they keep there: a folder that merely looks like `step-<N>` is not ours to delete.
#include "checkpoint/prune.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <iostream>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/chunk_record.hpp"
#include "checkpoint/file_io.hpp"

namespace recipe::ckpt {

namespace fs = std::filesystem;

namespace {

std::optional<int64_t> step_of_dir_name(const std::string& name) {
  if (!name.starts_with("step-") || name.size() == 5) return std::nullopt;
  int64_t step = 0;
  auto [p, err] = std::from_chars(name.data() + 5, name.data() + name.size(), step);
  if (err != std::errc() || p != name.data() + name.size()) return std::nullopt;
  return step;
}

}  // namespace

bool is_committed_checkpoint(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_symlink(dir, ec) || !fs::is_directory(dir, ec)) return false;
  const fs::path meta = dir / "metadata.json";
  if (!fs::is_regular_file(dir / "common.json", ec) || !fs::is_regular_file(meta, ec)) return false;
  try {
    const nlohmann::json j = nlohmann::json::parse(io::read_file(meta.string()));
    return j.is_object() && j.value("format", std::string()) == kFormat;
  } catch (const std::exception&) {
    return false;  // unreadable or not JSON: not a checkpoint this engine wrote
  }
}

void prune(const fs::path& parent, const std::string& just_written, int keep_last) {
  std::vector<std::pair<int64_t, fs::path>> steps;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string n = entry.path().filename().string();
    const auto step = step_of_dir_name(n);
    if (!step) continue;
    if (is_committed_checkpoint(entry.path()))
      steps.emplace_back(*step, entry.path());
    else if (n != just_written)
      std::cerr << "recipe: warning: " << entry.path().string()
                << " is not a checkpoint this engine committed (a link, or a folder without common.json and a "
                   "recipe-checkpoint metadata.json); "
                   "checkpoint.keep_last leaves it alone. Move it out of checkpoint.dir to silence this.\n";
  }
  if (ec) throw CheckpointError(parent.string() + ": cannot list checkpoints to prune: " + ec.message());
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = static_cast<size_t>(keep_last); i < steps.size(); ++i) {
    if (steps[i].second.filename() == just_written) continue;
    fs::remove_all(steps[i].second, ec);
    if (ec)
      throw CheckpointError("checkpoint committed, but removing the old checkpoint " + steps[i].second.string() +
                            " (keep_last = " + std::to_string(keep_last) + ") failed: " + ec.message());
  }
}

}  // namespace recipe::ckpt
