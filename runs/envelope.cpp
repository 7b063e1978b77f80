#include "runs/envelope.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "runs/run_dir.hpp"
#include "runs/sweep_record.hpp"

namespace fs = std::filesystem;

namespace recipe::exec {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

// Means of timing.jsonl's per-step figures over the steps after the warm-up.
void read_timing(const fs::path& run, int warmup, EnvelopePoint& p) {
  std::ifstream in(run / "timing.jsonl");
  double tps = 0, ms = 0, mfu = 0, peak = 0;
  int n = 0, n_mfu = 0, n_peak = 0;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    ++p.steps;
    if (j["step"].get<int>() <= warmup) continue;
    auto number = [&](const char* key) -> std::optional<double> {
      if (j.contains(key) && j[key].is_number()) return j[key].get<double>();
      return std::nullopt;
    };
    const auto t = number("tokens_per_sec"), s = number("step_ms");
    if (!t || !s) continue;
    tps += *t;
    ms += *s;
    ++n;
    if (auto m = number("mfu")) mfu += *m, ++n_mfu;
    if (auto b = number("peak_memory_bytes"); b && *b > 0) peak += *b, ++n_peak;
  }
  p.steps_measured = n;
  if (n > 0) {
    p.tokens_per_sec = tps / n;
    p.step_ms = ms / n;
  }
  if (n_mfu > 0) p.mfu = mfu / n_mfu;
  if (n_peak > 0) p.peak_memory_bytes = peak / n_peak;
}

int64_t tokens_per_step(const fs::path& run) {
  try {
    const toml::table t = toml::parse_file((run / "resolved.toml").string());
    const auto mb = t["trainer"]["micro_batch_size"].value<int64_t>();
    const auto seq = t["model"]["seq_length"].value<int64_t>();
    if (mb && seq) return *mb * *seq;
  } catch (const std::exception&) {}
  return 0;
}

// Row label (the first axis's part of the name) and column label (the rest).
std::pair<std::string, std::string> cell_of(const EnvelopePoint& p) {
  const auto dash = p.name.find('-');
  if (dash == std::string::npos) return {p.name, "value"};
  return {p.name.substr(0, dash), p.name.substr(dash + 1)};
}

