#include "launcher/report_page.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "launcher/report_svg.h"

namespace rm::report {

namespace {

using nlohmann::json;

// Events table rows per run: the first and the last half of this many, and a row saying how
// many are left out between them (a run that checkpoints every 10 steps for a month).
constexpr size_t kMaxEventRows = 1000;

const char kStyle[] = R"(
body{font-family:"DejaVu Sans",Arial,sans-serif;margin:14px 16px;color:#222;max-width:1240px}
h1{font-size:20px;margin:0 0 10px}h2{font-size:16px;margin:22px 0 8px}
table{border-collapse:collapse;font-size:12px}
td,th{border:1px solid #ccc;padding:2px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}
.swatch{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:-1px}
.configs{display:flex;gap:12px;flex-wrap:wrap;margin-top:12px}
.configs figure{margin:0;flex:1 1 380px;min-width:0}
figcaption{font-size:13px;font-weight:bold;margin-bottom:4px}
pre.config{background:#f7f7f7;border:1px solid #ddd;padding:6px 8px;font-size:12px;
max-height:12em;overflow:auto;margin:0}
.plots{display:flex;flex-wrap:wrap;gap:14px 22px}
svg.plot{font-family:"DejaVu Sans",Arial,sans-serif;font-size:11px;background:#fff}
svg .plot-title{font-size:13px;font-weight:bold}
svg .grid{stroke:#e6e6e6}svg .frame{fill:none;stroke:#999}svg .tick-line{stroke:#999}
svg .tick{fill:#444}svg .axis-label{fill:#222}svg .no-data{fill:#999;font-size:14px}
svg .mark{stroke-width:1.3;stroke-dasharray:4 3;opacity:.85}svg .mark:hover{stroke-width:3}
svg path.area{opacity:.9}
table.events td{white-space:nowrap}
table.events td.details{white-space:normal;font-family:"DejaVu Sans Mono",monospace;font-size:11px;
word-break:break-all;max-width:640px}
.note{color:#666;font-size:12px}
)";

// A field of a `started` event as text ("" when absent).
std::string field(const json& j, const char* key) {
  if (!j.is_object()) return "";
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::string versions(const json& start) {
  if (!start.is_object() || !start.contains("versions") || !start["versions"].is_object()) {
    return "";
  }
  const json& v = start["versions"];
  std::string s = "ringmaster " + field(v, "ringmaster");
  if (!field(v, "compiler").empty()) s += ", compiler " + field(v, "compiler");
  if (!field(v, "mpi").empty()) s += ", MPI " + field(v, "mpi");
  return s;
}

// "last", or "first → last" when the run changed between its starts (resumed elsewhere).
std::string first_last(const RunFacts& f, const std::function<std::string(const json&)>& get) {
  const std::string first = get(f.first_start), last = get(f.last_start);
  if (first == last) return html_escape(last);
  return html_escape(first) + " &rarr; " + html_escape(last);
}

struct ValLoss {
  double final = NAN, best = NAN;
  int64_t final_step = -1, best_step = -1;  // -1: no evaluation
};

// The final evaluation is the last one, even where its value was not finite (said so, not
// passed over for an older one); the best is the lowest finite one.
ValLoss val_loss_of(const RunData& run) {
  ValLoss v;
  for (const StepRow& r : run.rows) {
    if (!r.evaluated) continue;
    v.final = r.val_loss, v.final_step = r.step;
    if (std::isfinite(r.val_loss) && !(r.val_loss >= v.best)) {
      v.best = r.val_loss, v.best_step = r.step;
    }
  }
  return v;
}

// "2.1234 (step 8)", "not finite (step 8)", or "" for no step (-1). Four decimals as a run logs
// them, but a few digits for a damaged 1e308, not 309.
std::string loss_at(double loss, int64_t step) {
  if (step < 0) return "";
  const std::string at = " (step " + std::to_string(step) + ")";
  if (!std::isfinite(loss)) return "not finite" + at;
  return fmt(std::fabs(loss) < 1e6 ? "%.4f" : "%.4g", loss) + at;
}

double median_of(const RunData& run, float StepRow::*field) {
  std::vector<float> v;
  for (const StepRow& r : run.rows) {
    if (std::isfinite(r.*field)) v.push_back(r.*field);
  }
  if (v.empty()) return NAN;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

std::string facts_table(const std::vector<RunData>& runs) {
  std::string t = "<table class=\"facts\"><tr><th></th>";
  for (size_t i = 0; i < runs.size(); ++i) {
    t += "<th data-run=\"" + html_escape(runs[i].label) +
         "\"><span class=\"swatch\" style=\"background:" + html_escape(runs[i].color) +
         "\"></span>" + html_escape(runs[i].label) + "</th>";
  }
  t += "</tr>";
  const auto row = [&](const char* name, const std::function<std::string(const RunData&)>& cell) {
    t += "<tr><th>" + std::string(name) + "</th>";
    for (const RunData& r : runs) t += "<td>" + cell(r) + "</td>";
    t += "</tr>";
  };
  row("directory", [](const RunData& r) { return html_escape(r.dir); });
  row("steps", [](const RunData& r) {
    const std::string total =
        r.facts.total_steps ? std::to_string(*r.facts.total_steps) : std::string("?");
    // Finished: its last start ended so (a finished run extended, and stopped, is not).
    bool finished = false;
    for (const RunEvent& e : r.events) {
      if (e.kind == "finished" || e.kind == "started") finished = e.kind == "finished";
    }
    return std::to_string(r.last_step()) + " / " + total + (finished ? ", finished" : "");
  });
  row("loss (last step)", [](const RunData& r) {
    return r.rows.empty() ? std::string() : loss_at(r.rows.back().loss, r.rows.back().step);
  });
  row("final val_loss", [](const RunData& r) {
    const ValLoss v = val_loss_of(r);
    return loss_at(v.final, v.final_step);
  });
  row("best val_loss", [](const RunData& r) {
    const ValLoss v = val_loss_of(r);
    return loss_at(v.best, v.best_step);
  });
  row("tokens/s (median)", [](const RunData& r) {
    const double m = median_of(r, &StepRow::tokens_per_s);
    return std::isfinite(m) ? fmt("%.0f", m) : std::string();
  });
  row("hosts", [](const RunData& r) {
    return first_last(r.facts, [](const json& s) { return field(s, "hosts"); });
  });
  row("ranks", [](const RunData& r) {
    return first_last(r.facts, [](const json& s) {
      const std::string ranks = field(s, "ranks"), threads = field(s, "threads_per_rank");
      if (ranks.empty()) return ranks;
      return ranks + (ranks == "1" ? " rank" : " ranks") +
             (threads.empty() ? "" : " x " + threads + (threads == "1" ? " thread" : " threads"));
    });
  });
  row("backend", [](const RunData& r) {
    return first_last(r.facts, [](const json& s) {
      if (field(s, "backend").empty()) return std::string();
      return field(s, "backend") + ", shard " + field(s, "shard") + ", " + field(s, "precision");
    });
  });
  row("versions", [](const RunData& r) { return first_last(r.facts, versions); });
  row("starts / restarts", [](const RunData& r) {
    return std::to_string(r.facts.starts) + " / " + std::to_string(r.facts.restarts);
  });
  if (std::any_of(runs.begin(), runs.end(), [](const RunData& r) { return r.has_rss; })) {
    row("peak memory (largest rank)", [](const RunData& r) {
      float peak = NAN;
      for (const StepRow& s : r.rows) {
        if (std::isfinite(s.peak_rss_mib) && !(s.peak_rss_mib <= peak)) peak = s.peak_rss_mib;
      }
      return std::isfinite(peak) ? fmt("%.1f MiB", peak) : std::string();
    });
  }
  return t + "</table>";
}

std::string configs(const std::vector<RunData>& runs) {
  std::string s = "<div class=\"configs\">";
  for (const RunData& r : runs) {
    s += "<figure><figcaption>" + html_escape(r.label) + ": config.yaml</figcaption>";
    if (!r.facts.config_problem.empty()) {
      s += "<p class=\"note\">" + html_escape(r.facts.config_problem) + "</p>";
    }
    s += "<pre class=\"config\" data-run=\"" + html_escape(r.label) + "\">" +
         html_escape(r.facts.config_text) + "</pre></figure>";
  }
  return s + "</div>";
}

std::string events_table(const std::vector<RunData>& runs) {
  const bool several = runs.size() > 1;
  std::string t = "<table class=\"events\"><tr>";
  if (several) t += "<th>run</th>";
  t += "<th>time (UTC)</th><th>event</th><th>step</th><th>details</th></tr>";
  for (const RunData& r : runs) {
    const size_t n = r.events.size(), half = kMaxEventRows / 2;
    for (size_t i = 0; i < n; ++i) {
      if (n > kMaxEventRows && i == half) {
        t += "<tr class=\"events-left-out\"><td colspan=\"5\">" + std::to_string(n - 2 * half) +
             " events of " + html_escape(r.label) + " left out here</td></tr>";
        i = n - half;
      }
      const RunEvent& e = r.events[i];
      std::string step = e.step ? std::to_string(*e.step) : "";
      if (e.placed_by_time && e.plot_step >= 0) {
        step = "(" + std::to_string(e.plot_step) + ", by time)";
      }
      t += "<tr class=\"event event-" + html_escape(e.kind) + "\" data-run=\"" +
           html_escape(r.label) + "\">";
      if (several) t += "<td>" + html_escape(r.label) + "</td>";
      t += "<td>" + html_escape(e.time) + "</td><td>" + html_escape(e.kind) + "</td><td>" + step +
           "</td><td class=\"details\">" + html_escape(e.details) + "</td></tr>";
    }
  }
  return t + "</table>";
}

}  // namespace

std::string report_page(const std::vector<RunData>& runs, const std::vector<std::string>& plots) {
  std::string title = "Ringmaster report: ";
  for (size_t i = 0; i < runs.size(); ++i) title += (i ? ", " : "") + runs[i].label;
  std::string page = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" +
                     html_escape(title) + "</title><style>" + kStyle + "</style></head><body>";
  page += "<h1>" + html_escape(title) + "</h1>" + facts_table(runs) + configs(runs);
  page +=
      "<h2>Plots</h2><p class=\"note\">x axis: optimizer step. Dashed vertical lines: "
      "events (hover for details). Long runs are drawn from at most 2000 points per "
      "series, each the lowest and highest of its bin of steps (step-time areas: the bin's "
      "means).</p><div class=\"plots\">";
  for (const std::string& svg : plots) page += svg;
  page += "</div><h2>Events</h2>" + events_table(runs);
  page += "</body></html>\n";
  return page;
}

}  // namespace rm::report
