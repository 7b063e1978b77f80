#include "executors/watchdog_reports.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/train/step_watchdog.hpp"

namespace fs = std::filesystem;

namespace recipe::exec {

namespace {
constexpr const char* kReportPrefix = "hang-rank-";
}

void clear_watchdog_files(const std::string& run_dir) {
  std::error_code ec;
  fs::remove_all(core::StepWatchdog::dir_in(run_dir), ec);
}

void write_watchdog_report(const std::string& run_dir, int rank, const std::string& report) {
  std::error_code ec;
  const fs::path dir = core::StepWatchdog::dir_in(run_dir);
  fs::create_directories(dir, ec);
  std::ofstream(dir / (kReportPrefix + std::to_string(rank) + ".txt"), std::ios::trunc) << report << "\n";
}

std::string first_watchdog_report(const std::string& run_dir) {
  std::map<int, fs::path> reports;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(core::StepWatchdog::dir_in(run_dir), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kReportPrefix, 0) != 0) continue;
    try {
      reports[std::stoi(name.substr(std::string(kReportPrefix).size()))] = e.path();
    } catch (const std::exception&) {}
  }
  if (reports.empty()) return "";
  std::ifstream in(reports.begin()->second);
  std::string text;
  std::getline(in, text);
  return text;
}

}  // namespace recipe::exec
