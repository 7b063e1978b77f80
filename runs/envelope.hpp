// The throughput envelope of a sweep (`recipe sweep`, `recipe runs envelope`): per point of the
// grid, the mean tokens/s, step time, MFU and peak memory over the steps after the warm-up (read
// from each point's timing.jsonl), the least-squares memory line peak = a + b · tokens per step,
// the tables of the report and the chart. Reads run dirs; launches nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runs/plot_layout.hpp"

namespace recipe::exec {

struct EnvelopePoint {
  std::string name;                                           // run-dir name, "mb4-seq2048-bf16"
  std::vector<std::pair<std::string, std::string>> settings;  // swept key, value
  std::string state;            // a run's status ("completed", "failed", ...), "skipped", or "not run"
  std::string reason;           // skipped: the memory verdict; failed: the status message
  int64_t tokens_per_step = 0;  // trainer.micro_batch_size × model.seq_length of resolved.toml
  int steps = 0;                // steps in timing.jsonl
  int steps_measured = 0;       // of those, after the warm-up
  std::optional<double> tokens_per_sec, step_ms, mfu, peak_memory_bytes;  // means after the warm-up
};

// peak memory ≈ intercept + per_token · tokens per step.
struct MemoryLine {
  double per_token_bytes = 0;
  double intercept_bytes = 0;
  int points = 0;
};

struct Envelope {
  std::string experiment;  // the experiment folder's name
  std::vector<std::string> axes;
  std::vector<EnvelopePoint> points;  // grid order
  int warmup_steps = 5;
  std::optional<MemoryLine> memory_line;
};

// Least squares over (tokens per step, peak bytes); nullopt with fewer than two distinct x.
std::optional<MemoryLine> fit_memory_line(const std::vector<std::pair<double, double>>& tokens_bytes);

// The envelope of the sweep in `experiment_root` (its sweep.json), means over the steps after the
// first `warmup_steps`. Throws std::runtime_error when the folder holds no sweep record.
Envelope read_envelope(const std::string& experiment_root, int warmup_steps);

// The report: one table per metric (rows: the first axis's values; columns: the other axes'
// combinations), the points not launched or failed with their reasons, and the memory line as
// "peak memory ≈ 1.52 KiB per token per step + 5.10 GiB".
std::string format_envelope(const Envelope& envelope);

// The chart: tokens/s and peak memory (with the fitted line) over tokens per step, one series per
// column of the report's tables.
PlotLayout layout_envelope_plot(const Envelope& envelope);

}  // namespace recipe::exec
