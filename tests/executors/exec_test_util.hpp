// Helpers for the executor tests: synthetic run dirs and process liveness.
#pragma once

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/cli/cli_test_util.hpp"

namespace recipe::exec::testing {

using cli::testing::read_text;
using cli::testing::TempDir;

inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

// A run dir as the trainer leaves it: status.json, resolved.toml, metrics.jsonl, timing.jsonl.
inline std::filesystem::path make_run(const std::filesystem::path& exp_dir, const std::string& name, const std::string& id,
                                      const std::string& resolved_toml, int steps, double loss0, const std::string& state = "completed") {
  auto dir = exp_dir / name / id;
  std::filesystem::create_directories(dir / "logs");
  write_text(dir / "resolved.toml", resolved_toml);
  write_text(dir / "status.json", "{\"state\": \"" + state + "\", \"start_time\": \"2025-01-02T03:04:05Z\", \"end_time\": null, "
                                  "\"exit_code\": 0, \"steps\": " + std::to_string(steps) + ", \"message\": \"\", \"pid\": 0}\n");
  std::string metrics, timing;
  for (int s = 1; s <= steps; ++s) {
    metrics += "{\"step\":" + std::to_string(s) + ",\"loss\":" + std::to_string(loss0 - 0.1 * s) + ",\"lr\":" +
               std::to_string(0.001 * s / steps) + ",\"grad_norm\":1.5,\"consumed_samples\":" + std::to_string(8 * s) + "}\n";
    timing += "{\"step\":" + std::to_string(s) + ",\"step_ms\":100.0,\"tokens_per_sec\":" + std::to_string(1000 * s) +
              ",\"tflops\":0.5,\"mfu\":null,\"peak_memory_bytes\":1024}\n";
  }
  write_text(dir / "metrics.jsonl", metrics);
  write_text(dir / "timing.jsonl", timing);
  return dir;
}

// Alive and not a zombie.
inline bool process_running(long pid) {
  if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) != 0) return false;
  std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'Z';
}

}  // namespace recipe::exec::testing
