#include "launcher/report_svg.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace rm::report {
namespace {

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// 1, 2 or 5 times a power of ten.
bool is_nice(double step) {
  const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  return std::fabs(mantissa - 1) < 1e-9 || std::fabs(mantissa - 2) < 1e-9 ||
         std::fabs(mantissa - 5) < 1e-9;
}

TEST(ReportSvg, NiceTicksCoverTheRangeInOneTwoFiveSteps) {
  const Ticks t = nice_ticks(0, 97, 6);
  EXPECT_EQ(t.step, 20);
  EXPECT_EQ(t.values, (std::vector<double>{0, 20, 40, 60, 80, 100}));
  const double ranges[][2] = {{0, 1},      {1.83, 5.61}, {-3, 7},      {0.00021, 0.0029},
                              {1, 120000}, {13, 14},     {-1e6, -2e5}, {2.5e-5, 3e-4},
                              {0, 1e9},    {999, 1001}};
  for (const auto& [lo, hi] : ranges) {
    const Ticks ticks = nice_ticks(lo, hi, 6);
    EXPECT_TRUE(is_nice(ticks.step)) << lo << " " << hi << ": step " << ticks.step;
    EXPECT_LE(ticks.values.front(), lo) << lo << " " << hi;
    EXPECT_GE(ticks.values.back(), hi) << lo << " " << hi;
    EXPECT_GE(ticks.values.size(), 3u) << lo << " " << hi;
    EXPECT_LE(ticks.values.size(), 12u) << lo << " " << hi;
    for (size_t i = 1; i < ticks.values.size(); ++i) {
      EXPECT_NEAR(ticks.values[i] - ticks.values[i - 1], ticks.step, ticks.step * 1e-9);
    }
  }
}

TEST(ReportSvg, NiceTicksOfOneValueOrNoneStillMakeAnAxis) {
  const Ticks one = nice_ticks(0.003, 0.003);
  EXPECT_LT(one.values.front(), 0.003);
  EXPECT_GT(one.values.back(), 0.003);
  const Ticks none = nice_ticks(NAN, INFINITY);
  EXPECT_EQ(none.values.front(), 0);
  EXPECT_EQ(none.values.back(), 1);
}

TEST(ReportSvg, TickLabelsHaveTheDecimalsTheStepNeeds) {
  EXPECT_EQ(tick_label(0.25, 0.05), "0.25");
  EXPECT_EQ(tick_label(2, 0.5), "2.0");
  EXPECT_EQ(tick_label(1200, 200), "1200");
  EXPECT_EQ(tick_label(15000, 5000), "15k");
  EXPECT_EQ(tick_label(0, 5000), "0");
  EXPECT_EQ(tick_label(12500, 2500), "12.5k");
  EXPECT_EQ(tick_label(1.5e6, 5e5), "1.5M");
  EXPECT_EQ(tick_label(0.0015, 0.0005), "0.0015");
  EXPECT_EQ(tick_label(3e-5, 1e-5), "3e-05");
  EXPECT_EQ(tick_label(-1e-17, 0.2), "0.0");  // rounding noise of 0, never "-0.0"
}

TEST(ReportSvg, DownsamplingBoundsThePointsAndKeepsSpikesAndDips) {
  std::vector<Point> points;
  for (int i = 1; i <= 150000; ++i) points.push_back({double(i), 2 + std::sin(i * 0.01)});
  points[54320].y = 1000;   // one step's spike
  points[77776].y = -1000;  // and one step's dip
  const std::vector<Point> out = downsample_min_max(points, 2000);
  EXPECT_LE(out.size(), 2000u);
  EXPECT_GT(out.size(), 1000u);
  EXPECT_TRUE(std::is_sorted(out.begin(), out.end(),
                             [](const Point& a, const Point& b) { return a.x < b.x; }));
  const auto has = [&](double x, double y) {
    return std::any_of(out.begin(), out.end(),
                       [&](const Point& p) { return p.x == x && p.y == y; });
  };
  EXPECT_TRUE(has(54321, 1000));
  EXPECT_TRUE(has(77777, -1000));
  for (const Point& p : out) {  // every point drawn is a real one
    ASSERT_EQ(points[static_cast<size_t>(p.x) - 1].y, p.y) << p.x;
  }
}

TEST(ReportSvg, ShortSeriesAreKeptWholeWithoutTheirMissingValues) {
  const std::vector<Point> in = {{1, 3}, {2, NAN}, {3, 2}, {4, INFINITY}, {5, 1}};
  const std::vector<Point> out = downsample_min_max(in, 2000);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1].x, 3);
}

TEST(ReportSvg, BinMeansKeepTheMeanOfEachLayer) {
  std::vector<double> x, a, b;
  for (int i = 0; i < 10000; ++i) {
    x.push_back(i);
    a.push_back(i % 2 == 0 ? 10 : 20);  // mean 15 in every bin of even length
    b.push_back(1);
  }
  const Columns c = bin_means(x, {a, b}, 500);
  ASSERT_EQ(c.x.size(), 500u);
  for (size_t i = 0; i < c.x.size(); ++i) {
    EXPECT_DOUBLE_EQ(c.ys[0][i], 15) << i;
    EXPECT_DOUBLE_EQ(c.ys[1][i], 1) << i;
  }
  EXPECT_EQ(bin_means({1, 2, 3}, {{4, 5, 6}}, 500).ys[0], (std::vector<double>{4, 5, 6}));
}

