// `ringmaster report RUN_DIR [RUN_DIR ...] [-o FILE]`: one self-contained HTML page about one or
// more runs -- facts side by side, the resolved jobs, inline SVG plots of loss, learning rate,
// speed, step-time breakdown and rank spread with every event marked on them, and the events
// table. No scripts, fonts, styles or images from anywhere else: it opens offline, and in an
// e-mail or a CI artifact viewer.
//
// Every run directory is read before anything is written: a bad one is one message and exit 2,
// and no file. The page is written atomically (io/atomic_file.h), so a crash leaves the old
// report or the new one. Default output: RUN_DIR/report.html of the first run.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/error_report.h"
#include "base/exit_codes.h"
#include "io/atomic_file.h"
#include "launcher/cli_checks.h"
#include "launcher/commands.h"
#include "launcher/report_data.h"
#include "launcher/report_page.h"
#include "launcher/report_svg.h"

namespace rm {
namespace {

using report::html_escape;
using report::Mark;
using report::PlotSpec;
using report::RunData;
using report::Series;

// One colour per run (the first eight; then they repeat).
const char* const kRunColors[] = {"#1f77b4", "#d95f02", "#2ca02c", "#9467bd",
                                  "#8c564b", "#e377c2", "#17becf", "#7f7f7f"};
// The events drawn as marks; the others (started, finished, ...) are in the table only.
const std::set<std::string> kMarked = {
    "checkpoint_saved", "restart",       "resumed", "nan_skipped", "nan_rollback",
    "stop_signal",      "spike_skipped", "requeue", "signal",      "failed"};
// More marks than this of one kind in one run are thinned to every k-th: a line every 100 steps
// of a 1M-step run would only paint the plot solid.
constexpr size_t kMaxMarksPerKind = 300;

// Labels unique among the runs: two runs of one job file share a name.
void make_labels_unique(std::vector<RunData>& runs) {
  std::map<std::string, int> seen;
  for (const RunData& r : runs) ++seen[r.label];
  for (RunData& r : runs) {
    if (seen[r.label] > 1) r.label += " (" + r.dir + ")";
  }
  std::map<std::string, int> again;
  for (RunData& r : runs) {
    if (again[r.label]++ > 0) r.label += " #" + std::to_string(again[r.label]);
  }
}

std::vector<Mark> marks_of(const std::vector<RunData>& runs) {
  std::vector<Mark> marks;
  for (const RunData& run : runs) {
    std::map<std::string, size_t> count, seen;
    for (const auto& e : run.events) {
      if (kMarked.count(e.kind) && e.plot_step >= 0) ++count[e.kind];
    }
    for (const auto& e : run.events) {
      if (!kMarked.count(e.kind) || e.plot_step < 0) continue;
      const size_t stride = (count[e.kind] + kMaxMarksPerKind - 1) / kMaxMarksPerKind;
      const size_t index = seen[e.kind]++;
      if (index % stride != 0) continue;
      std::string tip = run.label + ": " + e.kind + " at step " + std::to_string(e.plot_step);
      if (e.placed_by_time) tip += " (no step recorded: placed at the next step by time)";
      tip += "\n" + e.time + (e.details.empty() ? "" : "\n" + e.details);
      if (stride > 1) tip += "\n(1 in every " + std::to_string(stride) + " shown)";
      marks.push_back({static_cast<double>(e.plot_step), e.kind, run.label, tip,
                       std::min(stride, count[e.kind] - index)});
    }
  }
  return marks;
}

// One series per run of a metrics field; runs.size() > 1 puts the run's name in the legend.
template <typename Field>
Series series_of(const RunData& run, bool several, const std::string& name, const std::string& what,
                 Series::Style style, Field field) {
  Series s;
  s.name = name;
  s.run = run.label;
  s.label = several ? run.label + " " + what : what;
  s.color = run.color;
  s.style = style;
  for (const auto& r : run.rows) s.points.push_back({static_cast<double>(r.step), field(r)});
  // Now rather than at rendering: a million-step run's full series never pile up in the plots.
  s.points = report::downsample_min_max(s.points, report::kMaxPointsPerSeries);
  return s;
}

PlotSpec curve_plot(const std::string& id, const std::string& title, const std::string& y_label,
                    const std::vector<Mark>& marks, bool from_zero) {
  PlotSpec p;
  p.id = id;
  p.title = title;
  p.x_label = "step";
  p.y_label = y_label;
  p.marks = marks;
  p.y_from_zero = from_zero;
  return p;
}

std::vector<std::string> render_plots(const std::vector<RunData>& runs) {
  const std::vector<Mark> marks = marks_of(runs);
  const bool several = runs.size() > 1;
  using Row = report::StepRow;
  PlotSpec loss = curve_plot("loss", "Loss", "loss (nats per token)", marks, false);
  PlotSpec lr = curve_plot("lr", "Learning rate", "learning rate", marks, true);
  PlotSpec speed = curve_plot("tokens", "Speed", "tokens/s (all ranks)", marks, true);
  PlotSpec spread = curve_plot("rank-spread", "Rank spread: busy time before waiting on others",
                               "ms per step", marks, true);
  PlotSpec choices = curve_plot("choices", "Multiple-choice accuracy (data.choices)",
                                "share picked right", marks, true);
  bool any_busy = false, any_choices = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = runs[i];
    loss.series.push_back(series_of(r, several, "loss", "loss", Series::Style::kLine,
                                    [](const Row& x) { return x.loss; }));
    loss.series.push_back(series_of(r, several, "val_loss", "val_loss", Series::Style::kDots,
                                    [](const Row& x) { return x.val_loss; }));
    lr.series.push_back(
        series_of(r, several, "lr", "lr", Series::Style::kLine, [](const Row& x) { return x.lr; }));
    speed.series.push_back(series_of(r, several, "tokens_per_s", "tokens/s", Series::Style::kLine,
                                     [](const Row& x) { return x.tokens_per_s; }));
    if (r.has_choices) {
      any_choices = true;
      choices.series.push_back(series_of(r, several, "choice_accuracy", "choice_accuracy",
                                         Series::Style::kDots,
                                         [](const Row& x) { return x.choice_accuracy; }));
    }
    if (!r.has_busy) continue;
    any_busy = true;
    spread.series.push_back(series_of(r, several, "busy_ms_max", "slowest rank",
                                      Series::Style::kLine,
                                      [](const Row& x) { return x.busy_ms_max; }));
    spread.series.push_back(series_of(r, several, "busy_ms_min", "fastest rank",
                                      Series::Style::kDashed,
                                      [](const Row& x) { return x.busy_ms_min; }));
  }
  std::vector<std::string> svgs = {render_plot(loss), render_plot(lr), render_plot(speed)};
  // The breakdown stacks four areas: overlaying several runs' stacks would hide all but the
  // top one, so each run gets its own plot (same axes, same marks).
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = runs[i];
    PlotSpec b =
        curve_plot("breakdown-" + std::to_string(i + 1),
                   several ? "Step time: " + r.label : "Step time", "ms per step", marks, true);
    b.stacked = true;
    const auto layer = [&](const std::string& name, std::string label, const char* color,
                           bool recorded, double report::StepTimeParts::*part) {
      Series s;
      s.name = name;
      s.run = r.label;
      s.label = recorded ? label : label + " (not in metrics.jsonl)";
      s.color = color;
      for (const Row& row : r.rows) {
        s.points.push_back({static_cast<double>(row.step), report::step_time_parts(row).*part});
      }
      b.series.push_back(std::move(s));
    };
    layer("compute", "compute", "#4c78a8", true, &report::StepTimeParts::compute);
    layer("comm_wait", "communication wait", "#f58518", r.has_comm_wait,
          &report::StepTimeParts::comm_wait);
    layer("data", "data", "#54a24b", r.has_data, &report::StepTimeParts::data);
    layer("ckpt_stall", "checkpoint stall", "#e45756", true, &report::StepTimeParts::ckpt_stall);
    svgs.push_back(render_plot(b));
  }
  if (any_busy) svgs.push_back(render_plot(spread));
  if (any_choices) svgs.push_back(render_plot(choices));
  return svgs;
}

}  // namespace

int cmd_report(const ReportArgs& args) {
  return report_errors([&] {
    std::vector<RunData> runs;
    for (const std::string& dir : args.run_dirs) {
      if (!args.output.empty()) cli::refuse_overwriting_input("-o", args.output, dir);
      runs.push_back(report::read_run(dir));
    }
    make_labels_unique(runs);
    for (size_t i = 0; i < runs.size(); ++i) runs[i].color = kRunColors[i % std::size(kRunColors)];
    const std::string html = report::report_page(runs, render_plots(runs));
    const std::string out = args.output.empty() ? args.run_dirs[0] + "/report.html" : args.output;
    write_file_atomic(out, html.data(), html.size());
    std::printf("ringmaster: wrote %s (%zu run%s, %zu KiB)\n", out.c_str(), runs.size(),
                runs.size() == 1 ? "" : "s", (html.size() + 1023) / 1024);
    return kExitOk;
  });
}

}  // namespace rm
