#include "launcher/report_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace rm::report {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

namespace {

// The frame: room for tick labels and the rotated y label on the left, the title on top, tick
// labels and the x label below. The legend goes under the frame, never over the data.
constexpr double kLeft = 66, kRight = 14, kTop = 30, kBottom = 42;
constexpr double kLegendRow = 17, kCharWidth = 6.4;  // 11px sans-serif, roughly

std::string px(double v) {
  return fmt("%.1f", v);
}

// Leading digit of a "nice" number near x (> 0): 1, 2, 5 or 10 times a power of ten.
double nice_number(double x, bool round) {
  const double e = std::pow(10.0, std::floor(std::log10(x)));
  const double f = x / e;
  double n;
  if (round) {
    n = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
  } else {
    n = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
  }
  return n * e;
}

struct Frame {
  double x0, x1, y0, y1;              // the plotting area in pixels (y0 top)
  double dx_lo, dx_hi, dy_lo, dy_hi;  // the data domain
  double sx(double x) const { return x0 + (x - dx_lo) / (dx_hi - dx_lo) * (x1 - x0); }
  double sy(double y) const { return y1 - (y - dy_lo) / (dy_hi - dy_lo) * (y1 - y0); }
};

std::string dash_of(Series::Style s) {
  return s == Series::Style::kDashed ? "6 3" : "";
}

std::string line_path(const Frame& f, const std::vector<Point>& pts) {
  std::string d;
  d.reserve(pts.size() * 14);
  for (size_t i = 0; i < pts.size(); ++i) {
    d += (i == 0 ? "M" : "L") + px(f.sx(pts[i].x)) + " " + px(f.sy(pts[i].y));
  }
  return d;
}

// The layers of a stacked plot, binned together and summed from the bottom up.
std::vector<std::vector<Point>> stack_layers(const std::vector<Series>& layers) {
  if (layers.empty()) return {};
  std::vector<double> x;
  for (const Point& p : layers[0].points) x.push_back(p.x);
  std::vector<std::vector<double>> ys;
  for (const Series& s : layers) {
    std::vector<double> y(x.size(), 0.0);
    for (size_t i = 0; i < x.size() && i < s.points.size(); ++i) {
      y[i] = std::isfinite(s.points[i].y) ? std::max(0.0, s.points[i].y) : 0.0;
    }
    ys.push_back(std::move(y));
  }
  Columns c = bin_means(x, ys, kMaxPointsPerSeries / 2);
  std::vector<std::vector<Point>> tops(layers.size());
  std::vector<double> sum(c.x.size(), 0.0);
  for (size_t k = 0; k < layers.size(); ++k) {
    for (size_t i = 0; i < c.x.size(); ++i) {
      sum[i] += c.ys[k][i];
      tops[k].push_back({c.x[i], sum[i]});
    }
  }
  return tops;
}

struct LegendEntry {
  std::string swatch;  // SVG drawn in a 20 x 10 box at the origin
  std::string text;
  std::string attrs;  // extra attributes of the entry's <g>
};

// Entries laid out left to right, wrapping; returns the SVG and the rows used.
std::string legend(const std::vector<LegendEntry>& entries, double left, double top, double width,
                   int* rows) {
  std::string out = "<g class=\"legend\">";
  double x = left, y = top;
  *rows = entries.empty() ? 0 : 1;
  for (const LegendEntry& e : entries) {
    const double w = 26 + kCharWidth * static_cast<double>(e.text.size()) + 14;
    if (x > left && x + w > left + width) {
      x = left;
      y += kLegendRow;
      ++*rows;
    }
    out += "<g class=\"legend-entry\"" + e.attrs + " transform=\"translate(" + px(x) + "," + px(y) +
           ")\">" + e.swatch + "<text x=\"26\" y=\"9\">" + html_escape(e.text) + "</text></g>";
    x += w;
  }
  return out + "</g>";
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const char* entity = c == '&'    ? "&amp;"
                         : c == '<'  ? "&lt;"
                         : c == '>'  ? "&gt;"
                         : c == '"'  ? "&quot;"
                         : c == '\'' ? "&#39;"
                                     : nullptr;
    if (entity != nullptr) {
      out += entity;
    } else {
      out += c;
    }
  }
  return out;
}