template <class T>
void add_unique(std::vector<T>& v, const T& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

std::string pad(const std::string& s, size_t width) {
  // Width in characters; the labels and numbers here are ASCII.
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

// The memory line's fixed part: GiB at GPU scale; a small model's reads better in MiB.
std::string fixed_part(double bytes) {
  return std::fabs(bytes) >= 0.1 * kGiB ? fmt("%.2f", bytes / kGiB) + " GiB"
                                        : fmt("%.2f", bytes / (1024.0 * 1024.0)) + " MiB";
}

}  // namespace

std::optional<MemoryLine> fit_memory_line(const std::vector<std::pair<double, double>>& xy) {
  if (xy.size() < 2) return std::nullopt;
  double sx = 0, sy = 0;
  for (const auto& [x, y] : xy) sx += x, sy += y;
  const double n = static_cast<double>(xy.size()), mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0;
  for (const auto& [x, y] : xy) sxx += (x - mx) * (x - mx), sxy += (x - mx) * (y - my);
  if (sxx <= 0) return std::nullopt;  // one tokens-per-step value: no slope to fit
  MemoryLine line;
  line.per_token_bytes = sxy / sxx;
  line.intercept_bytes = my - line.per_token_bytes * mx;
  line.points = static_cast<int>(xy.size());
  return line;
}

Envelope read_envelope(const std::string& experiment_root, int warmup_steps) {
  const auto record = read_sweep_record(experiment_root);
  if (!record) throw std::runtime_error(experiment_root + " holds no sweep.json: not a sweep made by `recipe sweep`");
  Envelope env;
  env.experiment = fs::path(experiment_root).lexically_normal().filename().string();
  env.axes = record->axes;
  env.warmup_steps = warmup_steps;
  std::vector<std::pair<double, double>> memory;
  for (const auto& rp : record->points) {
    EnvelopePoint p;
    p.name = rp.name;
    p.settings = rp.settings;
    const fs::path run = fs::path(experiment_root) / rp.name;
    std::error_code ec;
    if (!rp.skipped.empty()) {
      p.state = "skipped";
      p.reason = rp.skipped;
    } else if (!fs::is_regular_file(run / "status.json", ec)) {
      p.state = "not run";
    } else {
      try {
        const RunStatus st = read_status(run.string());
        p.state = st.state;
        if (st.state != "completed") p.reason = st.message;
      } catch (const std::exception& e) {
        p.state = "unknown";
        p.reason = e.what();
      }
      p.tokens_per_step = tokens_per_step(run);
      read_timing(run, warmup_steps, p);
      if (p.state == "completed" && p.peak_memory_bytes && p.tokens_per_step > 0)
        memory.emplace_back(static_cast<double>(p.tokens_per_step), *p.peak_memory_bytes);
    }
    env.points.push_back(std::move(p));
  }
  env.memory_line = fit_memory_line(memory);
  return env;
}

std::string format_envelope(const Envelope& env) {
  std::vector<std::string> rows, cols;
  std::map<std::pair<std::string, std::string>, const EnvelopePoint*> grid;
  for (const auto& p : env.points) {
    const auto [r, c] = cell_of(p);
    add_unique(rows, r);
    add_unique(cols, c);
    grid[{r, c}] = &p;
  }
  std::string s = "Envelope of " + env.experiment + ": " + std::to_string(env.points.size()) +
                  " points; means over the steps after the first " + std::to_string(env.warmup_steps) + " (warm-up)\n";
  size_t width = 10;
  for (const auto& c : cols) width = std::max(width, c.size() + 2);
  size_t row_width = 8;
  for (const auto& r : rows) row_width = std::max(row_width, r.size() + 2);
  struct Metric {
    const char* title;
    std::function<std::optional<double>(const EnvelopePoint&)> get;
    const char* format;
  };
  const std::vector<Metric> metrics = {
      {"tokens/s", [](const EnvelopePoint& p) { return p.tokens_per_sec; }, "%.0f"},
      {"step time (ms)", [](const EnvelopePoint& p) { return p.step_ms; }, "%.1f"},
      {"MFU (%)",
       [](const EnvelopePoint& p) -> std::optional<double> {
         if (!p.mfu) return std::nullopt;
         return *p.mfu * 100.0;
       },
       "%.1f"},
      {"peak memory (GiB)",
       [](const EnvelopePoint& p) -> std::optional<double> {
         if (!p.peak_memory_bytes) return std::nullopt;
         return *p.peak_memory_bytes / kGiB;
       },
       "%.3g"},
  };
  for (const auto& m : metrics) {
    s += std::string("\n") + m.title + "\n" + pad("", row_width);
    for (const auto& c : cols) s += pad(c, width);
    s += "\n";
    for (const auto& r : rows) {
      s += pad(r, row_width);
      for (const auto& c : cols) {
        const auto it = grid.find({r, c});
        std::string cell = "-";
        if (it != grid.end()) {
          const EnvelopePoint& p = *it->second;
          if (p.state == "skipped")
            cell = "too big";
          else if (p.state != "completed" && p.state != "running")
            cell = p.state;
          else if (auto v = m.get(p))
            cell = fmt(m.format, *v);
        }
        s += pad(cell, width);
      }
      s += "\n";
    }
  }
  std::string notes;
  for (const auto& p : env.points) {
    if (p.state == "skipped")
      notes += "  " + p.name + ": not launched, " + p.reason + "\n";
    else if (p.state != "completed")
      notes += "  " + p.name + ": " + p.state + (p.reason.empty() ? "" : ", " + p.reason) + "\n";
    else if (p.steps_measured == 0)
      notes += "  " + p.name + ": " + std::to_string(p.steps) + " steps, none after the " +
               std::to_string(env.warmup_steps) + " warm-up steps (run more steps, or lower --warmup)\n";
  }
  if (!notes.empty()) s += "\n" + notes;
  if (env.memory_line) {
    const MemoryLine& l = *env.memory_line;
    const std::string fixed = fixed_part(l.intercept_bytes);
    s += "\npeak memory ≈ " + fmt("%.2f", l.per_token_bytes / 1024.0) + " KiB per token per step + " + fixed +
         " (least squares over " + std::to_string(l.points) +
         " points; tokens per step = trainer.micro_batch_size × model.seq_length)\n";
  } else {
    s += "\npeak memory line: needs two completed points with different tokens per step\n";
  }
  return s;
}

PlotLayout layout_envelope_plot(const Envelope& env) {
  std::vector<std::string> cols;
  for (const auto& p : env.points) add_unique(cols, cell_of(p).second);
  // One curve per column, its points in tokens-per-step order.
  std::vector<std::vector<MetricPoint>> tps(cols.size()), mem(cols.size());
  int64_t lo = 0, hi = 0;
  for (const auto& p : env.points) {
    if (p.state != "completed" || p.tokens_per_step <= 0) continue;
    const size_t c = static_cast<size_t>(std::find(cols.begin(), cols.end(), cell_of(p).second) - cols.begin());
    const int x = static_cast<int>(std::min<int64_t>(p.tokens_per_step, INT32_MAX));
    if (p.tokens_per_sec) tps[c].push_back({x, *p.tokens_per_sec});
    if (p.peak_memory_bytes) mem[c].push_back({x, *p.peak_memory_bytes / kGiB});
    lo = lo == 0 ? p.tokens_per_step : std::min(lo, p.tokens_per_step);
    hi = std::max(hi, p.tokens_per_step);
  }
  auto by_x = [](const MetricPoint& a, const MetricPoint& b) { return a.step < b.step; };
  for (auto& v : tps) std::sort(v.begin(), v.end(), by_x);
  for (auto& v : mem) std::sort(v.begin(), v.end(), by_x);
  std::vector<std::string> legend = cols;
  PlotPanel throughput{"throughput (tokens/s)", {}}, memory{"peak memory (GiB)", {}};
  for (size_t c = 0; c < cols.size(); ++c) {
    throughput.curves.push_back(&tps[c]);
    memory.curves.push_back(&mem[c]);
  }
  std::vector<MetricPoint> fit, none;
  if (env.memory_line && hi > lo) {
    const MemoryLine& l = *env.memory_line;
    for (int64_t x : {lo, hi})
      fit.push_back({static_cast<int>(std::min<int64_t>(x, INT32_MAX)),
                     (l.intercept_bytes + l.per_token_bytes * static_cast<double>(x)) / kGiB});
    throughput.curves.push_back(&none);
    memory.curves.push_back(&fit);
    legend.push_back("fit: " + fmt("%.2f", l.per_token_bytes / 1024.0) + " KiB/token + " +
                     fixed_part(l.intercept_bytes));
  }
  return layout_panels({throughput, memory}, "tokens per step (micro_batch_size × seq_length)", legend);
}

}  // namespace recipe::exec
