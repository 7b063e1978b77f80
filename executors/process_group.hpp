// A group of child processes started together and ended together: the launcher side of every
// local multi-process run (N direct children, or one `mpirun` whose output carries N ranks).
//
// - Every child is put into one new process group (not ours), so a terminal's Ctrl-C reaches only
//   the launcher, which forwards SIGINT/SIGTERM to the whole group itself.
// - stdout and stderr of each child are read line by line, routed to a rank (the child's index,
//   or the rank in an `mpirun --tag-output` prefix "[1,<rank>]<stdout>:"), written to the terminal
//   as "[rank <r>] <line>" and to logs/rank-<r>.log without the prefix.
// - When one child ends with a non-zero status or a signal, the others are sent SIGTERM, then
//   SIGKILL after `kill_grace_ms`; every child is reaped before run() returns.
#pragma once

#include <csignal>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace recipe::exec {

struct ChildSpec {
  std::vector<std::string> argv;           // argv[0] is looked up on PATH
  std::map<std::string, std::string> env;  // added to (or replacing in) the launcher's environment
  int rank = 0;                            // rank its untagged output is attributed to;
                                           // -1: the launcher itself ("[launcher]", logs/launcher.log)
};

struct ProcessGroupOptions {
  std::ostream* terminal = nullptr;  // prefixed lines; nullptr = no terminal output
  std::string log_dir;               // logs/rank-<r>.log are appended here; "" = no log files
  bool parse_mpi_tags = false;       // route "[jobid,rank]<stdout>:" lines by their rank
  int log_ranks = 0;                 // create logs/rank-0..N-1.log at start, so a quiet rank has one too
  int kill_grace_ms = 3000;          // SIGTERM → SIGKILL delay when stopping the group
  bool forward_signals = true;       // catch SIGINT/SIGTERM/SIGHUP/SIGUSR1 while running and forward them
  // Signals that ask for a graceful stop: the first of them is relayed as SIGUSR1 to the direct
  // children only (mpirun relays it to its ranks; the whole group would get it twice, which a rank
  // reads as "stop now"). Any later signal, and every signal not listed, stops the group at once:
  // SIGINT is forwarded as SIGINT, the others as SIGTERM.
  std::vector<int> graceful_signals = {SIGUSR1};
  // Called with every routed line (rank, text without the mpirun tag), after it is written; the
  // multi-rank executor reads mpirun's failure report from these.
  std::function<void(int rank, const std::string& text)> on_line;
};

struct ProcessGroupResult {
  int exit_code = 0;         // 0 when every child exited 0; else the first failure's code
                             // (128+signal for a signalled child; 130/143 when interrupted)
  bool interrupted = false;  // a signal asked to stop at once and was forwarded
  std::optional<int> interrupt_signal;
  int stop_signal = 0;            // the graceful stop request relayed as SIGUSR1 (0 = none)
  int first_failed_child = -1;    // index into the spec list, -1 = none
  std::string message;            // "rank 1 exited with status 1; stopped the other ranks"
  std::vector<int> child_status;  // per child: exit status, or 128+signal
};

// Starts every child and supervises it until all have ended. Throws std::runtime_error when a
// child cannot be started (the ones already started are stopped and reaped first).
ProcessGroupResult run_process_group(const std::vector<ChildSpec>& children, const ProcessGroupOptions& opts);

// Splits an `mpirun --tag-output` line "[1,3]<stdout>:text" into (3, "text"); nullopt if untagged.
std::optional<std::pair<int, std::string>> parse_mpi_tag(const std::string& line);

}  // namespace recipe::exec
