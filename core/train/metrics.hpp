// The run's machine-readable record: metrics.jsonl (deterministic values only, so two runs with
// one seed are bitwise identical) and timing.jsonl (wall-clock dependent). One JSON object per
// line, written with nlohmann::json (doubles print as the shortest text that reads back exactly),
// flushed after every step so a crash loses nothing.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace recipe::core {

struct StepMetrics {
  int step = 0;  // 1-based number of the optimizer step just taken
  double loss = 0, lr = 0, grad_norm = 0;
  int64_t consumed_samples = 0;    // after this step
  std::optional<double> val_loss;  // only on evaluation steps
};

struct StepTiming {
  int step = 0;
  double step_ms = 0, tokens_per_sec = 0, tflops = 0;
  std::optional<double> mfu;  // fraction of peak; absent (null) on CPU
  size_t peak_memory_bytes = 0;
  std::string attention_path, gemm_path;  // the kernels that ran (kernels::KernelPaths)
};

nlohmann::ordered_json to_json(const StepMetrics& m);
nlohmann::ordered_json to_json(const StepTiming& t);

class MetricsWriter {
 public:
  // run_dir "" disables writing. Creates the directory; truncates existing files (a run dir holds
  // one training). Throws std::runtime_error naming the file when it cannot be opened.
  // keep_through_step >= 0 (a resumed run): keeps the records of steps 1..keep_through_step and
  // appends after them, dropping those of steps the run is about to redo (it stopped after its
  // last checkpoint), so the files read as one uninterrupted run.
  explicit MetricsWriter(const std::string& run_dir, int keep_through_step = -1);
  bool enabled() const { return enabled_; }
  void write(const StepMetrics& m);
  void write(const StepTiming& t);

 private:
  bool enabled_ = false;
  std::ofstream metrics_, timing_;
};

}  // namespace recipe::core
