#include "runs/runs_diff.hpp"

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include <toml++/toml.h>

#include "runs/runs_index.hpp"

namespace fs = std::filesystem;

namespace recipe::exec {

namespace {

std::string render(const toml::node& n) {
  std::ostringstream s;
  n.visit([&](auto&& v) { s << toml::toml_formatter{v}; });
  return s.str();
}

void flatten(const toml::table& t, const std::string& prefix, std::map<std::string, std::string>& out) {
  for (const auto& [k, v] : t) {
    std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const toml::table* sub = v.as_table()) {
      if (sub->empty()) out[key] = "{}";
      flatten(*sub, key, out);
    } else {
      // Arrays (including arrays of tables) compare as one value: their order is meaningful.
      out[key] = render(v);
    }
  }
}

std::string number(std::optional<double> v) {
  if (!v) return "-";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.6g", *v);
  return buf;
}

std::map<std::string, std::string> final_metrics(const RunSummary& s) {
  return {{"state", s.status.state},
          {"steps", std::to_string(s.steps)},
          {"loss", number(s.last_loss)},
          {"val_loss", number(s.last_val_loss)},
          {"lr", number(s.last_lr)},
          {"grad_norm", number(s.last_grad_norm)},
          {"tokens_per_sec", number(s.tokens_per_sec)}};
}

}  // namespace

std::map<std::string, std::string> flatten_toml_text(const std::string& text, const std::string& source_name) {
  std::map<std::string, std::string> out;
  try {
    toml::table t = toml::parse(text, source_name);
    flatten(t, "", out);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << source_name << ":" << e.source().begin.line << ": " << e.description();
    throw std::runtime_error(msg.str());
  }
  return out;
}

std::map<std::string, std::string> flatten_toml_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw std::runtime_error(path + " not found (is this a run directory?)");
  try {
    toml::table t = toml::parse_file(path);
    std::map<std::string, std::string> out;
    flatten(t, "", out);
    return out;
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << path << ":" << e.source().begin.line << ": " << e.description();
    throw std::runtime_error(msg.str());
  }
}

std::vector<KeyDiff> diff_maps(const std::map<std::string, std::string>& a,
                               const std::map<std::string, std::string>& b) {
  std::vector<KeyDiff> out;
  auto ia = a.begin();
  auto ib = b.begin();
  while (ia != a.end() || ib != b.end()) {
    if (ib == b.end() || (ia != a.end() && ia->first < ib->first)) {
      out.push_back({ia->first, ia->second, std::nullopt});
      ++ia;
    } else if (ia == a.end() || ib->first < ia->first) {
      out.push_back({ib->first, std::nullopt, ib->second});
      ++ib;
    } else {
      if (ia->second != ib->second) out.push_back({ia->first, ia->second, ib->second});
      ++ia;
      ++ib;
    }
  }
  return out;
}

RunsDiff diff_runs(const std::string& run_a, const std::string& run_b) {
  RunsDiff d;
  auto ca = flatten_toml_file((fs::path(run_a) / "resolved.toml").string());
  auto cb = flatten_toml_file((fs::path(run_b) / "resolved.toml").string());
  d.config = diff_maps(ca, cb);
  d.metrics = diff_maps(final_metrics(summarize_run(run_a)), final_metrics(summarize_run(run_b)));
  return d;
}

}  // namespace recipe::exec
