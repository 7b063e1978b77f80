// `recipe runs plot -o x.png`: the shared plot layout, and the PNG drawn from it with Cairo, read
// back with Cairo and checked pixel by pixel.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "dsl/dsl.hpp"
#include "runs/plot_png.hpp"
#include "runs/plot_svg.hpp"
#include "tests/executors/exec_test_util.hpp"

#ifdef RECIPE_HAVE_CAIRO
#include <cairo.h>
#endif

TEST_SUITE_BEGIN("runs");

using namespace recipe::exec;
using namespace recipe::exec::testing;
using recipe::cli::testing::run;

namespace {

std::string plan_toml() {
  recipe::plan::Plan p;
  p.experiment.name = "exp";
  return recipe::dsl::to_toml(p);
}

std::vector<PlotSeries> two_runs(const std::filesystem::path& exp, bool second_has_timing = true) {
  auto d1 = make_run(exp, "exp", "run-1", plan_toml(), 6, 3.0);
  auto d2 = make_run(exp, "exp", "run-2", plan_toml(), 4, 2.0);
  if (!second_has_timing) std::filesystem::remove(d2 / "timing.jsonl");
  return {{"exp/run-1", read_run_curves(d1.string())}, {"exp/run-2", read_run_curves(d2.string())}};
}

template <class T>
size_t count_items(const PlotGroup& g) {
  size_t n = 0;
  for (const auto& item : g.items) n += std::holds_alternative<T>(item);
  return n;
}

}  // namespace

TEST_CASE("plot layout: three panels, one polyline per run and panel, a legend entry per run") {
  TempDir tmp;
  auto series = two_runs(tmp.path() / "experiments");
  PlotLayout l = layout_runs_plot(series);
  CHECK(l.width == 900);
  CHECK(l.height == 850);
  REQUIRE(l.panels.size() == 3);
  for (size_t i = 1; i < 3; ++i) CHECK(l.panels[i].y > l.panels[i - 1].y + l.panels[i - 1].h);  // stacked, apart

  std::vector<const PlotGroup*> panels;
  const PlotGroup* legend = nullptr;
  for (const auto& g : l.groups) {
    if (g.css_class == "panel") panels.push_back(&g);
    if (g.css_class == "legend") legend = &g;
  }
  REQUIRE(panels.size() == 3);
  CHECK(panels[0]->title == "loss");
  CHECK(panels[2]->title == "throughput (tokens/s)");
  for (size_t p = 0; p < 3; ++p) {
    CHECK(count_items<PlotPolyline>(*panels[p]) == 2);
    // Every curve point lies inside its panel's frame.
    for (const auto& item : panels[p]->items)
      if (const auto* pl = std::get_if<PlotPolyline>(&item))
        for (const auto& [x, y] : pl->points) {
          CHECK(x >= l.panels[p].x - 1e-9);
          CHECK(x <= l.panels[p].x + l.panels[p].w + 1e-9);
          CHECK(y >= l.panels[p].y - 1e-9);
          CHECK(y <= l.panels[p].y + l.panels[p].h + 1e-9);
        }
  }
  REQUIRE(legend != nullptr);
  CHECK(count_items<PlotLine>(*legend) == 2);
  CHECK(std::get<PlotText>(legend->items[1]).text == "exp/run-1");
  CHECK(plot_series_color(0) != plot_series_color(1));
  CHECK(plot_series_color(0).hex() == "#1f77b4");
  CHECK(plot_series_color(10) == plot_series_color(0));

  // The SVG writer draws the same display list.
  std::string svg = render_plot_svg(l);
  CHECK(svg.find("stroke=\"#d62728\" points=\"") != std::string::npos);
  CHECK(svg.find("<g class=\"panel\" data-title=\"learning rate\">") != std::string::npos);

  // A run without timing.jsonl leaves the throughput panel with a "no data" note and no curve.
  TempDir tmp2;
  PlotLayout l2 = layout_runs_plot(two_runs(tmp2.path() / "experiments", false));
  const PlotGroup* tput = nullptr;
  for (const auto& g : l2.groups)
    if (g.title == "throughput (tokens/s)") tput = &g;
  REQUIRE(tput != nullptr);
  CHECK(count_items<PlotPolyline>(*tput) == 1);
  PlotLayout empty = layout_runs_plot({{"exp/none", RunCurves{}}});
  bool no_data = false;
  for (const auto& g : empty.groups)
    for (const auto& item : g.items)
      if (const auto* t = std::get_if<PlotText>(&item)) no_data |= t->text == "no data";
  CHECK(no_data);

  // Tick labels: whole numbers below a million print plainly (not "5.2e+04").
  RunCurves c;
  c.tokens_per_sec = {{1, 50000}, {2, 60000}};
  c.lr = {{1, 0}, {2, 0.0003}};
  bool plain = false, exp_form = false;
  for (const auto& g : layout_runs_plot({{"x", c}}).groups)
    for (const auto& item : g.items)
      if (const auto* t = std::get_if<PlotText>(&item)) {
        plain |= t->text == "52000";  // ticks every 2000
        exp_form |= t->text.find("e+04") != std::string::npos;
      }
  CHECK(plain);
  CHECK_FALSE(exp_form);
}

