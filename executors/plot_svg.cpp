#include "executors/plot_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace recipe::exec {

namespace {

// Layout in SVG user units: panels stacked vertically, legend at the right.
constexpr double kWidth = 900, kPanelHeight = 220, kTop = 40, kGap = 50;
constexpr double kLeft = 80, kRightPlot = 680, kLegendX = 700;
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

std::string tick_label(double v) {
  char buf[32];
  double a = std::fabs(v);
  if (a != 0 && (a >= 1e5 || a < 1e-3)) std::snprintf(buf, sizeof(buf), "%.2g", v);
  else std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

struct Panel {
  const char* title;
  std::vector<const std::vector<MetricPoint>*> curves;  // one per series
};

void draw_panel(std::ostringstream& s, const Panel& p, double y0, double x_lo, double x_hi) {
  const double y1 = y0 + kPanelHeight;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto* c : p.curves)
    for (const auto& pt : *c)
      if (std::isfinite(pt.value)) {
        lo = std::min(lo, pt.value);
        hi = std::max(hi, pt.value);
      }
  s << "<g class=\"panel\" data-title=\"" << p.title << "\">\n";
  s << "<text x=\"" << fmt(kLeft) << "\" y=\"" << fmt(y0 - 8) << "\" font-size=\"14\" font-weight=\"bold\">"
    << p.title << "</text>\n";
  s << "<rect x=\"" << fmt(kLeft) << "\" y=\"" << fmt(y0) << "\" width=\"" << fmt(kRightPlot - kLeft)
    << "\" height=\"" << fmt(kPanelHeight) << "\" fill=\"none\" stroke=\"#333\"/>\n";
  if (!std::isfinite(lo)) {
    s << "<text x=\"" << fmt((kLeft + kRightPlot) / 2) << "\" y=\"" << fmt(y0 + kPanelHeight / 2)
      << "\" text-anchor=\"middle\" fill=\"#888\">no data</text>\n</g>\n";
    return;
  }
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
    double pad = std::max(std::fabs(hi) * 0.05, 1e-9);
    lo -= pad;
    hi += pad;
  }
  auto sx = [&](double x) { return kLeft + (x - x_lo) / (x_hi - x_lo) * (kRightPlot - kLeft); };
  auto sy = [&](double y) { return y1 - (y - lo) / (hi - lo) * kPanelHeight; };

  for (double t : nice_ticks(lo, hi, 5)) {
    s << "<line x1=\"" << fmt(kLeft) << "\" x2=\"" << fmt(kRightPlot) << "\" y1=\"" << fmt(sy(t)) << "\" y2=\""
      << fmt(sy(t)) << "\" stroke=\"#ddd\"/>\n";
    s << "<text x=\"" << fmt(kLeft - 6) << "\" y=\"" << fmt(sy(t) + 4)
      << "\" text-anchor=\"end\" font-size=\"11\">" << tick_label(t) << "</text>\n";
  }
  for (double t : nice_ticks(x_lo, x_hi, 8)) {
    s << "<line x1=\"" << fmt(sx(t)) << "\" x2=\"" << fmt(sx(t)) << "\" y1=\"" << fmt(y1) << "\" y2=\""
      << fmt(y1 + 4) << "\" stroke=\"#333\"/>\n";
    s << "<text x=\"" << fmt(sx(t)) << "\" y=\"" << fmt(y1 + 16) << "\" text-anchor=\"middle\" font-size=\"11\">"
      << tick_label(t) << "</text>\n";
  }
  for (size_t i = 0; i < p.curves.size(); ++i) {
    const auto& c = *p.curves[i];
    if (c.empty()) continue;
    s << "<polyline class=\"series\" data-series=\"" << i << "\" fill=\"none\" stroke-width=\"1.5\" stroke=\""
      << kColors[i % std::size(kColors)] << "\" points=\"";
    for (const auto& pt : c)
      if (std::isfinite(pt.value)) s << fmt(sx(pt.step)) << "," << fmt(sy(pt.value)) << " ";
    s << "\"/>\n";
  }
  s << "</g>\n";
}

}  // namespace

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

std::string render_runs_svg(const std::vector<PlotSeries>& series) {
  Panel panels[] = {{"loss", {}}, {"learning rate", {}}, {"throughput (tokens/s)", {}}};
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo;
  for (const auto& sr : series) {
    panels[0].curves.push_back(&sr.curves.loss);
    panels[1].curves.push_back(&sr.curves.lr);
    panels[2].curves.push_back(&sr.curves.tokens_per_sec);
    for (const auto* c : {&sr.curves.loss, &sr.curves.lr, &sr.curves.tokens_per_sec})
      for (const auto& pt : *c) {
        x_lo = std::min<double>(x_lo, pt.step);
        x_hi = std::max<double>(x_hi, pt.step);
      }
  }
  if (!std::isfinite(x_lo)) x_lo = 0, x_hi = 1;
  if (x_hi <= x_lo) x_hi = x_lo + 1;

  const double height = kTop + 3 * kPanelHeight + 2 * kGap + 50;
  std::ostringstream s;
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(kWidth) << "\" height=\"" << fmt(height)
    << "\" viewBox=\"0 0 " << fmt(kWidth) << " " << fmt(height) << "\" font-family=\"sans-serif\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  for (int i = 0; i < 3; ++i) draw_panel(s, panels[i], kTop + i * (kPanelHeight + kGap), x_lo, x_hi);
  s << "<text x=\"" << fmt((kLeft + kRightPlot) / 2) << "\" y=\"" << fmt(height - 12)
    << "\" text-anchor=\"middle\" font-size=\"12\">step</text>\n";
  s << "<g class=\"legend\">\n";
  for (size_t i = 0; i < series.size(); ++i) {
    double y = kTop + 10 + i * 20.0;
    s << "<line x1=\"" << fmt(kLegendX) << "\" x2=\"" << fmt(kLegendX + 24) << "\" y1=\"" << fmt(y) << "\" y2=\""
      << fmt(y) << "\" stroke-width=\"3\" stroke=\"" << kColors[i % std::size(kColors)] << "\"/>\n";
    s << "<text x=\"" << fmt(kLegendX + 30) << "\" y=\"" << fmt(y + 4) << "\" font-size=\"12\">"
      << xml_escape(series[i].label) << "</text>\n";
  }
  s << "</g>\n</svg>\n";
  return s.str();
}

}  // namespace recipe::exec
