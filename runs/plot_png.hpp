// `recipe runs plot -o x.png`: the figure of plot_layout drawn with Cairo onto an RGB image of
// layout.width × layout.height pixels. Cairo is optional at build time (RECIPE_HAVE_CAIRO): without
// it png_output_available() is false and write_runs_png says how to get it.
#pragma once

#include <string>
#include <vector>

#include "runs/plot_layout.hpp"

namespace recipe::exec {

// Whether this build links Cairo.
bool png_output_available();

// Draws `layout` and writes it to `path` as PNG. Returns "" on success, else what went wrong
// (including "this build has no Cairo ..." when png_output_available() is false).
std::string write_plot_png(const PlotLayout& layout, const std::string& path);

// write_plot_png(layout_runs_plot(series), path).
std::string write_runs_png(const std::vector<PlotSeries>& series, const std::string& path);

}  // namespace recipe::exec