#ifdef RECIPE_HAVE_CAIRO

namespace {

struct Image {
  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface{nullptr, cairo_surface_destroy};
  int width = 0, height = 0;

  explicit Image(const std::filesystem::path& png)
      : surface(cairo_image_surface_create_from_png(png.c_str()), cairo_surface_destroy) {
    if (cairo_surface_status(surface.get()) != CAIRO_STATUS_SUCCESS) return;
    cairo_surface_flush(surface.get());
    width = cairo_image_surface_get_width(surface.get());
    height = cairo_image_surface_get_height(surface.get());
  }
  bool ok() const { return cairo_surface_status(surface.get()) == CAIRO_STATUS_SUCCESS; }

  // RGB of pixel (x, y). RGB24 and ARGB32 both store one native-endian 0xAARRGGBB word per pixel.
  PlotColor at(int x, int y) const {
    const unsigned char* data = cairo_image_surface_get_data(surface.get());
    const int stride = cairo_image_surface_get_stride(surface.get());
    std::uint32_t px = reinterpret_cast<const std::uint32_t*>(data + static_cast<size_t>(y) * stride)[x];
    return {static_cast<std::uint8_t>(px >> 16), static_cast<std::uint8_t>(px >> 8), static_cast<std::uint8_t>(px)};
  }

  // Pixels in [x0, x1) × [y0, y1) within `tol` of `c` in every channel.
  size_t count(const PlotColor& c, double x0, double y0, double x1, double y1, int tol = 24) const {
    size_t n = 0;
    for (int y = static_cast<int>(y0); y < static_cast<int>(y1); ++y)
      for (int x = static_cast<int>(x0); x < static_cast<int>(x1); ++x) {
        PlotColor p = at(x, y);
        n += std::abs(p.r - c.r) <= tol && std::abs(p.g - c.g) <= tol && std::abs(p.b - c.b) <= tol;
      }
    return n;
  }
};

constexpr PlotColor kWhite{255, 255, 255};

}  // namespace

TEST_CASE("PNG plot: the image has the layout's size, each run's colour in every panel, a white background") {
  TempDir tmp;
  auto series = two_runs(tmp.path() / "experiments");
  auto png = tmp.path() / "loss.png";
  REQUIRE(png_output_available());
  REQUIRE(write_runs_png(series, png.string()) == "");

  Image img(png);
  REQUIRE(img.ok());
  PlotLayout l = layout_runs_plot(series);
  CHECK(img.width == 900);
  CHECK(img.height == 850);
  CHECK(img.width == static_cast<int>(l.width));
  CHECK(img.height == static_cast<int>(l.height));

  for (const auto& p : l.panels) {
    // Inside the frame (2 px in, away from its stroke).
    const double x0 = p.x + 2, y0 = p.y + 2, x1 = p.x + p.w - 2, y1 = p.y + p.h - 2;
    CAPTURE(p.y);
    CHECK(img.count(plot_series_color(0), x0, y0, x1, y1) > 20);
    CHECK(img.count(plot_series_color(1), x0, y0, x1, y1) > 20);
    CHECK(img.count(plot_series_color(2), x0, y0, x1, y1) == 0);  // only two runs
    // Two thin curves and a few grid lines: most of the panel stays white.
    const double area = (x1 - x0) * (y1 - y0);
    CHECK(static_cast<double>(img.count(kWhite, x0, y0, x1, y1, 0)) > 0.8 * area);
    // The frame is drawn: the pixel column at its right edge is dark grey from top to bottom, but for
    // where a curve ends on it (grid lines and curves are drawn over the frame, as in the SVG).
    CHECK(img.count({0x33, 0x33, 0x33}, p.x + p.w, p.y + 2, p.x + p.w + 1, p.y + p.h - 2, 8) >=
          static_cast<size_t>(0.95 * (p.h - 4)));
  }
  // Margins with no drawing are white: the top-left corner, the strip right of the legend labels,
  // and the gap between the first panel's tick labels and the second panel's title.
  CHECK(img.at(2, 2) == kWhite);
  CHECK(img.count(kWhite, 880, 0, 900, 850, 0) == 20u * 850u);
  CHECK(img.count(kWhite, l.panels[0].x, l.panels[0].y + l.panels[0].h + 20, l.panels[0].x + l.panels[0].w,
                  l.panels[1].y - 22,
                  0) == static_cast<size_t>(l.panels[0].w) *
                            static_cast<size_t>(l.panels[1].y - 22 - (l.panels[0].y + l.panels[0].h + 20)));
  // The legend swatches: a 3 px line of each run's colour at x 700..724.
  CHECK(img.count(plot_series_color(0), 700, 45, 725, 55, 0) >= 20);
  CHECK(img.count(plot_series_color(1), 700, 65, 725, 75, 0) >= 20);

  // An unwritable path is reported, not crashed on.
  std::string err = write_runs_png(series, (tmp.path() / "no-such-dir" / "x.png").string());
  CHECK(err.find("no-such-dir") != std::string::npos);
}