Ticks nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (lo > hi) std::swap(lo, hi);
  if (hi - lo <= 1e-12 * std::max(1.0, std::fabs(hi))) {
    const double d = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= d;
    hi += d;
  }
  target = std::max(2, target);
  Ticks t;
  t.step = nice_number(nice_number(hi - lo, false) / (target - 1), true);
  const double first = std::floor(lo / t.step), last = std::ceil(hi / t.step);
  for (double k = first; k <= last + 0.5; k += 1) t.values.push_back(k * t.step);
  if (t.values.size() < 2) t.values.push_back(t.values.back() + t.step);
  return t;
}

std::string tick_label(double value, double step) {
  if (std::fabs(value) < step * 1e-6) value = 0;  // no "-0", no 1e-17 from rounding
  if (value == 0 && step >= 1) return "0";        // not "0k"
  const double mag = std::max(std::fabs(value), step);
  double scale = 1;
  const char* suffix = "";
  if (mag >= 1e6 && step >= 1e5) {
    scale = 1e6, suffix = "M";
  } else if (mag >= 1e4 && step >= 1e3) {
    scale = 1e3, suffix = "k";
  }
  const double s = step / scale;
  if (s < 1e-4) return fmt("%.3g", value);
  int decimals = 0;  // the fewest that write every multiple of the step exactly
  for (double m = s; decimals < 8 && std::fabs(m - std::round(m)) > 1e-6 * m; m *= 10) ++decimals;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s", decimals, value / scale, suffix);
  return buf;
}

std::vector<Point> downsample_min_max(const std::vector<Point>& points, size_t max_points) {
  std::vector<Point> in;
  in.reserve(points.size());
  for (const Point& p : points) {
    if (std::isfinite(p.x) && std::isfinite(p.y)) in.push_back(p);
  }
  max_points = std::max<size_t>(max_points, 4);
  if (in.size() <= max_points) return in;
  const size_t bins = max_points / 2;
  const double x0 = in.front().x, width = (in.back().x - x0) / static_cast<double>(bins);
  std::vector<Point> out;
  size_t i = 0;
  while (i < in.size()) {
    const size_t bin =
        width > 0 ? std::min(bins - 1, static_cast<size_t>((in[i].x - x0) / width)) : 0;
    size_t lo = i, hi = i, j = i;
    for (; j < in.size(); ++j) {
      const size_t b =
          width > 0 ? std::min(bins - 1, static_cast<size_t>((in[j].x - x0) / width)) : 0;
      if (b != bin) break;
      if (in[j].y < in[lo].y) lo = j;
      if (in[j].y > in[hi].y) hi = j;
    }
    out.push_back(in[std::min(lo, hi)]);
    if (lo != hi) out.push_back(in[std::max(lo, hi)]);
    i = j;
  }
  return out;
}

Columns bin_means(const std::vector<double>& x, const std::vector<std::vector<double>>& ys,
                  size_t max_points) {
  max_points = std::max<size_t>(max_points, 2);
  if (x.size() <= max_points) return {x, ys};
  const double x0 = x.front(), width = (x.back() - x0) / static_cast<double>(max_points);
  Columns c;
  c.ys.resize(ys.size());
  size_t i = 0;
  while (i < x.size()) {
    const auto bin_of = [&](size_t k) {
      return width > 0 ? std::min(max_points - 1, static_cast<size_t>((x[k] - x0) / width)) : 0;
    };
    const size_t bin = bin_of(i);
    size_t j = i;
    double sx = 0;
    std::vector<double> sy(ys.size(), 0.0);
    for (; j < x.size() && bin_of(j) == bin; ++j) {
      sx += x[j];
      for (size_t k = 0; k < ys.size(); ++k) sy[k] += ys[k][j];
    }
    const double n = static_cast<double>(j - i);
    c.x.push_back(sx / n);
    for (size_t k = 0; k < ys.size(); ++k) c.ys[k].push_back(sy[k] / n);
    i = j;
  }
  return c;
}

std::string mark_color(const std::string& kind) {
  static const std::map<std::string, std::string> colors = {
      {"checkpoint_saved", "#2a9d8f"}, {"resumed", "#7b2cbf"},
      {"restart", "#d62828"},          {"requeue", "#e76f51"},
      {"nan_skipped", "#f4a261"},      {"spike_skipped", "#e9c46a"},
      {"nan_rollback", "#9c6644"},     {"stop_signal", "#264653"},
      {"signal", "#6c757d"},           {"failed", "#000000"}};
  const auto it = colors.find(kind);
  return it == colors.end() ? "#999999" : it->second;
}

