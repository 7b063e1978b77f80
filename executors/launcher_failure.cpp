#include "executors/launcher_failure.hpp"

#include <regex>
#include <sstream>

namespace recipe::exec {

namespace {

const std::regex kProcessName(R"(Process name:\s*\[\[\d+,\d+\],(\d+)\])");
const std::regex kExitCode(R"(^\s*Exit code:\s*(-?\d+))");
const std::regex kNoticedSignal(
    R"(process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)(?: \(([^)]*)\))?)");
const std::regex kAbortRank(R"(MPI_ABORT was invoked on rank (\d+))");
const std::regex kAbortCode(R"(with errorcode (-?\d+))");
const std::regex kSrunExit(R"(srun: error: \S+: tasks? (\d+)(?:-\d+)?: Exited with exit code (\d+))");
const std::regex kSrunSignal(R"(srun: error: \S+: tasks? (\d+)(?:-\d+)?: ([A-Z][A-Za-z ]+))");

}  // namespace

void LauncherFailureParser::found(const RankFailure& f) {
  if (!failure_) failure_ = f;
}

void LauncherFailureParser::line(const std::string& text) {
  std::smatch m;
  if (pending_rank_ >= 0) {
    const std::regex& code = pending_abort_ ? kAbortCode : kExitCode;
    if (std::regex_search(text, m, code)) {
      RankFailure f;
      f.rank = pending_rank_;
      f.exit_code = std::stoi(m[1]);
      if (pending_abort_) f.signal_name = "MPI_Abort";
      found(f);
      pending_rank_ = -1;
      return;
    }
  }
  if (std::regex_search(text, m, kProcessName)) {
    pending_rank_ = std::stoi(m[1]);
    pending_abort_ = false;
  } else if (std::regex_search(text, m, kAbortRank)) {
    pending_rank_ = std::stoi(m[1]);
    pending_abort_ = true;
  } else if (std::regex_search(text, m, kNoticedSignal)) {
    RankFailure f;
    f.rank = std::stoi(m[1]);
    f.signal = std::stoi(m[2]);
    f.signal_name = m[3];
    found(f);
  } else if (std::regex_search(text, m, kSrunExit)) {
    RankFailure f;
    f.rank = std::stoi(m[1]);
    f.exit_code = std::stoi(m[2]);
    found(f);
  } else if (std::regex_search(text, m, kSrunSignal)) {
    RankFailure f;
    f.rank = std::stoi(m[1]);
    f.signal_name = m[2];
    while (!f.signal_name.empty() && f.signal_name.back() == ' ') f.signal_name.pop_back();
    found(f);
  }
}

void LauncherFailureParser::text(const std::string& all) {
  std::istringstream in(all);
  std::string l;
  while (std::getline(in, l)) line(l);
}

std::string describe_rank_failure(const RankFailure& f) {
  std::string who = "rank " + std::to_string(f.rank);
  if (f.signal_name == "MPI_Abort")
    return who + " called MPI_Abort with code " + std::to_string(f.exit_code.value_or(1));
  if (f.exit_code) return who + " exited with status " + std::to_string(*f.exit_code);
  if (f.signal)
    return who + " was killed by signal " + std::to_string(*f.signal) +
           (f.signal_name.empty() ? "" : " (" + f.signal_name + ")");
  return who + " was killed" + (f.signal_name.empty() ? "" : " (" + f.signal_name + ")");
}

}  // namespace recipe::exec
