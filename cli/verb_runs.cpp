// runs list / show / diff / plot / status / logs / cancel / resume / envelope (cli/verb_sweep.cpp).
#include "cli/verb_runs.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "plan/exit_codes.hpp"
#include "cli/verbs.hpp"
#include "runs/plot_png.hpp"
#include "runs/plot_svg.hpp"
#include "runs/runs_diff.hpp"
#include "runs/runs_index.hpp"
#include "executors/slurm_executor.hpp"
#include "runs/tensorboard_writer.hpp"

namespace fs = std::filesystem;

namespace recipe::cli {

namespace {

std::string num(std::optional<double> v, const char* format = "%.4f") {
  if (!v) return "-";
  char buf[40];
  std::snprintf(buf, sizeof(buf), format, *v);
  return buf;
}

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

// A local run that status.json calls created or running, whose launcher process is gone (killed
// with -9, the host rebooted): nothing will ever finish it, so it is shown as failed.
bool launcher_vanished(const exec::RunSummary& s) {
  return s.slurm_job_id.empty() && (s.status.state == "running" || s.status.state == "created") &&
         !exec::launcher_alive(s.status);
}

// The state to show: Slurm's view for slurm runs (status.json is updated when Slurm says the job
// ended but the file still says queued/running); for local runs, a "running" run whose launcher
// is gone is reported as such.
struct LiveState {
  std::string state;
  std::string detail;
};

LiveState live_state(const exec::RunSummary& s) {
  LiveState live{s.status.state, s.status.message};
  if (!s.slurm_job_id.empty()) {
    exec::SlurmJobState js = exec::query_slurm_job(s.slurm_job_id);
    if (js.state.empty()) {
      live.detail = "slurm job " + s.slurm_job_id + " (unknown to Slurm now; state from status.json)";
      return live;
    }
    std::string mapped = exec::run_state_of(js.state);
    live.detail = "slurm job " + s.slurm_job_id + ": " + js.state +
                  (js.exit_code.empty() ? "" : " (exit " + js.exit_code + ")") + " via " + js.source;
    bool file_open = s.status.state == "queued" || s.status.state == "running" || s.status.state == "created";
    bool slurm_final = mapped == "completed" || mapped == "failed" || mapped == "interrupted";
    if (slurm_final && (file_open || (mapped != "completed" && s.status.state == "completed"))) {
      exec::RunStatus st = s.status;
      st.state = mapped;
      st.message = live.detail;
      if (st.end_time.empty()) st.end_time = exec::now_iso8601();
      try {
        exec::write_status(s.path, st);
      } catch (const std::exception&) {}
    }
    live.state = slurm_final ? mapped : (mapped.empty() ? s.status.state : mapped);
    return live;
  }
  if (launcher_vanished(s)) {
    live.state = "failed";
    live.detail = "status.json says " + s.status.state + " but launcher pid " + std::to_string(s.status.pid) +
                  " is gone: the run was killed or the host rebooted";
  }
  return live;
}

int cmd_list(const RunsArgs& a, std::ostream& out) {
  auto runs = exec::list_runs(a.experiments_dir);
  if (runs.empty()) {
    out << "no runs under " << fs::absolute(a.experiments_dir).lexically_normal().string() << "\n";
    return kExitOk;
  }
  out << pad("NAME", 20) << pad("RUN", 9) << pad("STATUS", 12) << pad("STEPS", 7) << pad("LOSS", 9)
      << pad("VAL LOSS", 9) << pad("TOK/S", 9) << "EXECUTOR\n";
  for (const auto& r : runs) {
    out << pad(r.name, 20) << pad(r.id, 9) << pad(launcher_vanished(r) ? "failed" : r.status.state, 12)
        << pad(std::to_string(r.steps), 7) << pad(num(r.last_loss), 9) << pad(num(r.last_val_loss), 9)
        << pad(r.tokens_per_sec ? exec::human_count(*r.tokens_per_sec) : "-", 9)
        << (r.executor.empty() ? "-" : r.executor) << (r.slurm_job_id.empty() ? "" : " (job " + r.slurm_job_id + ")")
        << "\n";
  }
  return kExitOk;
}

int cmd_show(const std::string& run, std::ostream& out, std::ostream& err) {
  exec::RunSummary s = exec::summarize_run(run);
  LiveState live = live_state(s);
  std::string events;
  try {
    events = exec::write_run_events(run);
  } catch (const std::exception& e) {
    err << "warning: cannot write TensorBoard events: " << e.what() << "\n";
  }
  out << "run:      " << s.name << "/" << s.id << "\n";
  out << "path:     " << s.path << "\n";
  out << "status:   " << live.state;
  if (s.status.exit_code) out << " (exit " << *s.status.exit_code << ")";
  out << "\n";
  if (!live.detail.empty()) out << "          " << live.detail << "\n";
  if (!s.status.start_time.empty()) out << "started:  " << s.status.start_time << "\n";
  if (!s.status.end_time.empty()) out << "ended:    " << s.status.end_time << "\n";
  if (!s.device.empty()) out << "device:   " << s.device << "\n";

  std::map<std::string, std::string> cfg;
  try {
    cfg = exec::flatten_toml_file((fs::path(run) / "resolved.toml").string());
  } catch (const std::exception& e) {
    err << "warning: " << e.what() << "\n";
  }
  auto key = [&](const std::string& k) {
    auto it = cfg.find(k);
    if (it == cfg.end()) return std::string("-");
    const std::string& v = it->second;  // TOML text: show strings without their quotes
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
      return v.substr(1, v.size() - 2);
    return v;
  };
  if (!cfg.empty()) {
    out << "plan:     source " << key("source") << ", mode " << key("mode") << ", executor " << key("executor.kind")
        << ", device " << key("trainer.device") << "\n";
    out << "          model " << key("model.num_layers") << " layers x " << key("model.hidden_size") << " hidden, "
        << key("model.num_attention_heads") << " heads, seq " << key("model.seq_length") << "\n";
    out << "          tp " << key("parallelism.tp") << " pp " << key("parallelism.pp") << " cp "
        << key("parallelism.cp") << " dp " << key("parallelism.dp") << " (world " << key("derived.world_size")
        << "), batch " << key("trainer.micro_batch_size") << " micro / " << key("trainer.global_batch_size")
        << " global, " << key("trainer.max_steps") << " steps\n";
  }
  out << "metrics:  step " << s.steps << ", loss " << num(s.last_loss) << ", val loss " << num(s.last_val_loss)
      << ", lr " << num(s.last_lr, "%.3g") << ", grad norm " << num(s.last_grad_norm) << ", "
      << (s.tokens_per_sec ? exec::human_count(*s.tokens_per_sec) : "-") << " tok/s\n";
  out << "files:\n";
  for (const char* f : {"resolved.toml", "launch.sh", "metrics.jsonl", "timing.jsonl", "host.json", "git.json",
                        "slurm_job.json", "logs", "checkpoints"}) {
    std::error_code ec;
    if (fs::exists(fs::path(run) / f, ec)) out << "  " << (fs::path(s.path) / f).string() << "\n";
  }
  if (!events.empty())
    out << "  " << events << "\n  (TensorBoard: tensorboard --logdir "
        << fs::path(s.path).parent_path().parent_path().string() << ")\n";
  return kExitOk;
}

std::string side(const std::optional<std::string>& v) { return v ? *v : "(absent)"; }

int cmd_diff(const std::string& a, const std::string& b, std::ostream& out) {
  exec::RunsDiff d = exec::diff_runs(a, b);
  out << "--- " << a << "\n+++ " << b << "\n";
  if (d.config.empty()) {
    out << "resolved.toml: identical\n";
  } else {
    out << "resolved.toml: " << d.config.size() << " difference" << (d.config.size() == 1 ? "" : "s") << "\n";
    for (const auto& k : d.config) out << "  " << k.key << ": " << side(k.a) << " -> " << side(k.b) << "\n";
  }
  if (d.metrics.empty()) {
    out << "final metrics: identical\n";
  } else {
    out << "final metrics:\n";
    for (const auto& k : d.metrics) out << "  " << k.key << ": " << side(k.a) << " -> " << side(k.b) << "\n";
  }
  return kExitOk;
}

int cmd_plot(const RunsArgs& a, const std::vector<std::string>& runs, std::ostream& out, std::ostream& err) {
  std::string ext = fs::path(a.output).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext != ".svg" && ext != ".png") {
    err << "error: -o " << a.output << ": the plot is written as SVG or PNG, chosen by the file extension\n"
        << "  fix: -o " << fs::path(a.output).replace_extension(".svg").string() << " or -o "
        << fs::path(a.output).replace_extension(".png").string() << "\n";
    return kExitUsage;
  }
  if (ext == ".png" && !exec::png_output_available()) {
    err << "error: -o " << a.output << ": this build has no Cairo, which PNG output needs\n"
        << "  fix: install libcairo2-dev and rebuild, or use -o "
        << fs::path(a.output).replace_extension(".svg").string() << "\n";
    return kExitUsage;
  }
  std::vector<exec::PlotSeries> series;
  for (const auto& r : runs) {
    exec::RunSummary s = exec::summarize_run(r);
    series.push_back({s.name + "/" + s.id, exec::read_run_curves(r)});
  }
  if (ext == ".png") {
    if (std::string e = exec::write_runs_png(series, a.output); !e.empty()) {
      err << "error: " << e << "\n";
      return kExitRuntime;
    }
  } else {
    std::ofstream f(a.output, std::ios::trunc);
    f << exec::render_runs_svg(series);
    if (!f.flush()) {
      err << "error: cannot write " << a.output << ": " << std::strerror(errno) << "\n";
      return kExitRuntime;
    }
  }
  out << "wrote " << a.output << " (" << series.size() << " run" << (series.size() == 1 ? "" : "s")
      << ": loss, learning rate, tokens/s)\n";
  return kExitOk;
}

int cmd_status(const std::string& run, std::ostream& out) {
  exec::RunSummary s = exec::summarize_run(run);
  LiveState live = live_state(s);
  out << s.name << "/" << s.id << ": " << live.state;
  if (s.status.exit_code && live.state == s.status.state) out << " (exit " << *s.status.exit_code << ")";
  out << ", step " << s.steps;
  if (s.last_loss) out << ", loss " << num(s.last_loss);
  if (s.last_val_loss) out << ", val loss " << num(s.last_val_loss);
  if (!s.device.empty()) out << ", on " << s.device;
  out << "\n";
  if (!live.detail.empty())
    out << "  " << live.detail << "\n";
  else if (!s.status.message.empty())
    out << "  " << s.status.message << "\n";
  return kExitOk;
}

// logs/rank-<r>.log sorted by r, then other logs (slurm-<job>.out).
std::vector<fs::path> log_files(const std::string& run, int rank) {
  std::vector<std::pair<long, fs::path>> ranked;
  std::vector<fs::path> other;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(run) / "logs", ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("rank-", 0) == 0 && e.path().extension() == ".log") {
      long r = std::strtol(name.c_str() + 5, nullptr, 10);
      if (rank < 0 || r == rank) ranked.push_back({r, e.path()});
    } else if (rank < 0 && e.is_regular_file()) {
      other.push_back(e.path());
    }
  }
  std::sort(ranked.begin(), ranked.end());
  std::sort(other.begin(), other.end());
  std::vector<fs::path> out;
  out.reserve(ranked.size() + other.size());
  for (auto& [r, p] : ranked) out.push_back(p);
  for (auto& p : other) out.push_back(p);
  return out;
}

