// `recipe sweep`'s grid: the command line's `key=v1,v2,...` arguments as axes, their cartesian
// product as points, a directory name per point that says its values ("mb4-seq2048-bf16"), and
// each point resolved with the resolver's memory prediction before anything runs. Pure functions
// of their arguments (no files, no processes), so the CLI, the executors and the tests share them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dsl/dsl.hpp"

namespace recipe::dsl {

// One swept key and its values, each value in override syntax ("4", "bf16", "[1,2]").
struct SweepAxis {
  std::string key;
  std::vector<std::string> values;
};

// The positional arguments after the recipe, split into axes (a key with two or more values) and
// plain overrides (everything else: `k=v`, `k+=v`, a list-typed key's `k=a,b`).
struct SweepArgs {
  std::vector<SweepAxis> axes;
  std::vector<std::string> overrides;
};

// Splits `key=v1,v2,...` at the commas outside brackets and quotes, so `k=[1,2],[3,4]` is two list
// values. A key whose recipe type is a list sweeps only bracketed values (`a,b` is one list there,
// as in an ordinary override). Throws RecipeError for an empty value (`k=1,,2`) or a key given twice.
SweepArgs parse_sweep_args(const std::vector<std::string>& args);

// One point of the grid: the overrides that make it ("trainer.micro_batch_size=4", in axis order)
// and its run-dir name.
struct SweepPoint {
  std::vector<std::pair<std::string, std::string>> settings;  // key, value
  std::string name;                                           // "mb4-seq2048-bf16"
  std::vector<std::string> overrides() const;                 // "key=value" each
};

// The cartesian product, the first axis outermost (it varies slowest): for axes mb {2,4} and seq
// {1024,2048} the points are mb2-seq1024, mb2-seq2048, mb4-seq1024, mb4-seq2048. Names are
// unique: a clash after shortening (two values that differ only in characters a directory name
// drops) gets a "-p<index>" suffix.
std::vector<SweepPoint> expand_grid(const std::vector<SweepAxis>& axes);

// A point's name part for one setting: a short word for common keys ("mb", "gb", "seq", "tp", ...)
// followed by the value; enum keys whose values say what they are (trainer.precision,
// trainer.recompute, ...) give the value alone ("bf16"). Characters other than letters, digits,
// '.', '_' become '_'.
std::string point_name_part(const std::string& key, const std::string& value);

// What the resolver says of one point.
enum class PointVerdict {
  fits,     // valid: launch it
  too_big,  // the only violations are the memory prediction: report and skip
  invalid,  // any other violation: the sweep is refused before anything runs
};

struct ResolvedPoint {
  SweepPoint point;
  ResolveResult resolved;
  PointVerdict verdict = PointVerdict::fits;
  std::string reason;  // too_big: "predicted 93.1 GiB > 79.6 GiB on H100-80GB"
};

// Resolves every point: `base` (recipe + plain overrides) with the point's settings, then
// `after` (the flags' overrides, which apply last as on `recipe pretrain`). Throws RecipeError
// when a setting cannot be applied (a malformed value).
std::vector<ResolvedPoint> resolve_sweep(const ConfigTree& base, const std::vector<SweepPoint>& points,
                                         const std::vector<std::string>& after, const ExecutorFacts& facts);

// The short memory verdict of a plan that does not fit: "predicted 93.1 GiB per rank > 79.6 GiB
// on H100-80GB" (GPU), "predicted 2 CPU ranks × 1.2 GiB > 2.0 GiB available on this host" (CPU).
std::string memory_verdict(const plan::Plan& plan, const ExecutorFacts& facts);

}  // namespace recipe::dsl
