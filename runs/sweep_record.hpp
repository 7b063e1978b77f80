// The record of a sweep (`recipe sweep`) in its experiment folder: `<experiment>/sweep.json` names
// the swept keys and every point of the grid (its run-dir name, its settings, and why it was not
// launched when the resolver predicted it would not fit). Each launched point is an ordinary run
// dir `<experiment>/<point name>/`, so `recipe runs list|show|diff` see the points as runs;
// `recipe runs envelope` reads this record to lay them out as the grid.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace recipe::exec {

struct SweepRecordPoint {
  std::string name;                                           // run-dir name, e.g. "mb4-seq2048-bf16"
  std::vector<std::pair<std::string, std::string>> settings;  // swept key, value (axis order)
  std::string skipped;  // why it was not launched ("predicted 93.1 GiB per rank > ..."); "" = launched
};

struct SweepRecord {
  std::string recipe;             // the recipe spec as given
  std::vector<std::string> axes;  // swept keys, outermost first
  std::vector<SweepRecordPoint> points;
};

// Writes `<experiment_root>/sweep.json` (atomically: a temporary file renamed). Throws
// std::runtime_error naming the file.
void write_sweep_record(const std::string& experiment_root, const SweepRecord& record);

// The record, or nullopt when the folder holds none (not a sweep). Throws std::runtime_error for a
// sweep.json that does not parse.
std::optional<SweepRecord> read_sweep_record(const std::string& experiment_root);

}  // namespace recipe::exec