int cmd_logs(const RunsArgs& a, const std::string& run, std::ostream& out) {
  std::map<std::string, std::streamoff> offsets;
  auto print_new = [&](bool headers) {
    auto files = log_files(run, a.rank);
    for (const auto& p : files) {
      std::ifstream in(p, std::ios::binary);
      auto& off = offsets[p.string()];
      in.seekg(0, std::ios::end);
      std::streamoff size = in.tellg();
      if (size < off) off = 0;  // truncated (a new run): start over
      if (size == off) continue;
      in.seekg(off);
      std::string chunk(static_cast<size_t>(size - off), '\0');
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      if (headers && files.size() > 1) out << "==> " << p.string() << " <==\n";
      out << chunk;
      out.flush();
      off = size;
    }
    return files.size();
  };
  if (print_new(true) == 0 && !a.follow) out << "(no logs yet in " << run << "/logs)\n";
  if (!a.follow) return kExitOk;
  // Follow until the run ends (status.json or Slurm says so), then print what came last.
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    print_new(true);
    exec::RunSummary s = exec::summarize_run(run);
    std::string st = live_state(s).state;
    if (st == "completed" || st == "failed" || st == "interrupted" || launcher_vanished(s)) {
      print_new(true);
      return kExitOk;
    }
  }
}

