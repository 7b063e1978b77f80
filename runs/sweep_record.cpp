#include "runs/sweep_record.hpp"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace recipe::exec {

void write_sweep_record(const std::string& experiment_root, const SweepRecord& record) {
  nlohmann::ordered_json j;
  j["recipe"] = record.recipe;
  j["axes"] = record.axes;
  j["points"] = nlohmann::ordered_json::array();
  for (const auto& p : record.points) {
    nlohmann::ordered_json settings = nlohmann::ordered_json::object();
    for (const auto& [k, v] : p.settings) settings[k] = v;
    nlohmann::ordered_json pj;
    pj["name"] = p.name;
    pj["settings"] = settings;
    if (!p.skipped.empty()) pj["skipped"] = p.skipped;
    j["points"].push_back(pj);
  }
  const fs::path path = fs::path(experiment_root) / "sweep.json";
  const fs::path tmp = fs::path(experiment_root) / ".sweep.json.tmp";
  std::error_code ec;
  fs::create_directories(experiment_root, ec);
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(2) << "\n";
    if (!out.flush()) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, path, ec);
  if (ec) throw std::runtime_error("cannot write " + path.string() + ": " + ec.message());
}

std::optional<SweepRecord> read_sweep_record(const std::string& experiment_root) {
  const fs::path path = fs::path(experiment_root) / "sweep.json";
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const auto j = nlohmann::ordered_json::parse(in, nullptr, false);  // settings keep axis order
  if (j.is_discarded() || !j.is_object() || !j.contains("points") || !j["points"].is_array())
    throw std::runtime_error(path.string() + " is not a sweep record (it does not parse as one)");
  SweepRecord r;
  r.recipe = j.value("recipe", "");
  if (j.contains("axes") && j["axes"].is_array())
    for (const auto& a : j["axes"])
      if (a.is_string()) r.axes.push_back(a.get<std::string>());
  for (const auto& pj : j["points"]) {
    if (!pj.is_object() || !pj.contains("name") || !pj["name"].is_string()) continue;
    SweepRecordPoint p;
    p.name = pj["name"].get<std::string>();
    if (pj.contains("settings") && pj["settings"].is_object())
      for (const auto& [k, v] : pj["settings"].items())
        p.settings.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
    p.skipped = pj.value("skipped", "");
    r.points.push_back(std::move(p));
  }
  return r;
}

}  // namespace recipe::exec
