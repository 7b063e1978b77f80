#include "core/train/metrics.hpp"

#include <filesystem>
#include <stdexcept>

namespace recipe::core {

nlohmann::ordered_json to_json(const StepMetrics& m) {
  nlohmann::ordered_json j;
  j["step"] = m.step;
  j["loss"] = m.loss;
  j["lr"] = m.lr;
  j["grad_norm"] = m.grad_norm;
  j["consumed_samples"] = m.consumed_samples;
  if (m.val_loss) j["val_loss"] = *m.val_loss;
  return j;
}

nlohmann::ordered_json to_json(const StepTiming& t) {
  nlohmann::ordered_json j;
  j["step"] = t.step;
  j["step_ms"] = t.step_ms;
  j["tokens_per_sec"] = t.tokens_per_sec;
  j["tflops"] = t.tflops;
  j["mfu"] = t.mfu ? nlohmann::ordered_json(*t.mfu) : nlohmann::ordered_json(nullptr);
  j["peak_memory_bytes"] = t.peak_memory_bytes;
  j["attention_path"] = t.attention_path;
  j["gemm_path"] = t.gemm_path;
  return j;
}

namespace {

// The lines of a JSONL file whose "step" is at most `last` (unparsable lines, e.g. one cut short
// by a crash, are dropped).
std::string records_through(const std::string& path, int last) {
  std::ifstream in(path);
  std::string kept, line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<int>() <= last)
      kept += line + "\n";
  }
  return kept;
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& run_dir, int keep_through_step) {
  if (run_dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec) throw std::runtime_error("cannot create run directory " + run_dir + ": " + ec.message());
  auto open = [&](std::ofstream& f, const char* name) {
    const std::string path = (std::filesystem::path(run_dir) / name).string();
    const std::string kept = keep_through_step >= 0 ? records_through(path, keep_through_step) : std::string();
    f.open(path, std::ios::out | std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write " + path + " (check permissions and free space)");
    f << kept;
    f.flush();
  };
  open(metrics_, "metrics.jsonl");
  open(timing_, "timing.jsonl");
  enabled_ = true;
}

void MetricsWriter::write(const StepMetrics& m) {
  if (!enabled_) return;
  metrics_ << to_json(m).dump() << '\n';
  metrics_.flush();
}

void MetricsWriter::write(const StepTiming& t) {
  if (!enabled_) return;
  timing_ << to_json(t).dump() << '\n';
  timing_.flush();
}

}  // namespace recipe::core