int cmd_cancel(const std::string& run, std::ostream& out, std::ostream& err) {
  exec::RunSummary s = exec::summarize_run(run);
  if (!s.slurm_job_id.empty()) {
    std::string why = exec::cancel_slurm_job(s.slurm_job_id);
    if (!why.empty()) {
      err << "error: " << why << "\n";
      return why.find("not found") != std::string::npos ? kExitEnvironment : kExitRuntime;
    }
    out << "cancelled slurm job " << s.slurm_job_id << " (" << s.name << "/" << s.id << ")\n";
    return kExitOk;
  }
  if (s.status.state != "running" || s.status.pid <= 0) {
    err << "error: " << s.name << "/" << s.id << " is " << s.status.state << ", not running: nothing to cancel\n";
    return kExitUsage;
  }
  if (!exec::launcher_alive(s.status)) {  // never signal a pid the system has since given to another process
    err << "error: the launcher of " << s.name << "/" << s.id << " (pid " << s.status.pid << ") is no longer running\n";
    return kExitRuntime;
  }
  if (::kill(static_cast<pid_t>(s.status.pid), SIGTERM) != 0) {
    err << "error: cannot signal pid " << s.status.pid << ": " << std::strerror(errno) << "\n";
    return kExitRuntime;
  }
  out << "sent SIGTERM to pid " << s.status.pid << " (" << s.name << "/" << s.id
      << "); a single-process run saves a checkpoint after this step and stops (state stopped), a "
         "multi-rank run stops its ranks at once (state interrupted)\n";
  return kExitOk;
}

