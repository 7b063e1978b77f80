// `recipe runs list|show|diff|plot|status|logs|cancel|resume|envelope`: the experiment record, read back.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace recipe::cli {

struct RunsArgs {
  std::string experiments_dir = "experiments";
  std::vector<std::string> runs;  // run refs: a path, or <name>/<run-id> under experiments_dir
  std::string output;             // plot: -o file.svg
  bool follow = false;            // logs -f
  int rank = -1;                  // logs --rank R (-1 = every rank)
  std::string experiment;         // envelope: an experiment name under experiments_dir, or its folder
  int warmup = 5;                 // envelope --warmup N: steps left out of the means
  CLI::App* cmd = nullptr;
  CLI::App *list = nullptr, *show = nullptr, *diff = nullptr, *plot = nullptr, *status = nullptr, *logs = nullptr,
           *cancel = nullptr, *resume = nullptr, *envelope = nullptr;
};

// Adds the `runs` verb and its subcommands to `app`, bound to `args`.
CLI::App* add_runs_verb(CLI::App& app, RunsArgs& args);

// Runs the parsed `runs` subcommand. Exit codes: 0 ok, 2 usage (unknown run, bad -o), 3 a
// command against the run failed (scancel, signal), 4 Slurm tools missing.
int run_runs(const RunsArgs& args, std::ostream& out, std::ostream& err);

}  // namespace recipe::cli
