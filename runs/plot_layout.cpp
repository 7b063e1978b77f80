#include "runs/plot_layout.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace recipe::exec {

namespace {

// Pixel layout: panels stacked vertically, the legend to their right.
constexpr double kWidth = 900, kPanelHeight = 220, kTop = 40, kGap = 50, kBottom = 50;
constexpr double kLeft = 80, kRightPlot = 680, kLegendX = 700;
constexpr PlotColor kBlack{0, 0, 0}, kWhite{255, 255, 255}, kFrame{0x33, 0x33, 0x33}, kGrid{0xdd, 0xdd, 0xdd},
    kNote{0x88, 0x88, 0x88};
constexpr PlotColor kSeriesColors[] = {{0x1f, 0x77, 0xb4}, {0xd6, 0x27, 0x28}, {0x2c, 0xa0, 0x2c}, {0xff, 0x7f, 0x0e},
                                       {0x94, 0x67, 0xbd}, {0x8c, 0x56, 0x4b}, {0xe3, 0x77, 0xc2}, {0x7f, 0x7f, 0x7f},
                                       {0xbc, 0xbd, 0x22}, {0x17, 0xbe, 0xcf}};

std::string tick_label(double v) {
  char buf[32];
  double a = std::fabs(v);
  // Whole numbers below a million print plainly (tokens/s ticks: "55000", not "5.5e+04").
  if (a >= 1e3 && a < 1e6 && v == std::floor(v))
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  else if (a != 0 && (a >= 1e5 || a < 1e-3))
    std::snprintf(buf, sizeof(buf), "%.2g", v);
  else
    std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

// `dashed`: curves drawn dashed in the same colours (one per series, or none), scaled with `curves`.
PlotGroup layout_panel(const char* title, const std::vector<const std::vector<MetricPoint>*>& curves,
                       const std::vector<const std::vector<MetricPoint>*>& dashed, double y0, double x_lo,
                       double x_hi) {
  const double y1 = y0 + kPanelHeight;
  PlotGroup g{"panel", title, {}};
  g.items.push_back(PlotText{kLeft, y0 - 8, title, 14, TextAnchor::start, true, kBlack});
  g.items.push_back(PlotRect{kLeft, y0, kRightPlot - kLeft, kPanelHeight, std::nullopt, kFrame});

  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto* set : {&curves, &dashed})
    for (const auto* c : *set)
      for (const auto& pt : *c)
        if (std::isfinite(pt.value)) {
          lo = std::min(lo, pt.value);
          hi = std::max(hi, pt.value);
        }
  if (!std::isfinite(lo)) {
    g.items.push_back(
        PlotText{(kLeft + kRightPlot) / 2, y0 + kPanelHeight / 2, "no data", 14, TextAnchor::middle, false, kNote});
    return g;
  }
  // A flat curve still needs a y range to be drawn in.
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
    double pad = std::max(std::fabs(hi) * 0.05, 1e-9);
    lo -= pad;
    hi += pad;
  }
  auto sx = [&](double x) { return kLeft + (x - x_lo) / (x_hi - x_lo) * (kRightPlot - kLeft); };
  auto sy = [&](double y) { return y1 - (y - lo) / (hi - lo) * kPanelHeight; };

  for (double t : nice_ticks(lo, hi, 5)) {
    g.items.push_back(PlotLine{kLeft, sy(t), kRightPlot, sy(t), kGrid, 1});
    g.items.push_back(PlotText{kLeft - 6, sy(t) + 4, tick_label(t), 11, TextAnchor::end, false, kBlack});
  }
  for (double t : nice_ticks(x_lo, x_hi, 8)) {
    g.items.push_back(PlotLine{sx(t), y1, sx(t), y1 + 4, kFrame, 1});
    g.items.push_back(PlotText{sx(t), y1 + 16, tick_label(t), 11, TextAnchor::middle, false, kBlack});
  }
  for (const auto* set : {&curves, &dashed})
    for (size_t i = 0; i < set->size(); ++i) {
      if ((*set)[i]->empty()) continue;
      PlotPolyline line{{}, plot_series_color(i), 1.5, static_cast<int>(i), set == &dashed};
      for (const auto& pt : *(*set)[i])
        if (std::isfinite(pt.value)) line.points.emplace_back(sx(pt.step), sy(pt.value));
      g.items.push_back(std::move(line));
    }
  return g;
}

}  // namespace

