// `recipe sweep RECIPE key=v1,v2 key2=a,b [flags]`: the grid as one experiment, one run dir per
// point, each point resolved (and its memory predicted) before anything runs; then the envelope
// report. `recipe runs envelope EXPERIMENT` prints the report (and draws the chart) at any time.
// The grid and naming are dsl/sweep_grid, the record and envelope runs/, the array job executors/.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cli/verbs.hpp"
#include "dsl/sweep_grid.hpp"
#include "executors/launch.hpp"
#include "executors/process_group.hpp"
#include "executors/slurm_executor.hpp"
#include "executors/sweep_array.hpp"
#include "plan/exit_codes.hpp"
#include "runs/envelope.hpp"
#include "runs/plot_png.hpp"
#include "runs/plot_svg.hpp"
#include "runs/run_dir.hpp"
#include "runs/runs_diff.hpp"
#include "runs/runs_index.hpp"
#include "runs/sweep_record.hpp"

namespace fs = std::filesystem;

namespace recipe::cli {

namespace {

std::string settings_text(const dsl::SweepPoint& p) {
  std::string s;
  for (const auto& [k, v] : p.settings) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

// What a re-run of the sweep does with a point that fits.
enum class Action { run, finished, in_progress };

struct PointState {
  Action action = Action::run;
  std::string note;  // "finished", "slurm array task 12_3: RUNNING", "failed before: ..."
};

// A point whose run dir exists: finished (completed), still queued or running, or to run again.
PointState existing_state(const std::string& dir) {
  PointState ps;
  const exec::RunSummary s = exec::summarize_run(dir);
  if (s.status.state == "completed") return {Action::finished, "finished"};
  if (!s.slurm_job_id.empty() && (s.status.state == "queued" || s.status.state == "running")) {
    const exec::SlurmJobState js = exec::query_slurm_job(s.slurm_job_id);
    const std::string mapped = exec::run_state_of(js.state);
    if (mapped == "queued" || mapped == "running")
      return {Action::in_progress, "slurm job " + s.slurm_job_id + " is " + js.state};
  }
  if (s.slurm_job_id.empty() && s.status.state == "running" && exec::launcher_alive(s.status))
    return {Action::in_progress, "running (pid " + std::to_string(s.status.pid) + ")"};
  ps.note = s.status.state == "created" ? "not started before" : "was " + s.status.state;
  return ps;
}

// A world-1 local point runs as its own `recipe worker` process, so whatever one point leaves
// behind (device memory, a broken CUDA context after a failure) cannot reach the next.
int run_point_process(const std::string& dir, std::ostream& out, std::ostream& err) {
  exec::ProcessGroupOptions opts;
  opts.terminal = &out;
  try {
    const exec::ProcessGroupResult r =
        exec::run_process_group({exec::ChildSpec{{recipe_executable(), "worker", "--run-dir", dir}, {}, 0}}, opts);
    if (r.interrupted) return kExitInterrupted;
    return r.exit_code;
  } catch (const std::exception& e) {
    err << "error: cannot start the worker of " << dir << ": " << e.what() << "\n";
    return kExitEnvironment;
  }
}

// A point that ended non-zero while its status.json still says it runs (the worker was killed,
// e.g. by the kernel's out-of-memory killer) is recorded as failed with the exit status.
void record_failure(const std::string& dir, int code) {
  exec::RunStatus st;
  try {
    st = exec::read_status(dir);
  } catch (const std::exception&) {}
  if (st.state == "failed" || st.state == "completed") return;
  st.state = "failed";
  st.exit_code = code;
  st.end_time = exec::now_iso8601();
  if (st.message.empty()) st.message = "the worker exited with status " + std::to_string(code);
  exec::write_status(dir, st);
}

int report_envelope(const std::string& root, int warmup, std::ostream& out, std::ostream& err) {
  try {
    out << "\n" << exec::format_envelope(exec::read_envelope(root, warmup));
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return kExitRuntime;
  }
  return kExitOk;
}

}  // namespace

int run_sweep(const SweepCommand& a, std::ostream& out, std::ostream& err) {
  const PlanFlags& flags = a.flags;
  dsl::SweepArgs grid;
  dsl::ConfigTree base;
  try {
    grid = dsl::parse_sweep_args(flags.overrides);
  } catch (const dsl::RecipeError& e) {
    err << "error: " << e.what() << "\n";
    return kExitUsage;
  }
  if (grid.axes.empty()) {
    err << "error: a sweep needs at least one key with two or more values, e.g. trainer.micro_batch_size=2,4,8\n";
    return kExitUsage;
  }
  // The recipe with the plain overrides; load_plan reports a recipe that does not load.
  PlanFlags plain = flags;
  plain.overrides = grid.overrides;
  const kernels::GpuInfo gpu = kernels::query_gpus();
  const dsl::ExecutorFacts facts = make_facts(flags, gpu, a.dry_run);
  try {
    base = dsl::load_recipe(flags.spec);
    dsl::apply_overrides(base, grid.overrides);
  } catch (const dsl::RecipeError& e) {
    err << "error: " << e.what() << "\n";
    return kExitInvalidRecipe;
  }
  const std::vector<dsl::SweepPoint> points = dsl::expand_grid(grid.axes);
  std::vector<dsl::ResolvedPoint> resolved;
  try {
    resolved = dsl::resolve_sweep(base, points, flag_overrides(flags), facts);
  } catch (const dsl::RecipeError& e) {
    err << "error: " << e.what() << "\n";
    return kExitInvalidRecipe;
  }

  // Every point must be a valid plan but for its memory: a mistyped key or an impossible layout is
  // the sweep's error, reported (once, for the first such point) before anything runs.
  std::vector<std::string> invalid;
  for (const auto& r : resolved)
    if (r.verdict == dsl::PointVerdict::invalid) {
      if (invalid.empty()) {
        err << "error: point " << r.point.name << " (" << settings_text(r.point) << ") is not a valid plan:\n";
        report_resolution(r.resolved, err);
      }
      invalid.push_back(r.point.name);
    }
  if (!invalid.empty()) {
    if (invalid.size() > 1) {
      err << "  (" << invalid.size() << " points are invalid:";
      for (const auto& n : invalid) err << " " << n;
      err << ")\n";
    }
    err << "nothing was run\n";
    return kExitInvalidRecipe;
  }
  for (const auto& w : resolved.front().resolved.warnings) err << "warning: " << w << "\n";

  plan::Plan first = resolved.front().resolved.plan;
  const std::string name = experiment_name(first, flags.spec);
  const std::string root = exec::experiment_root(first.experiment.dir, name);
  for (auto& r : resolved) {
    r.resolved.plan.experiment.name = name;
    if (exec::experiment_root(r.resolved.plan.experiment.dir, name) != root) {
      err << "error: point " << r.point.name << " writes to another experiment folder than "
          << resolved.front().point.name << ": a sweep is one experiment, so experiment.name and experiment.dir "
          << "cannot be swept\n";
      return kExitUsage;
    }
  }

  // What each point needs now: skipped (too big), finished or in progress (left alone), or run.
  exec::SweepRecord record;
  record.recipe = flags.spec;
  for (const auto& ax : grid.axes) record.axes.push_back(ax.key);
  std::vector<const dsl::ResolvedPoint*> to_run;
  out << "sweep " << name << ": " << resolved.size() << " points (" << root << ")\n";
  for (const auto& r : resolved) {
    exec::SweepRecordPoint rp{r.point.name, r.point.settings, ""};
    const std::string dir = (fs::path(root) / r.point.name).string();
    std::error_code ec;
    if (r.verdict == dsl::PointVerdict::too_big) {
      rp.skipped = r.reason;
      out << "  " << r.point.name << ": not launched, " << r.reason << "\n";
    } else if (fs::is_regular_file(fs::path(dir) / "resolved.toml", ec)) {
      // The same command finds its points again; a changed plan is a different sweep.
      const auto diff = exec::diff_maps(exec::flatten_toml_file((fs::path(dir) / "resolved.toml").string()),
                                        exec::flatten_toml_text(dsl::to_toml(r.resolved.plan), "the new plan"));
      if (!diff.empty()) {
        const auto& d = diff.front();
        err << "error: " << dir << " holds a run of another plan (" << d.key << ": " << (d.a ? *d.a : "(absent)")
            << " there, " << (d.b ? *d.b : "(absent)") << " now"
            << (diff.size() > 1 ? ", and " + std::to_string(diff.size() - 1) + " more keys" : std::string()) << ")\n"
            << "  fix: give this sweep its own --name, or remove that folder to run the point again\n";
        return kExitUsage;
      }
      const PointState ps = existing_state(dir);
      if (ps.action == Action::run) to_run.push_back(&r);
      out << "  " << r.point.name << ": "
          << (ps.action == Action::finished      ? "finished, skipped"
              : ps.action == Action::in_progress ? "in progress (" + ps.note + "), skipped"
                                                 : "to run again (" + ps.note + ")")
          << "\n";
    } else {
      to_run.push_back(&r);
      out << "  " << r.point.name << ": to run (" << settings_text(r.point) << ")\n";
    }
    record.points.push_back(std::move(rp));
  }
  // One array job has one resource request: refuse before anything is created (dry run too).
  if (first.executor.kind == plan::ExecutorKind::slurm && !to_run.empty()) {
    std::vector<plan::Plan> plans;
    std::vector<std::string> names;
    for (const auto* r : to_run) {
      plans.push_back(r->resolved.plan);
      names.push_back("point " + r->point.name);
    }
    if (const std::string why = exec::different_resources(plans, names); !why.empty()) {
      err << "error: " << why << "\nnothing was created\n";
      return kExitInvalidRecipe;
    }
  }
  if (a.dry_run) {
    out << "dry run: nothing created\n";
    return kExitOk;
  }
  try {
    exec::write_sweep_record(root, record);
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return kExitEnvironment;
  }
  if (to_run.empty()) {
    out << "nothing to run\n";
    return first.executor.kind == plan::ExecutorKind::slurm ? kExitOk : report_envelope(root, a.warmup, out, err);
  }
  if (int code = check_runnable(to_run.front()->resolved.plan, gpu, err); code != kExitOk) return code;

  // Fill each point's run dir; its overrides.txt holds the plain overrides and the point's own.
  std::vector<std::string> dirs;
  std::vector<plan::Plan> plans;
  try {
    for (const auto* r : to_run) {
      PlanFlags f = plain;
      for (const auto& o : r->point.overrides()) f.overrides.push_back(o);
      const std::string dir = exec::named_run_dir(root, r->point.name);
      write_run_dir(r->resolved.plan, flags.spec, command_line_record(f), dir, gpu);
      dirs.push_back(dir);
      plans.push_back(r->resolved.plan);
    }
  } catch (const std::exception& e) {
    err << "error: cannot set up the run directories: " << e.what() << "\n";
    return kExitEnvironment;
  }

  if (first.executor.kind == plan::ExecutorKind::slurm) {
    const std::string script = (fs::path(root) / "sweep_array.sh").string();
    try {
      const std::string logs = (fs::path(root) / "sweep_logs").string();
      fs::create_directories(logs);
      std::ofstream f(script, std::ios::trunc);
      f << exec::sweep_array_script(plans, dirs, logs);
      if (!f.flush()) throw std::runtime_error("cannot write " + script + ": " + std::strerror(errno));
    } catch (const std::exception& e) {
      err << "error: " << e.what() << "\n";
      return kExitUsage;
    }
    const exec::SweepSubmitResult sub = exec::submit_sweep_array(script, dirs);
    if (!sub.ok) {
      const int code = sub.message.rfind("could not read a job id", 0) == 0 ? kExitRuntime : kExitEnvironment;
      for (const std::string& d : dirs) exec::mark_submit_failed(d, sub.message, code);
      err << "error: " << sub.message << "\n";
      return code;
    }
    out << "submitted slurm array job " << sub.job_id << " (" << dirs.size() << " task" << (dirs.size() == 1 ? "" : "s")
        << ", " << script << ")\n";
    for (size_t i = 0; i < dirs.size(); ++i)
      out << "  task " << sub.job_id << "_" << i << ": " << to_run[i]->point.name << "\n";
    out << "  envelope when done: recipe runs envelope " << root << "\n";
    return kExitOk;
  }

  int failed = 0;
  for (size_t i = 0; i < dirs.size(); ++i) {
    const auto& r = *to_run[i];
    out << "\n== point " << i + 1 << "/" << dirs.size() << ": " << r.point.name << " (" << settings_text(r.point)
        << ")\n";
    out.flush();
    const int world = std::max(1, r.resolved.plan.parallelism.world_size);
    const int code = world == 1 && r.resolved.plan.executor.kind == plan::ExecutorKind::local
                         ? run_point_process(dirs[i], out, err)
                         : run_prepared(r.resolved.plan, dirs[i], out, err);
    if (code == kExitInterrupted || code == kExitStopped) {
      err << "sweep stopped at " << r.point.name << "; run the same command again to resume it\n";
      return code;
    }
    if (code != kExitOk) {
      ++failed;
      record_failure(dirs[i], code);
      std::string why;
      try {
        why = exec::read_status(dirs[i]).message;
      } catch (const std::exception&) {}
      err << "point " << r.point.name << " failed" << (why.empty() ? "" : ": " + why) << "; the sweep goes on\n";
    }
  }
  const int code = report_envelope(root, a.warmup, out, err);
  out << "chart: recipe runs envelope " << root << " -o envelope.svg\n";
  if (code != kExitOk) return code;
  return failed > 0 ? kExitRuntime : kExitOk;
}

int run_envelope(const std::string& root, int warmup, const std::string& output, std::ostream& out, std::ostream& err) {
  exec::Envelope env;
  try {
    env = exec::read_envelope(root, warmup);
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return kExitUsage;
  }
  out << exec::format_envelope(env);
  if (output.empty()) return kExitOk;
  std::string ext = fs::path(output).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext != ".svg" && ext != ".png") {
    err << "error: -o " << output << ": the chart is written as SVG or PNG, chosen by the file extension\n";
    return kExitUsage;
  }
  const exec::PlotLayout layout = exec::layout_envelope_plot(env);
  if (ext == ".png") {
    if (std::string e = exec::write_plot_png(layout, output); !e.empty()) {
      err << "error: " << e << "\n";
      return exec::png_output_available() ? kExitRuntime : kExitUsage;
    }
  } else {
    std::ofstream f(output, std::ios::trunc);
    f << exec::render_plot_svg(layout);
    if (!f.flush()) {
      err << "error: cannot write " << output << ": " << std::strerror(errno) << "\n";
      return kExitRuntime;
    }
  }
  out << "wrote " << output << " (tokens/s and peak memory over tokens per step)\n";
  return kExitOk;
}

}  // namespace recipe::cli
