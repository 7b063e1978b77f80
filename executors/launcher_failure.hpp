// Which rank ended a multi-rank run, read from the launcher's own messages.
//
// mpirun and srun know which rank failed first and say so on their stderr; the process that
// launched them sees only their exit status. These parsers turn those messages into a rank and an
// exit status, so status.json can say "rank 1 exited with status 3" instead of "mpirun failed":
//   Open MPI 4:  "  Process name: [[13031,1],1]" followed by "  Exit code:    3"
//                "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)."
//                "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD" + "with errorcode 3."
//   Slurm srun:  "srun: error: vm: task 1: Exited with exit code 3"
//                "srun: error: vm: task 1: Killed" (or another signal's name)
#pragma once

#include <optional>
#include <string>

namespace recipe::exec {

struct RankFailure {
  int rank = -1;
  std::optional<int> exit_code;  // the rank's exit status, when it exited
  std::optional<int> signal;     // the signal that killed it, when the launcher names it
  std::string signal_name;       // "Killed", "Terminated", ... as the launcher printed it
};

// Reads launcher output line by line and keeps the first failure it reports (later lines describe
// the ranks stopped because of it).
class LauncherFailureParser {
 public:
  void line(const std::string& text);
  // Parses every line of `text`.
  void text(const std::string& text);
  const std::optional<RankFailure>& failure() const { return failure_; }

 private:
  void found(const RankFailure& f);
  std::optional<RankFailure> failure_;
  int pending_rank_ = -1;  // "Process name:" / "MPI_ABORT ... on rank" seen, code on a later line
  bool pending_abort_ = false;
};

// "rank 1 exited with status 3", "rank 1 was killed by signal 9 (Killed)", "rank 1 was killed
// (Terminated)" (srun names no number), "rank 1 called MPI_Abort with code 3".
std::string describe_rank_failure(const RankFailure& f);

}  // namespace recipe::exec