void add_dir_option(CLI::App* cmd, RunsArgs& a) {
  cmd->add_option("--experiments-dir", a.experiments_dir,
                  "Folder holding <name>/<run-id> run dirs (default experiments)");
}

}  // namespace

CLI::App* add_runs_verb(CLI::App& app, RunsArgs& a) {
  a.cmd = app.add_subcommand("runs",
                             "Inspect the experiment record: list, show, diff, plot, status, logs, cancel, resume, "
                             "envelope");
  a.cmd->require_subcommand(1);
  const char* ref_help =
      "Run: a run dir path, or <name>/<run-id> (or <name> for its latest run) under --experiments-dir";
  a.list =
      a.cmd->add_subcommand("list", "Table of runs: name, id, status, steps, last loss, last validation loss, tok/s");
  add_dir_option(a.list, a);
  a.show = a.cmd->add_subcommand("show", "Status, plan summary, final metrics and files of one run");
  a.show->add_option("run", a.runs, ref_help)->required()->expected(1);
  add_dir_option(a.show, a);
  a.diff = a.cmd->add_subcommand("diff", "Differences of two runs' resolved.toml (key by key) and final metrics");
  a.diff->add_option("runs", a.runs, "Two runs (paths or <name>/<run-id>)")->required()->expected(2);
  add_dir_option(a.diff, a);
  a.plot = a.cmd->add_subcommand("plot", "Loss, learning-rate and tokens/s curves of one or more runs as SVG or PNG");
  a.plot->add_option("runs", a.runs, "Runs to plot")->required()->expected(1, 64);
  a.plot->add_option("-o,--output", a.output, "Output file: .svg, or .png (needs a build with Cairo, libcairo2-dev)")
      ->required();
  add_dir_option(a.plot, a);
  a.status = a.cmd->add_subcommand("status", "State of a run (from Slurm for slurm runs, else status.json)");
  a.status->add_option("run", a.runs, ref_help)->required()->expected(1);
  add_dir_option(a.status, a);
  a.logs = a.cmd->add_subcommand("logs", "Print logs/rank-*.log (and the Slurm batch log)");
  a.logs->add_option("run", a.runs, ref_help)->required()->expected(1);
  a.logs->add_flag("-f,--follow", a.follow, "Keep printing new lines until the run ends");
  a.logs->add_option("--rank", a.rank, "Only this rank's log");
  add_dir_option(a.logs, a);
  a.cancel = a.cmd->add_subcommand("cancel", "Stop a run: scancel for slurm runs, SIGTERM to the launcher otherwise");
  a.cancel->add_option("run", a.runs, ref_help)->required()->expected(1);
  add_dir_option(a.cancel, a);
  a.resume = a.cmd->add_subcommand(
      "resume", "Run a stopped, failed or interrupted run again in its run dir, from its newest checkpoint");
  a.resume->add_option("run", a.runs, ref_help)->required()->expected(1);
  add_dir_option(a.resume, a);
  a.envelope = a.cmd->add_subcommand(
      "envelope", "A sweep's envelope: tokens/s, step time, MFU and peak memory per point, the memory line, a chart");
  a.envelope
      ->add_option("experiment", a.experiment, "The sweep's experiment: a name under --experiments-dir, or its folder")
      ->required();
  a.envelope->add_option("-o,--output", a.output, "Also draw the chart: .svg, or .png (needs a build with Cairo)");
  a.envelope->add_option("--warmup", a.warmup, "Steps at the start of each point left out of the means (default 5)")
      ->check(CLI::NonNegativeNumber);
  add_dir_option(a.envelope, a);
  return a.cmd;
}