std::string render_plot(const PlotSpec& spec) {
  // Points to draw, bounded; the domain from them and from the marks.
  std::vector<std::vector<Point>> drawn;
  if (spec.stacked) {
    drawn = stack_layers(spec.series);
  } else {
    for (const Series& s : spec.series) {
      drawn.push_back(downsample_min_max(s.points, kMaxPointsPerSeries));
    }
  }
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const auto& pts : drawn) {
    for (const Point& p : pts) {
      xlo = std::min(xlo, p.x), xhi = std::max(xhi, p.x);
      ylo = std::min(ylo, p.y), yhi = std::max(yhi, p.y);
    }
  }
  const bool empty = !std::isfinite(xlo);
  for (const Mark& m : spec.marks) xlo = std::min(xlo, m.x), xhi = std::max(xhi, m.x);
  if (!std::isfinite(xlo)) xlo = 0, xhi = 1;
  if (empty) ylo = 0, yhi = 1;
  if (spec.stacked || spec.y_from_zero) ylo = std::min(0.0, ylo);
  const Ticks xt = nice_ticks(std::min(0.0, xlo), xhi, 7), yt = nice_ticks(ylo, yhi, 6);
  const double w = spec.width, h = spec.height;
  const Frame f{kLeft,
                w - kRight,
                kTop,
                h - kBottom,
                xt.values.front(),
                xt.values.back(),
                yt.values.front(),
                yt.values.back()};

  std::string body;
  // Axes: grid lines and tick labels, then the axis titles.
  body += "<g class=\"axis axis-y\">";
  for (const double v : yt.values) {
    const std::string y = px(f.sy(v));
    body += "<line class=\"grid\" x1=\"" + px(f.x0) + "\" x2=\"" + px(f.x1) + "\" y1=\"" + y +
            "\" y2=\"" + y + "\"/><text class=\"tick\" x=\"" + px(f.x0 - 6) + "\" y=\"" + y +
            "\" dy=\"4\" text-anchor=\"end\">" + tick_label(v, yt.step) + "</text>";
  }
  body += "<text class=\"axis-label\" transform=\"translate(14," + px((f.y0 + f.y1) / 2) +
          ") rotate(-90)\" text-anchor=\"middle\">" + html_escape(spec.y_label) + "</text></g>";
  body += "<g class=\"axis axis-x\">";
  for (const double v : xt.values) {
    const std::string x = px(f.sx(v));
    body += "<line class=\"tick-line\" x1=\"" + x + "\" x2=\"" + x + "\" y1=\"" + px(f.y1) +
            "\" y2=\"" + px(f.y1 + 4) + "\"/><text class=\"tick\" x=\"" + x + "\" y=\"" +
            px(f.y1 + 16) + "\" text-anchor=\"middle\">" + tick_label(v, xt.step) + "</text>";
  }
  body += "<text class=\"axis-label\" x=\"" + px((f.x0 + f.x1) / 2) + "\" y=\"" + px(h - 6) +
          "\" text-anchor=\"middle\">" + html_escape(spec.x_label) + "</text></g>";
  body += "<rect class=\"frame\" x=\"" + px(f.x0) + "\" y=\"" + px(f.y0) + "\" width=\"" +
          px(f.x1 - f.x0) + "\" height=\"" + px(f.y1 - f.y0) + "\"/>";

  // The data, clipped to the frame.
  const std::string clip = "clip-" + spec.id;
  body += "<clipPath id=\"" + html_escape(clip) + "\"><rect x=\"" + px(f.x0) + "\" y=\"" +
          px(f.y0) + "\" width=\"" + px(f.x1 - f.x0) + "\" height=\"" + px(f.y1 - f.y0) +
          "\"/></clipPath><g clip-path=\"url(#" + html_escape(clip) + ")\">";
  std::vector<LegendEntry> entries;
  for (size_t k = 0; k < spec.series.size(); ++k) {
    const Series& s = spec.series[k];
    const std::vector<Point>& pts = drawn[k];
    const std::string attrs =
        " data-run=\"" + html_escape(s.run) + "\" data-series=\"" + html_escape(s.name) + "\"";
    const std::string cls = "series series-" + html_escape(s.name);
    const std::string color = html_escape(s.color);
    if (spec.stacked) {
      std::string d = line_path(f, pts);
      const std::vector<Point>* below = k > 0 ? &drawn[k - 1] : nullptr;
      for (size_t i = pts.size(); i-- > 0;) {
        d += "L" + px(f.sx(pts[i].x)) + " " + px(f.sy(below ? (*below)[i].y : 0.0));
      }
      if (!pts.empty()) d += "Z";
      body += "<path class=\"" + cls + " area\"" + attrs + " fill=\"" + color + "\" d=\"" + d +
              "\"><title>" + html_escape(s.label) + "</title></path>";
      entries.push_back({"<rect width=\"20\" height=\"10\" fill=\"" + color + "\"/>", s.label, ""});
      continue;
    }
    if (pts.empty()) continue;  // e.g. val_loss of a run without evaluations: no legend either
    const std::string dash = dash_of(s.style);
    body += "<path class=\"" + cls + "\"" + attrs + " fill=\"none\" stroke=\"" + color +
            "\" stroke-width=\"" + (s.style == Series::Style::kDots ? "1" : "1.6") + "\"" +
            (dash.empty() ? "" : " stroke-dasharray=\"" + dash + "\"") + " d=\"" +
            line_path(f, pts) + "\"><title>" + html_escape(s.label) + "</title></path>";
    std::string swatch = "<line x1=\"0\" x2=\"20\" y1=\"5\" y2=\"5\" stroke=\"" + color +
                         "\" stroke-width=\"2\"" +
                         (dash.empty() ? "" : " stroke-dasharray=\"" + dash + "\"") + "/>";
    // A line of one point draws nothing (a lone moveto): it gets its dot too.
    if (s.style == Series::Style::kDots || pts.size() == 1) {
      // Zero-length segments with round caps: one element for any number of dots.
      std::string d;
      for (const Point& p : pts) d += "M" + px(f.sx(p.x)) + " " + px(f.sy(p.y)) + "h0";
      body += "<path class=\"dots\"" + attrs + " stroke=\"" + color +
              "\" stroke-width=\"6\" stroke-linecap=\"round\" d=\"" + d + "\"/>";
      if (s.style == Series::Style::kDots) {
        swatch += "<circle cx=\"10\" cy=\"5\" r=\"3\" fill=\"" + color + "\"/>";
      }
    }
    entries.push_back({swatch, s.label, ""});
  }
  body += "</g>";
  if (empty) {
    body += "<text class=\"no-data\" x=\"" + px((f.x0 + f.x1) / 2) + "\" y=\"" +
            px((f.y0 + f.y1) / 2) + "\" text-anchor=\"middle\">no data</text>";
  }

  // Event marks over the data, one legend entry per kind with its count of events (and of the
  // marks drawn, where a kind with many was thinned: 3000 saves read "(300)" before).
  std::map<std::string, std::pair<size_t, size_t>> kinds;  // kind -> events, marks
  for (const Mark& m : spec.marks) {
    kinds[m.kind].first += m.events;
    ++kinds[m.kind].second;
    const std::string x = px(f.sx(m.x));
    body += "<line class=\"mark mark-" + html_escape(m.kind) + "\" data-run=\"" +
            html_escape(m.run) + "\" data-step=\"" + fmt("%.0f", m.x) + "\" x1=\"" + x +
            "\" x2=\"" + x + "\" y1=\"" + px(f.y0) + "\" y2=\"" + px(f.y1) + "\" stroke=\"" +
            mark_color(m.kind) + "\"><title>" + html_escape(m.tooltip) + "</title></line>";
  }
  for (const auto& [kind, count] : kinds) {
    const auto [events, drawn] = count;
    entries.push_back({"<line x1=\"10\" x2=\"10\" y1=\"-1\" y2=\"11\" stroke=\"" +
                           mark_color(kind) + "\" stroke-width=\"2\" stroke-dasharray=\"3 2\"/>",
                       kind + " (" + std::to_string(events) +
                           (drawn == events ? "" : ", " + std::to_string(drawn) + " drawn") + ")",
                       " data-kind=\"" + html_escape(kind) + "\""});
  }

  int rows = 0;
  const std::string legend_svg = legend(entries, f.x0, h + 2, f.x1 - f.x0, &rows);
  const double total_h = h + rows * kLegendRow + 6;
  return "<svg class=\"plot\" id=\"plot-" + html_escape(spec.id) + "\" data-title=\"" +
         html_escape(spec.title) + "\" width=\"" + px(w) + "\" height=\"" + px(total_h) +
         "\" viewBox=\"0 0 " + px(w) + " " + px(total_h) + "\" role=\"img\"><title>" +
         html_escape(spec.title) + "</title><text class=\"plot-title\" x=\"" + px(f.x0) +
         "\" y=\"18\">" + html_escape(spec.title) + "</text>" + body + legend_svg + "</svg>";
}

}  // namespace rm::report
