#include "runs/plot_png.hpp"

#include <cmath>
#include <filesystem>

#ifdef RECIPE_HAVE_CAIRO
#include <cairo.h>
#endif

namespace recipe::exec {

#ifdef RECIPE_HAVE_CAIRO

namespace {

void set_color(cairo_t* cr, const PlotColor& c) { cairo_set_source_rgb(cr, c.r / 255.0, c.g / 255.0, c.b / 255.0); }

// A line of odd pixel width along a pixel edge blurs over two pixel rows; moving it to the pixel
// centre keeps frames, grid lines and ticks crisp. Only axis-aligned lines are snapped.
double snap(double v, double width) {
  return static_cast<long>(std::lround(width)) % 2 == 1 ? std::floor(v) + 0.5 : std::round(v);
}

struct ItemPainter {
  cairo_t* cr;

  void operator()(const PlotRect& r) const {
    if (r.fill) {
      set_color(cr, *r.fill);
      cairo_rectangle(cr, r.x, r.y, r.w, r.h);
      cairo_fill(cr);
    }
    if (r.stroke) {
      set_color(cr, *r.stroke);
      cairo_set_line_width(cr, 1);
      double x0 = snap(r.x, 1), y0 = snap(r.y, 1);
      cairo_rectangle(cr, x0, y0, snap(r.x + r.w, 1) - x0, snap(r.y + r.h, 1) - y0);
      cairo_stroke(cr);
    }
  }
  void operator()(const PlotLine& l) const {
    double x1 = l.x1, y1 = l.y1, x2 = l.x2, y2 = l.y2;
    if (y1 == y2) y1 = y2 = snap(y1, l.width);
    if (x1 == x2) x1 = x2 = snap(x1, l.width);
    set_color(cr, l.color);
    cairo_set_line_width(cr, l.width);
    cairo_move_to(cr, x1, y1);
    cairo_line_to(cr, x2, y2);
    cairo_stroke(cr);
  }
  void operator()(const PlotPolyline& p) const {
    if (p.points.empty()) return;
    set_color(cr, p.color);
    cairo_set_line_width(cr, p.width);
    const double dash[2] = {6, 4};
    cairo_set_dash(cr, dash, p.dashed ? 2 : 0, 0);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);  // a one-point curve still shows as a dot
    cairo_move_to(cr, p.points[0].first, p.points[0].second);
    for (size_t i = 1; i < p.points.size(); ++i) cairo_line_to(cr, p.points[i].first, p.points[i].second);
    if (p.points.size() == 1) cairo_line_to(cr, p.points[0].first, p.points[0].second);
    cairo_stroke(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
    cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_MITER);
  }
  void operator()(const PlotText& t) const {
    if (t.text.empty()) return;
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                           t.bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, t.size);
    double x = t.x;
    if (t.anchor != TextAnchor::start) {
      cairo_text_extents_t ext;
      cairo_text_extents(cr, t.text.c_str(), &ext);
      x -= t.anchor == TextAnchor::middle ? ext.x_advance / 2 : ext.x_advance;
    }
    set_color(cr, t.color);
    cairo_move_to(cr, x, t.y);  // the display list's y is the baseline, as for cairo_show_text
    cairo_show_text(cr, t.text.c_str());
  }
};

}  // namespace

bool png_output_available() { return true; }

std::string write_plot_png(const PlotLayout& layout, const std::string& path) {
  const int w = static_cast<int>(std::ceil(layout.width)), h = static_cast<int>(std::ceil(layout.height));
  cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
  cairo_t* cr = cairo_create(surface);
  cairo_set_source_rgb(cr, 1, 1, 1);  // RGB24 starts undefined; a layout without a background stays white
  cairo_paint(cr);
  const ItemPainter paint{cr};
  for (const auto& g : layout.groups)
    for (const auto& item : g.items) std::visit(paint, item);
  cairo_surface_flush(surface);

  std::string error;
  if (cairo_status_t st = cairo_status(cr); st != CAIRO_STATUS_SUCCESS)
    error = std::string("cannot draw the plot: ") + cairo_status_to_string(st);
  else if (cairo_status_t st = cairo_surface_write_to_png(surface, path.c_str()); st != CAIRO_STATUS_SUCCESS)
    error = "cannot write " + path + ": " + cairo_status_to_string(st);
  cairo_destroy(cr);
  cairo_surface_destroy(surface);
  return error;
}

#else  // no Cairo in this build

bool png_output_available() { return false; }

std::string write_plot_png(const PlotLayout&, const std::string& path) {
  return "cannot write " + path + ": this build has no Cairo: install libcairo2-dev and rebuild, or use -o " +
         std::filesystem::path(path).replace_extension(".svg").string();
}

#endif

std::string write_runs_png(const std::vector<PlotSeries>& series, const std::string& path) {
  return write_plot_png(layout_runs_plot(series), path);
}

}  // namespace recipe::exec
