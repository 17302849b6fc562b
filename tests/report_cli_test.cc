// `ringmaster report` through the real binary: two tiny runs trained for real (one killed and
// restarted from its checkpoint, one with a skipped NaN step) overlaid in one page with their
// events marked; a synthetic 120k-step run in the old metrics format (downsampled, spikes kept,
// hostile name escaped); refusals that write nothing; and the page as headless Chromium builds
// and draws it (the DOM it parsed, a screenshot).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "testing/temp_dir.h"
#include "tests/cli_runner.h"
#include "tests/required_parts.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::run_cli;
using test::slurp;

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The <svg> element with id plot-ID, or "".
std::string svg_of(const std::string& html, const std::string& id) {
  const size_t begin = html.find("<svg class=\"plot\" id=\"plot-" + id + "\"");
  if (begin == std::string::npos) return "";
  return html.substr(begin, html.find("</svg>", begin) + 6 - begin);
}

std::vector<json> lines_of(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

size_t events_of_kind(const std::vector<json>& events, const std::string& kind) {
  return std::count_if(events.begin(), events.end(),
                       [&](const json& e) { return e["event"] == kind; });
}

std::string job_file(const TempDir& dir, const std::string& name, const std::string& extra) {
  return dir.write(name + ".yaml", "name: " + name + "\nrun_dir: " + dir.file(name) + R"(
model: {type: gpt, seq_len: 32, layers: 1, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 40, global_batch: 8, micro_batch: 2, eval_every: 10, log_every: 10}
checkpoint: {every: 10, keep: 3, async: false}
parallel: {threads_per_rank: 1}
)" + extra);
}

// report-a: 2 ranks, rank 0 killed at step 25, restarted by the supervisor from step 20.
// report-b: 1 rank, step 14's loss NaN and its update skipped. Both run to step 40.
void train_two_runs(const TempDir& dir) {
  const auto a =
      run_cli("run " + job_file(dir, "report-a", "resilience: {max_restarts: 1}\n") + " --nproc 2",
              dir.path(), "RM_TEST_FAULT=kill:0:25");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto b = run_cli("run " + job_file(dir, "report-b", "resilience: {on_nan: skip}\n"),
                         dir.path(), "RM_TEST_FAULT=nan:0:14");
  ASSERT_EQ(b.exit_code, 0) << b.err;
}

// Nothing the page could fetch: no scripts, links, sources, imports or absolute URLs.
void expect_self_contained(const std::string& html) {
  for (const char* bad :
       {"<script", "<link", "<img", "<iframe", " src=", "href=", "http:", "https:", "@import"}) {
    EXPECT_EQ(count(html, bad), 0u) << bad;
  }
  EXPECT_EQ(count(html, "url("), count(html, "url(#"));  // only the plots' own clip paths
}

TEST(ReportCli, OverlaysTwoTrainedRunsWithTheirEventsMarked) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(train_two_runs(dir));
  const std::string a = dir.file("report-a"), b = dir.file("report-b");
  const auto r = run_cli("report " + a + " " + b, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string out = a + "/report.html";  // the default: in the first run directory
  EXPECT_NE(r.out.find(out), std::string::npos) << r.out;
  const std::string html = slurp(out);
  ASSERT_FALSE(html.empty());
  expect_self_contained(html);

  // Plots: loss, lr, speed, one step-time breakdown per run, and the rank spread when the
  // metrics have the busy times (written by workers from the version that added them).
  const bool busy = slurp(a + "/metrics.jsonl").find("\"busy_ms_max\"") != std::string::npos;
  for (const char* id : {"loss", "lr", "tokens", "breakdown-1", "breakdown-2"}) {
    EXPECT_FALSE(svg_of(html, id).empty()) << id;
  }
  EXPECT_EQ(svg_of(html, "rank-spread").empty(), !busy);
  EXPECT_EQ(count(html, "<svg class=\"plot\""), busy ? 6u : 5u);

  // Every curve plot overlays both runs.
  const std::string loss = svg_of(html, "loss");
  for (const char* run : {"report-a", "report-b"}) {
    const std::string attrs = "\" data-run=\"" + std::string(run) + "\"";
    EXPECT_EQ(count(loss, "<path class=\"series series-loss" + attrs), 1u) << run;
    EXPECT_EQ(count(loss, "<path class=\"series series-val_loss" + attrs), 1u) << run;
    EXPECT_EQ(count(svg_of(html, "lr"), "<path class=\"series series-lr" + attrs), 1u) << run;
    EXPECT_EQ(count(svg_of(html, "tokens"), "series-tokens_per_s" + attrs), 1u) << run;
  }
  EXPECT_EQ(count(svg_of(html, "breakdown-2"), "area\" data-run=\"report-b\""), 4u);

  // Marks: one per event of the marked kinds, where the event happened.
  const std::vector<json> ea = lines_of(a + "/events.jsonl"), eb = lines_of(b + "/events.jsonl");
  const size_t saved = events_of_kind(ea, "checkpoint_saved");
  EXPECT_GE(saved, 4u);
  EXPECT_EQ(count(loss, "<line class=\"mark mark-checkpoint_saved\" data-run=\"report-a\""), saved);
  EXPECT_EQ(count(loss, "<line class=\"mark mark-checkpoint_saved\" data-run=\"report-b\""),
            events_of_kind(eb, "checkpoint_saved"));
  ASSERT_EQ(events_of_kind(ea, "resumed"), 1u);
  ASSERT_EQ(events_of_kind(ea, "restart"), 1u);
  const auto resumed =
      std::find_if(ea.begin(), ea.end(), [](const json& e) { return e["event"] == "resumed"; });
  const std::string at = "data-step=\"" + std::to_string((*resumed)["step"].get<int>()) + "\"";
  EXPECT_EQ(count(loss, "mark-resumed\" data-run=\"report-a\" " + at), 1u);
  // A restart has no step: it is drawn where the run started again.
  EXPECT_EQ(count(loss, "mark-restart\" data-run=\"report-a\" " + at), 1u);
  EXPECT_EQ(count(loss, "mark-nan_skipped\" data-run=\"report-b\" data-step=\"14\""), 1u);
  const size_t all_saved = saved + events_of_kind(eb, "checkpoint_saved");
  EXPECT_NE(loss.find(">checkpoint_saved (" + std::to_string(all_saved) + ")</text>"),
            std::string::npos);  // the legend counts both runs' marks
  // The same marks on every plot.
  EXPECT_EQ(count(html, "<line class=\"mark mark-resumed\""), busy ? 6u : 5u);

  // Header: each run's facts, side by side.
  EXPECT_EQ(count(html, "<td>40 / 40, finished</td>"), 2u);
  double best = 1e9;
  for (const json& m : lines_of(b + "/metrics.jsonl")) {
    if (m.contains("val_loss")) best = std::min(best, m["val_loss"].get<double>());
  }
  char best_text[32];
  std::snprintf(best_text, sizeof best_text, "%.4f", best);
  EXPECT_NE(html.find(best_text), std::string::npos) << best_text;
  EXPECT_NE(html.find("<td>2 / 1</td>"), std::string::npos);  // report-a: started twice, 1 restart
  EXPECT_NE(html.find("<pre class=\"config\" data-run=\"report-a\">"), std::string::npos);
  EXPECT_NE(html.find("name: report-b"), std::string::npos);
  // The events table: every event of both runs.
  EXPECT_EQ(count(html, "<tr class=\"event event-"), ea.size() + eb.size());
}

// A run directory of 120k steps in the metrics format before comm_wait_ms & co., with one spike
// and one event without a step, and a name that is HTML.
void write_long_old_run(const TempDir& dir, const std::string& name) {
  fs::create_directories(dir.file(name));
  std::ofstream m(dir.file(name + "/metrics.jsonl"));
  for (int s = 1; s <= 120000; ++s) {
    const double loss = s == 70001 ? 97.0 : 3.0 + 1.0 / s;
    m << "{\"step\":" << s << ",\"loss\":" << loss << ",\"lr\":0.001,\"grad_norm\":1,"
      << "\"tokens_per_s\":" << 10000 + s % 7 << ",\"step_ms\":" << 50 + s % 3
      << (s % 5000 == 0 ? ",\"val_loss\":3.1" : "") << "}\n";
  }
  dir.write(name + "/config.yaml", "name: \"<script>alert(1)</script>\"\ntrain: {steps: 200000}\n");
  dir.write(name + "/events.jsonl",
            R"({"time":"2026-01-01T00:00:01.000Z","event":"started","from_step":0}
{"time":"2026-01-01T01:00:00.000Z","event":"requeue","reason":"stopped","exit_code":75}
{"time":"2026-01-01T01:00:30.000Z","event":"started","from_step":60000}
)");
}

TEST(ReportCli, LongRunsAreDownsampledKeepingSpikesAndOldFilesStillRead) {
  TempDir dir;
  write_long_old_run(dir, "long");
  const auto r = run_cli("report " + dir.file("long") + " -o " + dir.file("long.html"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = slurp(dir.file("long.html"));
  EXPECT_LT(html.size(), 1000000u);  // 120k steps: the page stays small
  const std::string loss = svg_of(html, "loss");
  const std::smatch d = [&] {
    std::smatch m;
    std::regex_search(loss, m, std::regex("series-loss\"[^>]* d=\"([^\"]*)\""));
    return m;
  }();
  ASSERT_FALSE(d.empty());
  const std::string path = d[1];
  EXPECT_LE(count(path, "L") + count(path, "M"), 2000u);
  EXPECT_GE(count(path, "L"), 1000u);
  // The one-step spike to 97 survived downsampling: the y axis reaches 100.
  EXPECT_NE(loss.find(">100</text>"), std::string::npos);
  EXPECT_TRUE(svg_of(html, "rank-spread").empty());  // no busy times in the old format
  EXPECT_NE(html.find("<td>120000 / 200000</td>"), std::string::npos);
  // The requeue, which has no step, is drawn where the run started again.
  EXPECT_EQ(count(loss,
                  "mark-requeue\" data-run=\"&lt;script&gt;alert(1)&lt;/script&gt;\" "
                  "data-step=\"60000\""),
            1u);
  expect_self_contained(html);
}

// An event's fields go into the page up to six times (the table and a tooltip per plot), escaped:
// a damaged or hostile events.jsonl of long lines (here 10 MB of '<', four bytes each once
// escaped) gives a page of a few MB that says how long each cut text was (before: 4.3 GB for
// 180 MB of events, "written" as if fine).
TEST(ReportCli, LongEventFieldsAreCutAndDamagedFiguresReadAsSuch) {
  TempDir dir;
  fs::create_directories(dir.file("run"));
  std::ofstream m(dir.file("run/metrics.jsonl"));
  for (int s = 1; s <= 10; ++s) {
    m << "{\"step\":" << s << ",\"loss\":" << (s == 10 ? 1e30 : 3.0 - s * 0.1)
      << (s == 5    ? ",\"val_loss\":2.5"
          : s == 10 ? ",\"val_loss\":null"
                    : "")
      << "}\n";
  }
  m.close();
  dir.write("run/config.yaml", "name: hostile\ntrain: {steps: 10}\n");
  std::string events = R"({"time":"2026-01-01T00:00:01.000Z","event":"started","from_step":0})"
                       "\n";
  const std::string note(200000, '<');
  for (int s = 1; s <= 50; ++s) {
    events += R"({"time":"2026-01-01T00:00:02.000Z","event":"checkpoint_saved","step":)" +
              std::to_string(1 + s % 10) + R"(,"note":")" + note + "\"}\n";
  }
  dir.write("run/events.jsonl", events);
  const auto r = run_cli("report " + dir.file("run") + " -o " + dir.file("run.html"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = slurp(dir.file("run.html"));
  EXPECT_LT(html.size(), 2000000u);
  EXPECT_NE(html.find("&lt;&lt;... (200011 bytes)"), std::string::npos);
  // Damaged figures read as such: a last evaluation that was not finite is the final one (not
  // step 5's, passed over to), and a huge loss takes a few digits.
  EXPECT_NE(html.find("<td>not finite (step 10)</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>2.5000 (step 5)</td>"), std::string::npos);  // the best
  EXPECT_NE(html.find("<td>1e+30 (step 10)</td>"), std::string::npos);
}

// The <text class="tick"> labels of one axis group of a plot, with their pixel position (x for the
// x axis, y for the y axis), in document order. Labels: numbers with an optional k or M.
std::vector<std::pair<double, double>> ticks_of(const std::string& svg, const std::string& axis) {
  const size_t begin = svg.find("<g class=\"axis axis-" + axis + "\">");
  const std::string g = svg.substr(begin, svg.find("</g>", begin) - begin);
  std::vector<std::pair<double, double>> out;
  const std::regex tick(std::string("<text class=\"tick\" x=\"([-0-9.]+)\" y=\"([-0-9.]+)\"[^>]*>") +
                        "([-0-9.]+)([kM]?)</text>");
  for (std::sregex_iterator it(g.begin(), g.end(), tick), end; it != end; ++it) {
    const double scale = (*it)[4] == "k" ? 1e3 : (*it)[4] == "M" ? 1e6 : 1;
    const double pixel = std::stod((*it)[axis == "x" ? 1 : 2]);
    out.emplace_back(std::stod((*it)[3]) * scale, pixel);
  }
  return out;
}

// The points of a path's d ("M x y L x y ..."), in order.
std::vector<std::pair<double, double>> points_of(const std::string& d) {
  std::vector<std::pair<double, double>> out;
  const std::regex point("[ML]([-0-9.]+) ([-0-9.]+)");
  for (std::sregex_iterator it(d.begin(), d.end(), point), end; it != end; ++it) {
    out.emplace_back(std::stod((*it)[1]), std::stod((*it)[2]));
  }
  return out;
}

// The plotted points are the data: a run of 30 steps whose loss goes up and down, drawn on
// axes whose ticks are evenly spaced in pixels per unit (a linear scale), with steps growing to
// the right and loss growing upwards; each point of the loss path sits where the ticks put its
// (step, loss), to the 0.1 px the page is written in. A flipped or shifted axis, a point out of
// order or a value from the wrong step fails.
TEST(ReportCli, ThePlottedPointsAreTheDataOnLinearAxes) {
  TempDir dir;
  fs::create_directories(dir.file("run"));
  std::vector<std::pair<int, double>> data;
  {
    std::ofstream m(dir.file("run/metrics.jsonl"));
    for (int s = 1; s <= 30; ++s) {
      const double loss = 3.0 + ((s * 7) % 11) / 10.0 - s / 30.0;  // a zigzag, 2.0 to 4.0
      data.emplace_back(s, loss);
      m << "{\"step\":" << s << ",\"loss\":" << loss << ",\"lr\":0.001,\"grad_norm\":1,"
        << "\"tokens_per_s\":1000,\"step_ms\":50}\n";
    }
  }
  dir.write("run/events.jsonl", R"({"time":"2026-01-01T00:00:01.000Z","event":"started","from_step":0}
)");
  const auto r = run_cli("report " + dir.file("run") + " -o " + dir.file("r.html"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string loss = svg_of(slurp(dir.file("r.html")), "loss");
  ASSERT_FALSE(loss.empty());

  // Each axis: at least 3 ticks, values increasing, pixels per unit the same between every pair
  // of neighbours; x grows to the right, y upwards (smaller pixel y).
  const auto xt = ticks_of(loss, "x"), yt = ticks_of(loss, "y");
  ASSERT_GE(xt.size(), 3u) << loss;
  ASSERT_GE(yt.size(), 3u) << loss;
  const auto per_unit = [](const std::vector<std::pair<double, double>>& t, size_t i) {
    return (t[i + 1].second - t[i].second) / (t[i + 1].first - t[i].first);
  };
  for (size_t i = 0; i + 1 < xt.size(); ++i) {
    EXPECT_GT(xt[i + 1].first, xt[i].first);
    EXPECT_GT(per_unit(xt, i), 0) << "steps grow to the right";
    EXPECT_NEAR(per_unit(xt, i), per_unit(xt, 0), 0.2 / (xt[i + 1].first - xt[i].first));
  }
  for (size_t i = 0; i + 1 < yt.size(); ++i) {
    EXPECT_GT(yt[i + 1].first, yt[i].first);
    EXPECT_LT(per_unit(yt, i), 0) << "loss grows upwards";
    EXPECT_NEAR(per_unit(yt, i), per_unit(yt, 0), 0.2 / (yt[i + 1].first - yt[i].first));
  }
  // The axes cover the data.
  EXPECT_LE(xt.front().first, 1);
  EXPECT_GE(xt.back().first, 30);
  EXPECT_LE(yt.front().first, 2.0);
  EXPECT_GE(yt.back().first, 4.0);

  std::smatch d;
  ASSERT_TRUE(std::regex_search(loss, d, std::regex("series-loss\"[^>]* d=\"([^\"]*)\""))) << loss;
  const auto pts = points_of(d[1]);
  ASSERT_EQ(pts.size(), data.size()) << "30 steps, 30 points (no downsampling at this size)";
  const auto at = [](const std::vector<std::pair<double, double>>& t, double v) {
    return t.front().second + (v - t.front().first) * (t.back().second - t.front().second) /
                                  (t.back().first - t.front().first);
  };
  for (size_t i = 0; i < data.size(); ++i) {
    EXPECT_NEAR(pts[i].first, at(xt, data[i].first), 0.15) << "step " << data[i].first;
    EXPECT_NEAR(pts[i].second, at(yt, data[i].second), 0.15)
        << "step " << data[i].first << ", loss " << data[i].second;
  }
}

TEST(ReportCli, RefusesWhatIsNotARunDirectoryAndWritesNothing) {
  TempDir dir;
  write_long_old_run(dir, "good");
  fs::create_directories(dir.file("empty"));
  const std::string file = dir.write("plain-file", "x");
  const std::string report = dir.file("good/report.html");
  struct Case {
    std::string arg, why;
  };
  for (const Case& c :
       {Case{dir.file("missing"), "no such directory"}, Case{dir.file("empty"), "no metrics.jsonl"},
        Case{file, "not a directory"}}) {
    // The good run first: its default output must not appear either.
    const auto r = run_cli("report " + dir.file("good") + " " + c.arg, dir.path());
    EXPECT_EQ(r.exit_code, 2) << c.arg;
    EXPECT_EQ(r.err, "ringmaster: " + c.arg + ": not a run directory (" + c.why + ")\n");
    EXPECT_FALSE(fs::exists(report)) << c.arg;
    EXPECT_FALSE(fs::exists(dir.file("empty/report.html")));
  }
  // An output that cannot be written: exit 2 naming it, no file, no temporary left behind.
  const auto r =
      run_cli("report " + dir.file("good") + " -o " + dir.file("no/such/dir/r.html"), dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(dir.file("no/such/dir/r.html")), std::string::npos) << r.err;
  const auto ok = run_cli("report " + dir.file("good"), dir.path());
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(fs::exists(report));
  for (const auto& f : fs::directory_iterator(dir.file("good"))) {
    EXPECT_EQ(f.path().filename().string().find(".tmp"), std::string::npos) << f.path();
  }
}

// A finished run extended (a larger train.steps) and stopped is not "finished": its last start
// did not end so (before: any 'finished' event in its history made it so). An events.jsonl that
// is no file is named, exit 2, as `status` names it (before: a report without events, exit 0).
TEST(ReportCli, ARunIsFinishedOnlyWhenItsLastStartEndedSoAndBadEventsAreNamed) {
  TempDir dir;
  fs::create_directories(dir.file("run"));
  std::ofstream m(dir.file("run/metrics.jsonl"));
  for (int s = 1; s <= 40; ++s) m << "{\"step\":" << s << ",\"loss\":" << 3.0 + 1.0 / s << "}\n";
  m.close();
  dir.write("run/config.yaml", "name: extended\ntrain: {steps: 100}\n");
  const std::string finished =
      R"({"time":"2026-01-01T00:00:01.000Z","event":"started","from_step":0}
{"time":"2026-01-01T00:10:00.000Z","event":"finished","step":30}
)";
  const auto steps_row = [&] {
    const auto r = run_cli("report " + dir.file("run") + " -o " + dir.file("r.html"), dir.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const std::string html = slurp(dir.file("r.html"));
    const size_t at = html.find("<tr><th>steps</th>");
    return at == std::string::npos ? std::string() : html.substr(at, html.find("</tr>", at) - at);
  };
  dir.write("run/events.jsonl", finished);
  EXPECT_NE(steps_row().find("40 / 100, finished"), std::string::npos) << steps_row();
  dir.write("run/events.jsonl",
            finished + R"({"time":"2026-01-01T00:20:00.000Z","event":"started","from_step":30}
{"time":"2026-01-01T00:21:00.000Z","event":"stopped","step":40,"signal":"SIGTERM"}
)");
  EXPECT_NE(steps_row().find("40 / 100<"), std::string::npos) << steps_row();
  fs::remove(dir.file("run/events.jsonl"));
  fs::create_directories(dir.file("run/events.jsonl"));
  const auto bad = run_cli("report " + dir.file("run"), dir.path());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find(dir.file("run/events.jsonl") + ": a directory, not a regular file"),
            std::string::npos)
      << bad.err;
  EXPECT_FALSE(fs::exists(dir.file("run/report.html")));
}

// Runs `command` through the shell; returns its exit code.
int shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(ReportCli, ChromiumBuildsAndDrawsEveryPlot) {
  if (shell("command -v chromium >/dev/null 2>&1") != 0) {
    RM_SKIP_UNLESS_REQUIRED("chromium",
                            "chromium is not on PATH (scripts/install-deps.sh installs it)");
  }
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(train_two_runs(dir));
  const std::string page = dir.file("report.html");
  const auto r = run_cli(
      "report " + dir.file("report-a") + " " + dir.file("report-b") + " -o " + page, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = slurp(page);
  // Its own profile, no sandbox (root in CI), no GPU; bounded in time.
  const std::string chromium =
      "timeout 60 chromium --headless --no-sandbox --disable-gpu "
      "--hide-scrollbars --user-data-dir=" +
      dir.file("profile") + " ";
  const std::string png = dir.file("shot.png"), dom = dir.file("dom.html");
  ASSERT_EQ(shell(chromium + "--screenshot=" + png + " --window-size=1280,2400 file://" + page +
                  " >" + dir.file("shot.log") + " 2>&1"),
            0)
      << slurp(dir.file("shot.log"));
  const std::string image = slurp(png);
  ASSERT_GT(image.size(), 24u);
  EXPECT_EQ(image.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(image.substr(12, 4), "IHDR");
  const auto be32 = [&](size_t at) {
    return (uint32_t(uint8_t(image[at])) << 24) | (uint32_t(uint8_t(image[at + 1])) << 16) |
           (uint32_t(uint8_t(image[at + 2])) << 8) | uint32_t(uint8_t(image[at + 3]));
  };
  EXPECT_EQ(be32(16), 1280u);
  EXPECT_EQ(be32(20), 2400u);
  // A blank 1280 x 2400 page compresses to a few KB; plots, tables and text do not.
  EXPECT_GT(image.size(), 100000u);

  ASSERT_EQ(
      shell(chromium + "--dump-dom file://" + page + " >" + dom + " 2>" + dir.file("dom.log")), 0)
      << slurp(dir.file("dom.log"));
  const std::string built = slurp(dom);
  // What the browser parsed: every plot, series and mark of the file, as elements of the body.
  const size_t plots = count(html, "<svg class=\"plot\""),
               series = count(html, "<path class=\"series "),
               marks = count(html, "<line class=\"mark mark-");
  EXPECT_GE(plots, 5u);
  EXPECT_GE(series, 14u);  // loss, val_loss, lr, tokens/s per run, 4 breakdown layers per run
  EXPECT_GE(marks, 5 * 10u);
  EXPECT_EQ(count(built, "<svg class=\"plot\""), plots);
  EXPECT_EQ(count(built, "<path class=\"series "), series);
  EXPECT_EQ(count(built, "<line class=\"mark mark-"), marks);
  EXPECT_EQ(count(built, "</svg>"), plots);
  EXPECT_EQ(count(built, "<tr class=\"event event-"), count(html, "<tr class=\"event event-"));
  EXPECT_LT(built.find("<body>"), built.find("<svg class=\"plot\""));
}

}  // namespace
}  // namespace rm
