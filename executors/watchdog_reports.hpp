// The step watchdog's reports in a run dir (core/train/step_watchdog.hpp): the rank whose watchdog
// fires writes what it saw to <run dir>/watchdog/hang-rank-<r>.txt before it exits with kExitHung,
// so the launcher (mpirun's supervisor, the Slurm batch script) can say why the run ended even when
// the rank that noticed is not rank 0, which owns no status.json.
#pragma once

#include <string>

namespace recipe::exec {

// Removes the reports (and rank progress files) of an earlier attempt of this run dir.
void clear_watchdog_files(const std::string& run_dir);
// Writes rank `rank`'s report; never throws (it runs while the process is about to exit).
void write_watchdog_report(const std::string& run_dir, int rank, const std::string& report);
// The report of the lowest rank that wrote one; "" when none did.
std::string first_watchdog_report(const std::string& run_dir);

}  // namespace recipe::exec
