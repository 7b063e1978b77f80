// runs list / show / diff / plot on synthetic run dirs, in-process through the CLI.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "dsl/dsl.hpp"
#include "runs/plot_svg.hpp"
#include "runs/runs_diff.hpp"
#include "runs/runs_index.hpp"
#include "tests/executors/exec_test_util.hpp"

TEST_SUITE_BEGIN("runs");

using namespace recipe::exec;
using namespace recipe::exec::testing;
using recipe::cli::testing::run;

namespace {

std::string plan_toml(double lr, int tp = 1) {
  recipe::plan::Plan p;
  p.optimizer.lr = lr;
  p.parallelism.tp = tp;
  p.experiment.name = "exp";
  return recipe::dsl::to_toml(p);
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("list, resolve and summarize runs") {
  TempDir tmp;
  auto exp = tmp.path() / "experiments";
  make_run(exp, "wiki", "run-1", plan_toml(1e-3), 5, 3.0);
  make_run(exp, "wiki", "run-10", plan_toml(1e-3), 3, 3.0, "failed");
  make_run(exp, "wiki", "run-2", plan_toml(1e-3), 4, 3.0);
  auto runs = list_runs(exp.string());
  REQUIRE(runs.size() == 3);
  CHECK(runs[0].id == "run-1");
  CHECK(runs[1].id == "run-2");
  CHECK(runs[2].id == "run-10");  // numeric order
  CHECK(runs[0].name == "wiki");
  CHECK(runs[0].steps == 5);
  REQUIRE(runs[0].last_loss);
  CHECK(*runs[0].last_loss == doctest::Approx(2.5));
  REQUIRE(runs[0].tokens_per_sec);
  CHECK(*runs[0].tokens_per_sec == doctest::Approx(3500.0));  // mean of steps 2..5
  CHECK(runs[2].status.state == "failed");

  CHECK(resolve_run("wiki/run-2", exp.string()) == std::filesystem::absolute(exp / "wiki" / "run-2").string());
  CHECK(resolve_run((exp / "wiki" / "run-1").string(), "elsewhere") == (exp / "wiki" / "run-1").string());
  CHECK(resolve_run("wiki", exp.string()).ends_with("run-10"));
  CHECK(resolve_run("wiki/latest", exp.string()).ends_with("run-10"));
  try {
    resolve_run("wiki/run-7", exp.string());
    FAIL("expected an error");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("run-1 run-2 run-10") != std::string::npos);
  }

  auto out = run({"runs", "list", "--experiments-dir", exp.string()});
  CHECK(out.code == 0);
  CHECK(out.out.find("NAME") != std::string::npos);
  CHECK(count(out.out, "wiki") == 3);
  CHECK(out.out.find("failed") != std::string::npos);

  auto show = run({"runs", "show", "wiki/run-1", "--experiments-dir", exp.string()});
  CHECK(show.code == 0);
  CHECK(show.out.find("status:   completed") != std::string::npos);
  CHECK(show.out.find("loss 2.5000") != std::string::npos);
  CHECK(show.out.find("events.out.tfevents.") != std::string::npos);

  auto missing = run({"runs", "show", "nope/run-1", "--experiments-dir", exp.string()});
  CHECK(missing.code == 2);
  CHECK(missing.err.find("no run 'nope/run-1'") != std::string::npos);
}

// Issue 17: `runs list` had no validation-loss column; the device a run resolved (trainer.device
// may stay "auto" in resolved.toml) is recorded in host.json and shown by `runs status`/`show`.
TEST_CASE("runs list shows the last validation loss; runs status and show the device from host.json") {
  TempDir tmp;
  auto exp = tmp.path() / "experiments";
  auto dir = make_run(exp, "val", "run-1", plan_toml(1e-3), 3, 3.0);
  write_text(dir / "metrics.jsonl", read_text(dir / "metrics.jsonl") +
                                        "{\"step\":4,\"loss\":2.5,\"lr\":0.001,\"grad_norm\":1.0,"
                                        "\"consumed_samples\":32,\"val_loss\":2.7182}\n");
  write_text(dir / "host.json",
             "{\"hostname\": \"h\", \"device\": {\"kind\": \"cuda\", \"gpu\": \"NVIDIA H100 80GB HBM3\", "
             "\"ranks\": 8}}\n");
  make_run(exp, "val", "run-2", plan_toml(1e-3), 3, 3.0);  // no validation, no host.json

  auto list = run({"runs", "list", "--experiments-dir", exp.string()});
  CHECK(list.out.find("VAL LOSS") != std::string::npos);
  CHECK_MESSAGE(list.out.find("2.5000   2.7182") != std::string::npos, list.out);
  auto status = run({"runs", "status", "val/run-1", "--experiments-dir", exp.string()});
  CHECK_MESSAGE(status.out.find("val loss 2.7182, on cuda (NVIDIA H100 80GB HBM3), 8 ranks") != std::string::npos,
                status.out);
  auto show = run({"runs", "show", "val/run-1", "--experiments-dir", exp.string()});
  CHECK_MESSAGE(show.out.find("device:   cuda (NVIDIA H100 80GB HBM3), 8 ranks") != std::string::npos, show.out);
  auto older = run({"runs", "status", "val/run-2", "--experiments-dir", exp.string()});
  CHECK(older.out.find(" on ") == std::string::npos);

  // runs plot draws the validation loss dashed in the loss panel, with a legend key.
  const auto svg = tmp.path() / "val.svg";
  auto plot = run({"runs", "plot", "val/run-1", "val/run-2", "-o", svg.string(), "--experiments-dir", exp.string()});
  REQUIRE_MESSAGE(plot.code == 0, plot.err);
  const std::string text = read_text(svg);
  CHECK(count(text, "<polyline class=\"series validation\" data-series=\"0\"") == 1);  // run-1's curve
  CHECK(count(text, "stroke-dasharray") == 2);                                         // and the legend key
  CHECK(text.find(">validation loss<") != std::string::npos);
}

TEST_CASE("runs diff of two runs differing in one override shows exactly that key") {
  TempDir tmp;
  auto exp = tmp.path() / "experiments";
  make_run(exp, "exp", "run-1", plan_toml(1e-3), 5, 3.0);
  make_run(exp, "exp", "run-2", plan_toml(2e-3), 5, 2.0);
  RunsDiff d = diff_runs((exp / "exp" / "run-1").string(), (exp / "exp" / "run-2").string());
  REQUIRE(d.config.size() == 1);
  CHECK(d.config[0].key == "optimizer.lr");
  CHECK(d.config[0].a.has_value());
  CHECK(d.config[0].b.has_value());
  CHECK(*d.config[0].a != *d.config[0].b);
  bool loss_differs = false;
  for (const auto& m : d.metrics) loss_differs |= m.key == "loss";
  CHECK(loss_differs);

  auto out = run({"runs", "diff", "exp/run-1", "exp/run-2", "--experiments-dir", exp.string()});
  CHECK(out.code == 0);
  CHECK(out.out.find("resolved.toml: 1 difference\n") != std::string::npos);
  CHECK(out.out.find("  optimizer.lr: ") != std::string::npos);

  // Keys present on one side only are reported as absent on the other.
  auto kd = diff_maps({{"a", "1"}, {"b", "2"}}, {{"b", "3"}, {"c", "4"}});
  REQUIRE(kd.size() == 3);
  CHECK((kd[0].key == "a" && !kd[0].b));
  CHECK((kd[1].key == "b" && *kd[1].a == "2" && *kd[1].b == "3"));
  CHECK((kd[2].key == "c" && !kd[2].a));
  auto same = diff_runs((exp / "exp" / "run-1").string(), (exp / "exp" / "run-1").string());
  CHECK(same.config.empty());
}

TEST_CASE("runs plot writes an SVG with one polyline per run and panel, and rejects other formats") {
  TempDir tmp;
  auto exp = tmp.path() / "experiments";
  make_run(exp, "exp", "run-1", plan_toml(1e-3), 6, 3.0);
  make_run(exp, "exp", "run-2", plan_toml(2e-3), 4, 2.0);
  auto svg_path = tmp.path() / "loss.svg";
  auto out =
      run({"runs", "plot", "exp/run-1", "exp/run-2", "-o", svg_path.string(), "--experiments-dir", exp.string()});
  CHECK(out.code == 0);
  std::string svg = read_text(svg_path);
  CHECK(svg.starts_with("<?xml"));
  CHECK(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
  CHECK(svg.ends_with("</svg>\n"));
  CHECK(count(svg, "<polyline class=\"series\"") == 6);  // 2 runs x (loss, lr, tok/s)
  CHECK(count(svg, "data-series=\"1\"") == 3);
  CHECK(svg.find(">exp/run-1</text>") != std::string::npos);
  CHECK(svg.find(">exp/run-2</text>") != std::string::npos);
  CHECK(svg.find(">loss</text>") != std::string::npos);
  CHECK(count(svg, "<g") == count(svg, "</g>"));
  // run-1's loss polyline has one point per step.
  auto first = svg.find("points=\"");
  auto end = svg.find('"', first + 8);
  CHECK(count(svg.substr(first, end - first), ",") == 6);

  // Formats other than SVG and PNG are refused before anything is written.
  auto jpg =
      run({"runs", "plot", "exp/run-1", "-o", (tmp.path() / "loss.jpg").string(), "--experiments-dir", exp.string()});
  CHECK(jpg.code == 2);
  CHECK(jpg.err.find("SVG or PNG") != std::string::npos);
  CHECK(jpg.err.find("loss.png") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(tmp.path() / "loss.jpg"));
#ifndef RECIPE_HAVE_CAIRO
  auto png =
      run({"runs", "plot", "exp/run-1", "-o", (tmp.path() / "loss.png").string(), "--experiments-dir", exp.string()});
  CHECK(png.code == 2);
  CHECK(png.err.find("libcairo2-dev") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(tmp.path() / "loss.png"));
#endif

  auto ticks = nice_ticks(0, 1, 5);
  REQUIRE(ticks.size() == 6);
  CHECK(ticks[1] == doctest::Approx(0.2));
}

TEST_CASE("runs status / logs / cancel for a local run") {
  TempDir tmp;
  auto exp = tmp.path() / "experiments";
  auto dir = make_run(exp, "exp", "run-1", plan_toml(1e-3), 2, 3.0, "completed");
  write_text(dir / "logs" / "rank-0.log", "zero line\n");
  write_text(dir / "logs" / "rank-1.log", "one line\n");
  auto st = run({"runs", "status", "exp/run-1", "--experiments-dir", exp.string()});
  CHECK(st.code == 0);
  CHECK(st.out.find("exp/run-1: completed") != std::string::npos);
  auto logs = run({"runs", "logs", "exp/run-1", "--experiments-dir", exp.string()});
  CHECK(logs.out.find("zero line") < logs.out.find("one line"));
  auto one = run({"runs", "logs", "exp/run-1", "--rank", "1", "--experiments-dir", exp.string()});
  CHECK(one.out == "one line\n");
  auto cancel = run({"runs", "cancel", "exp/run-1", "--experiments-dir", exp.string()});
  CHECK(cancel.code == 2);
  CHECK(cancel.err.find("not running") != std::string::npos);

  // A running run whose launcher is a live process: cancel sends it SIGTERM.
  // The close-on-exec pipe reaches EOF once the child has exec'd: before that it still runs the
  // test binary's signal handlers.
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  pid_t child = ::fork();
  if (child == 0) {
    ::signal(SIGTERM, SIG_DFL);
    ::execlp("sleep", "sleep", "30", nullptr);
    ::_exit(127);
  }
  ::close(fds[1]);
  char byte;
  while (::read(fds[0], &byte, 1) > 0) {}
  ::close(fds[0]);
  write_text(dir / "status.json", "{\"state\": \"running\", \"steps\": 1, \"pid\": " + std::to_string(child) + "}\n");
  auto c2 = run({"runs", "cancel", "exp/run-1", "--experiments-dir", exp.string()});
  CHECK(c2.code == 0);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
}

TEST_SUITE_END();