int run_runs(const RunsArgs& a, std::ostream& out, std::ostream& err) {
  if (*a.list) return cmd_list(a, out);
  if (*a.envelope) {
    std::error_code ec;
    const fs::path given(a.experiment);
    const fs::path root = fs::is_regular_file(given / "sweep.json", ec) ? given : fs::path(a.experiments_dir) / given;
    return run_envelope(fs::absolute(root).lexically_normal().string(), a.warmup, a.output, out, err);
  }
  std::vector<std::string> runs;
  try {
    for (const auto& r : a.runs) runs.push_back(exec::resolve_run(r, a.experiments_dir));
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return kExitUsage;
  }
  if (runs.empty()) {
    err << "error: name a run\n";
    return kExitUsage;
  }
  if (*a.show) return cmd_show(runs[0], out, err);
  if (*a.diff) {
    try {
      return cmd_diff(runs[0], runs[1], out);
    } catch (const std::exception& e) {
      err << "error: " << e.what() << "\n";
      return kExitUsage;
    }
  }
  if (*a.plot) return cmd_plot(a, runs, out, err);
  if (*a.status) return cmd_status(runs[0], out);
  if (*a.logs) return cmd_logs(a, runs[0], out);
  if (*a.cancel) return cmd_cancel(runs[0], out, err);
  if (*a.resume) {
    const exec::RunSummary s = exec::summarize_run(runs[0]);
    if (s.status.state == "completed") {
      // Finished: nothing to resume, and its status.json (the record of how it ended) stays as it is.
      out << s.name << "/" << s.id << " completed" << (s.status.end_time.empty() ? "" : " at " + s.status.end_time)
          << " after " << s.status.steps << " steps: nothing to resume (raise trainer.max_steps in a new run to "
          << "train further)\n";
      return kExitOk;
    }
    if ((s.status.state == "running" && exec::launcher_alive(s.status)) || s.status.state == "queued" ||
        (s.status.state == "running" && !s.slurm_job_id.empty())) {
      err << "error: " << s.name << "/" << s.id << " is " << s.status.state << ": resume it once it has stopped\n";
      return kExitUsage;
    }
    return run_resume(runs[0], out, err);
  }
  err << "error: runs needs a subcommand (list, show, diff, plot, status, logs, cancel, resume, envelope)\n";
  return kExitUsage;
}

}  // namespace recipe::cli
