// `recipe runs plot`: loss / learning-rate / throughput curves of one or more runs as one SVG
// (three stacked panels sharing the step axis, one colour per run, a legend). SVG only: PNG would
// need a rasterizer this project does not depend on.
#pragma once

#include <string>
#include <vector>

#include "executors/runs_index.hpp"

namespace recipe::exec {

struct PlotSeries {
  std::string label;         // legend text, e.g. "gpt_tiny/run-3"
  RunCurves curves;
};

// The SVG document. Empty curves draw an empty panel with a "no data" note.
std::string render_runs_svg(const std::vector<PlotSeries>& series);

// "Nice" axis ticks covering [lo, hi] (1, 2, 5 × 10^k steps), at most about `max_ticks`.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks);

}  // namespace recipe::exec
