#include "runs/runs_index.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

namespace fs = std::filesystem;

namespace recipe::exec {

namespace {

bool is_run_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p / "status.json", ec) || fs::is_regular_file(p / "resolved.toml", ec);
}

// run-<N> → N for sorting; other names sort after, alphabetically.
long run_number(const std::string& id) {
  if (id.rfind("run-", 0) != 0 || id.size() == 4) return -1;
  long n = 0;
  for (size_t i = 4; i < id.size(); ++i) {
    if (id[i] < '0' || id[i] > '9') return -1;
    n = n * 10 + (id[i] - '0');
  }
  return n;
}

template <typename F>
void for_each_row(const fs::path& p, F&& f) {
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object()) f(j);
  }
}

void push(std::vector<MetricPoint>& v, const nlohmann::json& row, const char* key) {
  if (row.contains(key) && row[key].is_number()) v.push_back({row.value("step", 0), row[key].get<double>()});
}

std::vector<fs::path> runs_of(const fs::path& experiment) {
  std::vector<fs::path> runs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(experiment, ec))
    if (e.is_directory() && is_run_dir(e.path())) runs.push_back(e.path());
  std::sort(runs.begin(), runs.end(), [](const fs::path& a, const fs::path& b) {
    long na = run_number(a.filename().string()), nb = run_number(b.filename().string());
    if (na != nb) return na < nb;
    return a.filename() < b.filename();
  });
  return runs;
}

}  // namespace

RunCurves read_run_curves(const std::string& run_dir) {
  RunCurves c;
  for_each_row(fs::path(run_dir) / "metrics.jsonl", [&](const nlohmann::json& r) {
    push(c.loss, r, "loss");
    push(c.lr, r, "lr");
    push(c.grad_norm, r, "grad_norm");
    push(c.val_loss, r, "val_loss");
  });
  for_each_row(fs::path(run_dir) / "timing.jsonl",
               [&](const nlohmann::json& r) { push(c.tokens_per_sec, r, "tokens_per_sec"); });
  return c;
}

namespace {

// host.json's "device" (written at launch) as one phrase; "" for older run dirs without it.
std::string recorded_device(const fs::path& dir) {
  std::ifstream in(dir / "host.json");
  if (!in) return "";
  const nlohmann::json host = nlohmann::json::parse(in, nullptr, false);
  if (host.is_discarded() || !host.is_object() || !host.contains("device") || !host["device"].is_object()) return "";
  const nlohmann::json& d = host["device"];
  std::string text = d.value("kind", "");
  if (d.contains("gpu") && d["gpu"].is_string()) text += " (" + d["gpu"].get<std::string>() + ")";
  if (d.contains("ranks") && d["ranks"].is_number_integer() && d["ranks"].get<int>() > 1)
    text += ", " + std::to_string(d["ranks"].get<int>()) + " ranks";
  return text;
}

}  // namespace