TEST_CASE("PNG plot: a run with no timing data still gives a valid image, its throughput panel without its curve") {
  TempDir tmp;
  auto series = two_runs(tmp.path() / "experiments", false);
  auto png = tmp.path() / "loss.png";
  REQUIRE(write_runs_png(series, png.string()) == "");
  Image img(png);
  REQUIRE(img.ok());
  CHECK(img.width == 900);
  PlotLayout l = layout_runs_plot(series);
  const auto& loss = l.panels[0];
  const auto& tput = l.panels[2];
  CHECK(img.count(plot_series_color(1), loss.x + 2, loss.y + 2, loss.x + loss.w - 2, loss.y + loss.h - 2) > 20);
  CHECK(img.count(plot_series_color(0), tput.x + 2, tput.y + 2, tput.x + tput.w - 2, tput.y + tput.h - 2) > 20);
  CHECK(img.count(plot_series_color(1), tput.x + 2, tput.y + 2, tput.x + tput.w - 2, tput.y + tput.h - 2) == 0);

  // No curves at all: every panel is empty but the image is still written.
  REQUIRE(write_runs_png({{"exp/none", RunCurves{}}}, png.string()) == "");
  Image blank(png);
  REQUIRE(blank.ok());
  CHECK(blank.height == 850);
  CHECK(blank.count(plot_series_color(0), 80, 40, 680, 800) == 0);
}

TEST_CASE("runs plot -o x.png through the CLI writes a PNG file") {
  TempDir tmp;
  auto exp = tmp.path() / "experiments";
  two_runs(exp);
  auto png = tmp.path() / "loss.png";
  auto out = run({"runs", "plot", "exp/run-1", "exp/run-2", "-o", png.string(), "--experiments-dir", exp.string()});
  CHECK(out.code == 0);
  CHECK(out.out.find("wrote " + png.string()) != std::string::npos);
  std::string bytes = read_text(png);
  CHECK(bytes.starts_with("\x89PNG\r\n\x1a\n"));
  Image img(png);
  CHECK(img.ok());
  CHECK(img.width == 900);

  auto upper =
      run({"runs", "plot", "exp/run-1", "-o", (tmp.path() / "LOSS.PNG").string(), "--experiments-dir", exp.string()});
  CHECK(upper.code == 0);
  CHECK(read_text(tmp.path() / "LOSS.PNG").starts_with("\x89PNG"));

  auto jpg =
      run({"runs", "plot", "exp/run-1", "-o", (tmp.path() / "loss.jpg").string(), "--experiments-dir", exp.string()});
  CHECK(jpg.code == 2);
  CHECK_FALSE(std::filesystem::exists(tmp.path() / "loss.jpg"));

  auto bad_dir = run({"runs", "plot", "exp/run-1", "-o", (tmp.path() / "missing" / "loss.png").string(),
                      "--experiments-dir", exp.string()});
  CHECK(bad_dir.code == 3);
  CHECK(bad_dir.err.find("cannot write") != std::string::npos);
}

#else

TEST_CASE("PNG plot without Cairo: an actionable error") {
  CHECK_FALSE(png_output_available());
  std::string err = write_runs_png({}, "/tmp/x.png");
  CHECK(err.find("libcairo2-dev") != std::string::npos);
  CHECK(err.find("-o /tmp/x.svg") != std::string::npos);
}

#endif

TEST_SUITE_END();
