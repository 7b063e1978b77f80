// Temporary files that a signal must not leave behind. `recipe data prepare` writes its outputs
// under temporary names and renames them at the end; an exception removes them (the callers'
// catch blocks), but SIGINT/SIGTERM/SIGHUP would end the process with tens of MB of
// <prefix>.bin.tmp-<pid> left beside the data. While a RemoveOnSignal lives, those signals unlink
// its paths and then end the process as the signal would have (default action, re-raised).
// One at a time per process (the handler reads one fixed table); paths longer than the table's
// slots are not registered (they are then left behind, as before).
#pragma once

#include <string>
#include <vector>

namespace recipe::data {

class RemoveOnSignal {
 public:
  explicit RemoveOnSignal(const std::vector<std::string>& paths);
  ~RemoveOnSignal();
  RemoveOnSignal(const RemoveOnSignal&) = delete;
  RemoveOnSignal& operator=(const RemoveOnSignal&) = delete;
};

}  // namespace recipe::data