std::string PlotColor::hex() const {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "#%02x%02x%02x", r, g, b);
  return buf;
}

PlotColor plot_series_color(size_t i) { return kSeriesColors[i % std::size(kSeriesColors)]; }

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  std::vector<double> ticks;
  if (!(hi > lo) || max_ticks < 1) return ticks;
  double raw = (hi - lo) / max_ticks;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

PlotLayout layout_panels(const std::vector<PlotPanel>& panels, const std::string& x_label,
                         const std::vector<std::string>& legend) {
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo;
  bool any_dashed = false;
  for (const auto& panel : panels)
    for (const auto* set : {&panel.curves, &panel.dashed})
      for (const auto* c : *set) {
        if (set == &panel.dashed && !c->empty()) any_dashed = true;
        for (const auto& pt : *c) {
          x_lo = std::min<double>(x_lo, pt.step);
          x_hi = std::max<double>(x_hi, pt.step);
        }
      }
  if (!std::isfinite(x_lo)) x_lo = 0, x_hi = 1;
  if (x_hi <= x_lo) x_hi = x_lo + 1;

  const double n = static_cast<double>(panels.size());
  PlotLayout out;
  out.width = kWidth;
  out.height = kTop + n * kPanelHeight + std::max(0.0, n - 1) * kGap + kBottom;
  out.groups.push_back({"", "", {PlotRect{0, 0, out.width, out.height, kWhite, std::nullopt}}});
  for (size_t i = 0; i < panels.size(); ++i) {
    const double y0 = kTop + static_cast<double>(i) * (kPanelHeight + kGap);
    out.groups.push_back(layout_panel(panels[i].title.c_str(), panels[i].curves, panels[i].dashed, y0, x_lo, x_hi));
    out.panels.push_back(PlotRect{kLeft, y0, kRightPlot - kLeft, kPanelHeight, std::nullopt, kFrame});
  }
  out.groups.push_back(
      {"", "", {PlotText{(kLeft + kRightPlot) / 2, out.height - 12, x_label, 12, TextAnchor::middle, false, kBlack}}});
  PlotGroup legend_group{"legend", "", {}};
  for (size_t i = 0; i < legend.size(); ++i) {
    const double y = kTop + 10 + static_cast<double>(i) * 20.0;
    legend_group.items.push_back(PlotLine{kLegendX, y, kLegendX + 24, y, plot_series_color(i), 3});
    legend_group.items.push_back(PlotText{kLegendX + 30, y + 4, legend[i], 12, TextAnchor::start, false, kBlack});
  }
  if (any_dashed) {  // the key of the dashed curves (validation loss)
    const double y = kTop + 10 + static_cast<double>(legend.size()) * 20.0;
    PlotPolyline key{{{kLegendX, y}, {kLegendX + 24, y}}, kBlack, 1.5, -1, true};
    legend_group.items.push_back(std::move(key));
    legend_group.items.push_back(
        PlotText{kLegendX + 30, y + 4, "validation loss", 12, TextAnchor::start, false, kBlack});
  }
  out.groups.push_back(std::move(legend_group));
  return out;
}

PlotLayout layout_runs_plot(const std::vector<PlotSeries>& series) {
  std::vector<PlotPanel> panels = {{"loss", {}}, {"learning rate", {}}, {"throughput (tokens/s)", {}}};
  std::vector<std::string> legend;
  for (const auto& sr : series) {
    panels[0].curves.push_back(&sr.curves.loss);
    panels[0].dashed.push_back(&sr.curves.val_loss);
    panels[1].curves.push_back(&sr.curves.lr);
    panels[2].curves.push_back(&sr.curves.tokens_per_sec);
    legend.push_back(sr.label);
  }
  return layout_panels(panels, "step", legend);
}

}  // namespace recipe::exec