TEST(ReportSvg, HtmlEscapingCoversContentAndAttributes) {
  EXPECT_EQ(html_escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(html_escape("plain text 1.5"), "plain text 1.5");
}

PlotSpec two_runs_with_marks() {
  PlotSpec p;
  p.id = "loss";
  p.title = "Loss";
  p.x_label = "step";
  p.y_label = "loss";
  for (const std::string run : {"a", "b<script>"}) {
    Series s;
    s.name = "loss";
    s.run = run;
    s.label = run + " loss";
    s.color = "#123456";
    for (int i = 1; i <= 100000; ++i) s.points.push_back({double(i), 5.0 / i});
    p.series.push_back(s);
  }
  Series never_evaluated;  // all missing: neither drawn nor in the legend
  never_evaluated.name = "val_loss";
  never_evaluated.points = {{1, NAN}, {2, NAN}};
  p.series.push_back(never_evaluated);
  p.marks = {{10, "checkpoint_saved", "a", "saved <here>"},
             {20, "checkpoint_saved", "a", "again"},
             {15, "restart", "b<script>", "why"}};
  return p;
}

TEST(ReportSvg, APlotHasItsSeriesMarksAndLegendWithEverythingEscaped) {
  const std::string svg = render_plot(two_runs_with_marks());
  EXPECT_EQ(svg.rfind("<svg class=\"plot\" id=\"plot-loss\"", 0), 0u) << svg.substr(0, 80);
  EXPECT_EQ(count(svg, "<path class=\"series series-loss\""), 2u);
  EXPECT_EQ(count(svg, "series-val_loss"), 0u);
  EXPECT_EQ(count(svg, "data-run=\"b&lt;script&gt;\""), 2u);  // its series and its mark
  EXPECT_EQ(count(svg, "<script"), 0u);
  EXPECT_EQ(count(svg, "<line class=\"mark mark-checkpoint_saved\""), 2u);
  EXPECT_EQ(count(svg, "<line class=\"mark mark-restart\""), 1u);
  EXPECT_NE(svg.find("<title>saved &lt;here&gt;</title>"), std::string::npos);
  // Legend: two series, two kinds of event with their counts.
  EXPECT_EQ(count(svg, "class=\"legend-entry\""), 4u);
  EXPECT_NE(svg.find(">checkpoint_saved (2)</text>"), std::string::npos);
  // A thinned kind counts its events beside the marks drawn (3000 saves read "(300)" before).
  PlotSpec thinned = two_runs_with_marks();
  thinned.marks = {{10, "checkpoint_saved", "a", "", 10}, {20, "checkpoint_saved", "a", "", 7}};
  EXPECT_NE(render_plot(thinned).find(">checkpoint_saved (17, 2 drawn)</text>"), std::string::npos);
  // 100k points each, drawn from at most 2000.
  // The loss series' path data, found by hand: libstdc++'s std::regex recurses once per
  // character of a [^"]* match, and a 2000-point path overflows the stack under ASan.
  const size_t series = svg.find("series-loss\"");
  ASSERT_NE(series, std::string::npos);
  const size_t start = svg.find(" d=\"", series);
  ASSERT_NE(start, std::string::npos);
  ASSERT_LT(start, svg.find('>', series)) << "d= is not an attribute of the series' element";
  const size_t end = svg.find('"', start + 4);
  ASSERT_NE(end, std::string::npos);
  const std::string d = svg.substr(start + 4, end - start - 4);
  EXPECT_LE(count(d, "L") + count(d, "M"), 2000u);
  EXPECT_GT(count(d, "L"), 500u);
  EXPECT_EQ(svg.find("no data"), std::string::npos);
}

// A run of one logged step: its line is a lone moveto, which draws nothing; it gets a dot.
TEST(ReportSvg, ALineOfOnePointIsDrawnAsADot) {
  PlotSpec spec;
  spec.id = "loss";
  spec.series.push_back(Series{"loss", "a", "a loss", "#123456", Series::Style::kLine, {{1, 3.5}}});
  const std::string svg = render_plot(spec);
  EXPECT_EQ(count(svg, "<path class=\"dots\" data-run=\"a\""), 1u) << svg;
  EXPECT_EQ(count(svg, "h0\""), 1u) << svg;
  EXPECT_EQ(svg.find("no data"), std::string::npos);
  spec.series[0].points.push_back({2, 3.4});  // two points: a line, no dots
  EXPECT_EQ(count(render_plot(spec), "class=\"dots\""), 0u);
}

TEST(ReportSvg, StackedLayersAreFilledAreasAndAnEmptyPlotSaysSo) {
  PlotSpec p;
  p.id = "breakdown-1";
  p.stacked = true;
  for (const char* name : {"compute", "data"}) {
    Series s;
    s.name = name;
    s.run = "a";
    s.label = name;
    for (int i = 1; i <= 10; ++i) s.points.push_back({double(i), 5});
    p.series.push_back(s);
  }
  const std::string svg = render_plot(p);
  EXPECT_EQ(count(svg, "<path class=\"series series-compute area\""), 1u);
  EXPECT_EQ(count(svg, "<path class=\"series series-data area\""), 1u);
  EXPECT_EQ(svg.find("no data"), std::string::npos);
  // The top of the stack is 10: the y axis reaches it.
  EXPECT_NE(svg.find(">10</text>"), std::string::npos);

  PlotSpec none;
  none.id = "empty";
  EXPECT_NE(render_plot(none).find(">no data</text>"), std::string::npos);
}

}  // namespace
}  // namespace rm::report
