// Inline SVG line plots for `ringmaster report` (launcher/cmd_report.cc), and the few pieces of
// HTML the report needs: escaping, "nice" axis ticks, downsampling.
//
// Why hand-made SVG: the report must open anywhere with no network and no JavaScript, and it
// has four kinds of picture (lines, sparse dots, stacked areas, vertical event marks), which is
// less code than any embedded plotting library. The output is plain SVG 1.1 inside HTML5.
//
// Stable names a test (or a user's stylesheet) can rely on:
//   <svg class="plot" id="plot-ID" data-title="...">      one per plot
//   <path class="series series-NAME" data-run="RUN" data-series="NAME">   one per run's series
//   <line class="mark mark-EVENT" data-run="RUN" data-step="N"><title>...</title></line>
//   <g class="legend">, with <g class="legend-entry"> per series and per event kind shown
//   <g class="axis axis-x"> / <g class="axis axis-y">, each <text class="tick">
// Pure functions of their arguments; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace rm::report {

// One double through a printf format (e.g. "%.3g"), as the page and its charts write numbers.
std::string fmt(const char* format, double v);

// `text` with & < > " ' replaced by entities: safe as element content and as a quoted
// attribute value.
std::string html_escape(std::string_view text);

// Axis ticks: values k x step, step one of 1, 2, 5 x 10^n, covering [lo, hi] (the first tick
// at or below lo, the last at or above hi) with about `target` ticks (never fewer than 2).
// lo == hi is widened to show the value in the middle; non-finite bounds give {0, 1}.
struct Ticks {
  double step = 1;
  std::vector<double> values;  // ascending; values.front() <= lo, values.back() >= hi
};
Ticks nice_ticks(double lo, double hi, int target = 6);

// A tick label: as many decimals as `step` needs ("0.25", "1200", "3e-05"); values of 10^4 and
// more with a k or M suffix ("12k", "1.5M").
std::string tick_label(double value, double step);

// A series keeps at most this many points (render_plot enforces it): with min/max bins every
// spike of a 100k-step run still shows, and a plot stays under ~50 KB per run.
constexpr size_t kMaxPointsPerSeries = 2000;

struct Point {
  double x = 0, y = 0;
};

// At most max_points (at least 4) of `points` (sorted by x; non-finite y dropped): when there
// are more, the x range is cut into max_points / 2 equal bins and each bin keeps its lowest and
// its highest point, in x order, so a spike or a dip of one step still shows.
std::vector<Point> downsample_min_max(const std::vector<Point>& points, size_t max_points);

// For stacked areas, where a min/max pair has no meaning: x (sorted) and layers ys[k][i] cut into
// at most max_points equal bins of x, each the mean x and the mean of each layer. ys[k] must be
// as long as x; returns {x, ys} in the same shape.
struct Columns {
  std::vector<double> x;
  std::vector<std::vector<double>> ys;
};
Columns bin_means(const std::vector<double>& x, const std::vector<std::vector<double>>& ys,
                  size_t max_points);

// One curve: a run's series. style: line, dashed line, or dots (a sparse series such as
// val_loss, drawn as dots joined by a thin line). For a stacked plot every series is one layer
// and must share the x values of the first.
struct Series {
  std::string name;   // data-series and CSS class: "loss", "val_loss", "compute", ...
  std::string run;    // data-run: the run's label
  std::string label;  // the legend's text
  std::string color;  // CSS colour
  enum class Style { kLine, kDashed, kDots } style = Style::kLine;
  std::vector<Point> points;
};

// A vertical mark at an event's step.
struct Mark {
  double x = 0;
  std::string kind;     // the event: mark-KIND class, one legend entry per kind
  std::string run;      // data-run
  std::string tooltip;  // the <title>: what happened, when, details
  size_t events = 1;    // the events of its kind it stands for (a kind with many is thinned)
};

struct PlotSpec {
  std::string id;  // the svg's id: plot-ID
  std::string title, x_label, y_label;
  std::vector<Series> series;
  std::vector<Mark> marks;
  bool stacked = false;           // series are layers, filled, summed from the bottom up
  bool y_from_zero = false;       // the y axis starts at 0 (rates, times)
  int width = 560, height = 300;  // of the plotting frame with its axes; the legend adds rows
};

// The colour of an event kind's marks (a fixed table; unknown kinds grey).
std::string mark_color(const std::string& kind);

// The <svg> element of one plot. A plot without any point says "no data" in its frame.
std::string render_plot(const PlotSpec& spec);

}  // namespace rm::report