RunSummary summarize_run(const std::string& run_dir) {
  RunSummary s;
  fs::path dir = fs::absolute(run_dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  s.path = dir.string();
  s.id = dir.filename().string();
  s.name = dir.parent_path().filename().string();
  try {
    s.status = read_status(s.path);
  } catch (const std::exception& e) {
    s.status.state = "unknown";
    s.status.message = e.what();
  }
  RunCurves c = read_run_curves(s.path);
  if (!c.loss.empty()) {
    s.steps = c.loss.back().step;
    s.last_loss = c.loss.back().value;
  }
  if (!c.val_loss.empty()) s.last_val_loss = c.val_loss.back().value;
  if (!c.lr.empty()) s.last_lr = c.lr.back().value;
  if (!c.grad_norm.empty()) s.last_grad_norm = c.grad_norm.back().value;
  s.steps = std::max(s.steps, s.status.steps);
  // The first step includes one-time setup (allocation, graph capture); leave it out of the mean.
  if (!c.tokens_per_sec.empty()) {
    size_t from = c.tokens_per_sec.size() > 1 ? 1 : 0;
    double sum = 0;
    for (size_t i = from; i < c.tokens_per_sec.size(); ++i) sum += c.tokens_per_sec[i].value;
    s.tokens_per_sec = sum / static_cast<double>(c.tokens_per_sec.size() - from);
  }
  try {
    toml::table t = toml::parse_file((dir / "resolved.toml").string());
    if (auto kind = t["executor"]["kind"].value<std::string>()) s.executor = *kind;
  } catch (const std::exception&) {}
  s.slurm_job_id = recorded_slurm_job(s.path);
  s.device = recorded_device(s.path);
  return s;
}

std::vector<RunSummary> list_runs(const std::string& experiments_dir) {
  std::vector<RunSummary> out;
  std::error_code ec;
  fs::path root = experiments_dir.empty() ? fs::path("experiments") : fs::path(experiments_dir);
  std::vector<fs::path> experiments;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory()) experiments.push_back(e.path());
  std::sort(experiments.begin(), experiments.end());
  for (const auto& exp : experiments)
    for (const auto& run : runs_of(exp)) out.push_back(summarize_run(run.string()));
  return out;
}

std::string resolve_run(const std::string& ref, const std::string& experiments_dir) {
  if (ref.empty()) throw std::runtime_error("empty run name: give a run dir path or <name>/<run-id>");
  fs::path root = experiments_dir.empty() ? fs::path("experiments") : fs::path(experiments_dir);
  fs::path as_path(ref);
  if (is_run_dir(as_path)) return fs::absolute(as_path).lexically_normal().string();
  fs::path under = root / ref;
  if (is_run_dir(under)) return fs::absolute(under).lexically_normal().string();

  // <name> or <name>/latest: the newest run of that experiment.
  fs::path experiment = under;
  if (under.filename() == "latest") experiment = under.parent_path();
  std::error_code ec;
  if (fs::is_directory(experiment, ec)) {
    auto runs = runs_of(experiment);
    if (!runs.empty() && (under.filename() == "latest" || experiment == under))
      return fs::absolute(runs.back()).lexically_normal().string();
  }
  std::string msg = "no run '" + ref + "': not a run directory, and not <name>/<run-id> under " +
                    fs::absolute(root).lexically_normal().string();
  fs::path parent = under.parent_path();
  if (fs::is_directory(parent, ec)) {
    auto runs = runs_of(parent);
    if (!runs.empty()) {
      msg += "\n  runs of " + parent.filename().string() + ":";
      for (const auto& r : runs) msg += " " + r.filename().string();
    }
  }
  msg += "\n  fix: `recipe runs list --experiments-dir DIR` shows the runs";
  throw std::runtime_error(msg);
}

std::string recorded_slurm_job(const std::string& run_dir) {
  std::ifstream in(fs::path(run_dir) / "slurm_job.json");
  if (!in) return "";
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("job_id")) return "";
  return j["job_id"].is_string() ? j["job_id"].get<std::string>() : j["job_id"].dump();
}

void record_slurm_job(const std::string& run_dir, const std::string& job_id, const std::string& script_path) {
  nlohmann::ordered_json j;
  j["job_id"] = job_id;
  j["script"] = script_path;
  j["submitted"] = now_iso8601();
  fs::path path = fs::path(run_dir) / "slurm_job.json";
  std::ofstream out(path, std::ios::trunc);
  out << j.dump(2) << "\n";
  if (!out.flush()) throw std::runtime_error("cannot write " + path.string());
}

std::string human_count(double v) {
  char buf[32];
  if (v >= 1e9)
    std::snprintf(buf, sizeof(buf), "%.1fG", v / 1e9);
  else if (v >= 1e6)
    std::snprintf(buf, sizeof(buf), "%.1fM", v / 1e6);
  else if (v >= 1e4)
    std::snprintf(buf, sizeof(buf), "%.1fk", v / 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  return buf;
}

}  // namespace recipe::exec
