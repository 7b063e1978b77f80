// The geometry of `recipe runs plot` and `recipe runs envelope`'s chart, computed once for every
// output format: stacked panels sharing the x axis (loss with validation loss dashed, learning
// rate, tokens/s over steps; or tokens/s and peak memory over tokens per step), "nice" ticks, one
// colour per series, a legend.
// The result is a small display list in pixel coordinates (origin top left, y down, text y is the
// baseline) that the SVG writer (plot_svg) and the PNG writer (plot_png) only draw.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "runs/runs_index.hpp"

namespace recipe::exec {

struct PlotSeries {
  std::string label;  // legend text, e.g. "gpt_tiny/run-3"
  RunCurves curves;
};

struct PlotColor {
  std::uint8_t r = 0, g = 0, b = 0;
  std::string hex() const;  // "#rrggbb"
  bool operator==(const PlotColor&) const = default;
};

// Colour of series i (a 10-colour cycle).
PlotColor plot_series_color(size_t i);

enum class TextAnchor { start, middle, end };

struct PlotRect {
  double x = 0, y = 0, w = 0, h = 0;
  std::optional<PlotColor> fill, stroke;  // absent: not filled / not outlined
};
struct PlotLine {
  double x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  PlotColor color;
  double width = 1;
};
struct PlotPolyline {
  std::vector<std::pair<double, double>> points;
  PlotColor color;
  double width = 1.5;
  int series = 0;       // index into the PlotSeries list
  bool dashed = false;  // the validation loss, drawn over the training loss in the run's colour
};
struct PlotText {
  double x = 0, y = 0;
  std::string text;  // plain text (renderers escape it as their format needs)
  double size = 12;
  TextAnchor anchor = TextAnchor::start;
  bool bold = false;
  PlotColor color;  // black by default
};
using PlotItem = std::variant<PlotRect, PlotLine, PlotPolyline, PlotText>;

// Items drawn in order. A group with a css_class is a named part of the figure ("panel", "legend");
// SVG writes it as <g class=... data-title=...>, other formats just draw its items.
struct PlotGroup {
  std::string css_class;
  std::string title;
  std::vector<PlotItem> items;
};

struct PlotLayout {
  double width = 0, height = 0;
  std::vector<PlotGroup> groups;  // background first, then panels, axis label, legend
  std::vector<PlotRect> panels;   // the frames of loss, learning rate, throughput (in that order)
};

// One panel of stacked panels that share the x axis: a title and one curve per series (x is the
// MetricPoint's `step`: the step for `runs plot`, tokens per step for `runs envelope`).
struct PlotPanel {
  std::string title;
  std::vector<const std::vector<MetricPoint>*> curves;  // series i has colour plot_series_color(i)
  // Drawn dashed in the same colours and scaled with `curves` (one per series, or none): the
  // validation loss over the training loss.
  std::vector<const std::vector<MetricPoint>*> dashed;
};

// Panels stacked top to bottom, the x axis labelled `x_label`, a legend of the series (one label
// per series index). Empty curves draw an empty panel with a "no data" note.
PlotLayout layout_panels(const std::vector<PlotPanel>& panels, const std::string& x_label,
                         const std::vector<std::string>& legend);

// The whole figure of `recipe runs plot`: loss, learning rate and tokens/s over steps.
PlotLayout layout_runs_plot(const std::vector<PlotSeries>& series);

// "Nice" axis ticks covering [lo, hi] (1, 2, 5 × 10^k steps), at most about `max_ticks`.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks);

}  // namespace recipe::exec
