#include "runs/plot_svg.hpp"

#include <cstdio>
#include <sstream>

namespace recipe::exec {

namespace {

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

const char* anchor_name(TextAnchor a) {
  switch (a) {
    case TextAnchor::middle:
      return "middle";
    case TextAnchor::end:
      return "end";
    case TextAnchor::start:
      break;
  }
  return "start";
}

struct ItemWriter {
  std::ostringstream& s;

  void operator()(const PlotRect& r) const {
    s << "<rect x=\"" << fmt(r.x) << "\" y=\"" << fmt(r.y) << "\" width=\"" << fmt(r.w) << "\" height=\"" << fmt(r.h)
      << "\" fill=\"" << (r.fill ? r.fill->hex() : "none") << "\"";
    if (r.stroke) s << " stroke=\"" << r.stroke->hex() << "\"";
    s << "/>\n";
  }
  void operator()(const PlotLine& l) const {
    s << "<line x1=\"" << fmt(l.x1) << "\" x2=\"" << fmt(l.x2) << "\" y1=\"" << fmt(l.y1) << "\" y2=\"" << fmt(l.y2)
      << "\"";
    if (l.width != 1) s << " stroke-width=\"" << l.width << "\"";
    s << " stroke=\"" << l.color.hex() << "\"/>\n";
  }
  void operator()(const PlotPolyline& p) const {
    s << "<polyline class=\"" << (p.dashed ? "series validation" : "series") << "\" data-series=\"" << p.series
      << "\" fill=\"none\" stroke-width=\"" << p.width << "\" stroke=\"" << p.color.hex() << "\"";
    if (p.dashed) s << " stroke-dasharray=\"6,4\"";
    s << " points=\"";
    for (const auto& [x, y] : p.points) s << fmt(x) << "," << fmt(y) << " ";
    s << "\"/>\n";
  }
  void operator()(const PlotText& t) const {
    s << "<text x=\"" << fmt(t.x) << "\" y=\"" << fmt(t.y) << "\"";
    if (t.anchor != TextAnchor::start) s << " text-anchor=\"" << anchor_name(t.anchor) << "\"";
    s << " font-size=\"" << t.size << "\"";
    if (t.bold) s << " font-weight=\"bold\"";
    if (t.color != PlotColor{}) s << " fill=\"" << t.color.hex() << "\"";
    s << ">" << xml_escape(t.text) << "</text>\n";
  }
};

}  // namespace

std::string render_plot_svg(const PlotLayout& layout) {
  std::ostringstream s;
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(layout.width) << "\" height=\"" << fmt(layout.height)
    << "\" viewBox=\"0 0 " << fmt(layout.width) << " " << fmt(layout.height) << "\" font-family=\"sans-serif\">\n";
  const ItemWriter write{s};
  for (const auto& g : layout.groups) {
    if (!g.css_class.empty()) {
      s << "<g class=\"" << xml_escape(g.css_class) << "\"";
      if (!g.title.empty()) s << " data-title=\"" << xml_escape(g.title) << "\"";
      s << ">\n";
    }
    for (const auto& item : g.items) std::visit(write, item);
    if (!g.css_class.empty()) s << "</g>\n";
  }
  s << "</svg>\n";
  return s.str();
}

std::string render_runs_svg(const std::vector<PlotSeries>& series) { return render_plot_svg(layout_runs_plot(series)); }

}  // namespace recipe::exec
