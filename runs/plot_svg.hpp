// `recipe runs plot -o x.svg`: the figure of plot_layout (loss / learning-rate / throughput panels
// sharing the step axis, one colour per run, a legend) as an SVG document. plot_png draws the same
// display list with Cairo for `-o x.png`.
#pragma once

#include <string>
#include <vector>

#include "runs/plot_layout.hpp"

namespace recipe::exec {

// The SVG document of a laid-out figure.
std::string render_plot_svg(const PlotLayout& layout);

// render_plot_svg(layout_runs_plot(series)). Empty curves draw an empty panel with a "no data" note.
std::string render_runs_svg(const std::vector<PlotSeries>& series);

}  // namespace recipe::exec
