// The step watchdog's thread, rank files and report (see the header).
#include "core/train/step_watchdog.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "plan/exit_codes.hpp"

namespace recipe::core {

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.1f s" : "%.0f s", s);
  return buf;
}

// What a rank file says: the step, the phase, when the phase began and when the file was written.
struct RankProgress {
  int step = 0;
  double marked_wall = 0, alive_wall = 0;
  std::string phase;
};

std::optional<RankProgress> read_rank_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  RankProgress r;
  if (!(in >> r.step >> r.marked_wall >> r.alive_wall)) return std::nullopt;
  std::getline(in >> std::ws, r.phase);
  return r;
}

}  // namespace

std::string StepWatchdog::dir_in(const std::string& run_dir) {
  return run_dir.empty() ? std::string() : (std::filesystem::path(run_dir) / "watchdog").string();
}

StepWatchdog::StepWatchdog(double floor_seconds, int rank, int world, std::string dir,
                           std::function<void(const std::string& report)> on_hang)
    : floor_(floor_seconds),
      rank_(rank),
      world_(world),
      dir_(std::move(dir)),
      on_hang_(std::move(on_hang)),
      // Often enough that a hang is seen within a tenth of the limit, rarely enough that a
      // thousand ranks do not flood a shared file system with their rank files.
      poll_seconds_(std::clamp(floor_seconds / 10, 0.1, 10.0)),
      limit_(floor_seconds) {
  if (!on()) return;
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
  }
  thread_ = std::thread([this] { loop(); });
}

StepWatchdog::~StepWatchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StepWatchdog::mark() {
  marked_at_.store(steady_seconds());
  marked_wall_.store(wall_seconds());
  // The first mark writes this rank's file at once: the poll thread writes it only every
  // poll_seconds_, and a rank stopped before its first poll must still be found by its peers.
  if (marks_.fetch_add(1) == 0) write_progress(marked_wall_.load(), 0);
}

void StepWatchdog::enter(int step, const char* phase) {
  if (!on()) return;
  step_.store(step);
  phase_.store(phase);
  mark();
}

void StepWatchdog::step_done(double seconds) {
  if (!on()) return;
  if (steps_seen_++ == 0) return;  // the first step warms up (graph capture, autotuning)
  limit_.store(std::max(limit_.load(), 10 * seconds));
}

void StepWatchdog::write_progress(double now_wall, int writer) const {
  if (dir_.empty()) return;
  const auto path = std::filesystem::path(dir_) / ("rank-" + std::to_string(rank_));
  const auto tmp = path.string() + ".tmp" + std::to_string(writer);
  {
    std::ofstream out(tmp, std::ios::trunc);
    char buf[96];
    std::snprintf(buf, sizeof buf, "%d %.3f %.3f ", step_.load(), marked_wall_.load(), now_wall);
    out << buf << phase_.load() << "\n";
    if (!out) return;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
}

std::string StepWatchdog::report(double stalled_seconds, double now_wall) const {
  std::ostringstream s;
  s << "step watchdog: no training progress for " << seconds_text(stalled_seconds) << " (limit "
    << seconds_text(limit_.load()) << ": max(trainer.step_timeout_s, 10 x the slowest step)); rank " << rank_
    << " is at step " << step_.load() << " in \"" << phase_.load() << "\"";
  // A rank whose file has not been rewritten for a few polls is not running at all.
  const double silent_after = 3 * poll_seconds_ + 1;
  std::string silent, others;
  for (int r = 0; r < world_ && !dir_.empty(); ++r) {
    if (r == rank_) continue;
    const auto p = read_rank_file(std::filesystem::path(dir_) / ("rank-" + std::to_string(r)));
    if (!p) {  // no file: the rank never reached its first training mark
      silent += "; rank " + std::to_string(r) + " never reported progress (not started, stopped, frozen or dead)";
      continue;
    }
    std::ostringstream line;
    line << "; rank " << r;
    if (now_wall - p->alive_wall > silent_after)
      line << " stopped responding " << seconds_text(now_wall - p->alive_wall) << " ago (stopped, frozen or dead)";
    line << " at step " << p->step << " in \"" << p->phase << "\" for " << seconds_text(now_wall - p->marked_wall);
    (now_wall - p->alive_wall > silent_after ? silent : others) += line.str();
  }
  s << silent << others << ". Ending the run";
  return s.str();
}

void StepWatchdog::loop() {
  std::unique_lock<std::mutex> lk(mu_);
  const auto poll = std::chrono::duration<double>(poll_seconds_);
  while (!cv_.wait_for(lk, poll, [this] { return stop_; })) {
    if (marks_.load() == 0) continue;  // training has not begun
    const double wall = wall_seconds();
    write_progress(wall);
    if (paused_.load() > 0) continue;
    const double stalled = steady_seconds() - marked_at_.load();
    if (stalled < limit_.load()) continue;
    const std::string text = report(stalled, wall);
    if (on_hang_) on_hang_(text);
    std::fprintf(stderr, "recipe: rank %d: %s\n", rank_, text.c_str());
    std::fflush(stderr);
    ::_exit(kExitHung);
  }
}

}  // namespace recipe::core
