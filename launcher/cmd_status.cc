// `ringmaster status RUN_DIR`: where a run stands, from its files alone (config.yaml,
// metrics.jsonl, checkpoints/, events.jsonl, slurm/job_id) plus, when the run was submitted to
// Slurm and scontrol answers within a few seconds, the job's state.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error_report.h"
#include "base/exit_codes.h"
#include "base/run_lock.h"
#include "checkpoint/checkpoint_reader.h"
#include "configs/job_loader.h"
#include "io/atomic_file.h"
#include "io/posix_io.h"
#include "launcher/cmd_common.h"
#include "launcher/commands.h"
#include "launcher/slurm_job.h"
#include "launcher/slurm_script.h"
#include "observe/console_progress.h"
#include "observe/run_events.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool has_number(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number();
}

double number(const json& j, const char* key, double fallback = 0) {
  return has_number(j, key) ? j[key].get<double>() : fallback;
}

// A line's step, when it can be one: a whole number from 0 to INT64_MAX (a damaged or edited
// line's 18446744073709551615 read as step -1 before).
bool has_step(const json& m) {
  if (!m.contains("step")) return false;
  const json& s = m["step"];
  if (s.is_number_unsigned()) return s.get<uint64_t>() <= uint64_t{INT64_MAX};
  return s.is_number_integer() && s.get<int64_t>() >= 0;
}

// A loss or a score: four decimals, as a run logs them, but never 309 digits of a damaged 1e308.
std::string value_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, std::fabs(v) < 1e6 ? "%.4f" : "%.4g", v);
  return buf;
}

// A string field of an event line as written, or `fallback`; a value of another type, from a
// file edited or written by something else, is shown as its JSON (nlohmann's value() would
// throw a type error naming neither the file nor the key).
std::string text(const json& j, const char* key, const std::string& fallback) {
  if (!j.contains(key)) return fallback;
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

// The run's Slurm job, as scontrol tells it (asked once: up to 5 s).
struct SlurmState {
  std::string id;    // empty: never submitted
  std::string line;  // scontrol's line; empty when it does not answer
  std::string why;   // ...and why
};

SlurmState slurm_state(const std::string& run_dir) {
  SlurmState s;
  s.id = submitted_job_id(run_dir);
  if (!s.id.empty()) s.line = scontrol_job_line(s.id, &s.why);
  return s;
}

void print_slurm_state(const SlurmState& s) {
  const std::string& id = s.id;
  const std::string& line = s.line;
  const std::string& why = s.why;
  if (id.empty()) return;
  if (line.empty()) {
    std::printf("slurm       job %s (scontrol does not know it now: %s)\n", id.c_str(),
                why.c_str());
    return;
  }
  std::printf("slurm       job %s: %s, restarts %s, reason %s, run time %s of %s, nodes %s\n",
              id.c_str(), scontrol_field(line, "JobState").c_str(),
              scontrol_field(line, "Restarts").c_str(), scontrol_field(line, "Reason").c_str(),
              scontrol_field(line, "RunTime").c_str(), scontrol_field(line, "TimeLimit").c_str(),
              scontrol_field(line, "NodeList").c_str());
}

// What status takes from events.jsonl, in one pass that holds one line at a time (a long run's
// log of saves may have hundreds of thousands).
struct EventSummary {
  json last_state;  // the last event that says what the run did: finished, stopped, failed, ...
  int restarts = 0;
  std::string last_restart;  // "TIME: restart, REASON (exit code N)"
};

EventSummary summarize_events(const std::string& dir) {
  EventSummary s;
  for_each_line(dir + "/events.jsonl", [&](const std::string& line) {
    json e = parse_json_line(line);
    if (!e.is_object()) return true;  // torn by a crash, or not ours
    const std::string kind = text(e, "event", "");
    if (kind == "restart" || kind == "requeue") {
      ++s.restarts;
      s.last_restart = text(e, "time", "?") + ": " + kind + ", " + text(e, "reason", "?");
      if (e.contains("exit_code") && !e["exit_code"].is_null()) {
        s.last_restart += " (exit code " + text(e, "exit_code", "") + ")";
      }
    }
    for (const char* k :
         {"finished", "stopped", "failed", "started", "submitted", "restart", "requeue"}) {
      if (kind == k) s.last_state = std::move(e);
    }
    return true;
  });
  return s;
}

// What the run is doing, from its last event that says (a run killed by SIGKILL writes none)
// and from the ranks holding its directory on this host (base/run_lock.h). Sets *live when
// ranks of it run here.
// `finished`: weights.bin is there and the run got to train.steps.
std::string run_state(const std::string& dir, const json& last_state, const SlurmState& slurm,
                      bool finished, bool* live) {
  const int ranks = ranks_here_holding(dir);
  *live = ranks > 0;
  if (*live) {
    return "training (" + std::to_string(ranks) +
           (ranks == 1 ? " rank on this host holds" : " ranks on this host hold") +
           " the directory)";
  }
  const std::string kind = text(last_state, "event", "");
  // Submitted: its nodes are elsewhere; scontrol says whether it runs, or waits to.
  const std::string job_state = slurm.line.empty() ? "" : scontrol_field(slurm.line, "JobState");
  if (finished) {
    // Its batch script may still be ending (COMPLETING, RUNNING for a moment): said beside it,
    // not instead. A finished run whose 'finished' event is missing (lost as it shut down, or
    // torn) is finished all the same: weights.bin is written once the last step is done.
    const std::string at = kind == "finished" ? text(last_state, "time", "?")
                                              : "weights.bin written, no 'finished' event";
    return "finished, " + at +
           (job_state.empty() ? "" : " (Slurm job " + slurm.id + ": " + job_state + ")");
  }
  if (run_lock_held_here(dir)) {
    // `ringmaster run` lives, its ranks not (yet, or again): starting them, or between restarts
    // (before: "not started", or "killed? run the same command", while it restarted the job).
    *live = true;
    return "starting or restarting its ranks (a ringmaster run holds the directory and no rank "
           "of it runs here now" +
           (kind.empty() ? std::string()
                         : "; last: '" + kind + "', " + text(last_state, "time", "?")) +
           ")";
  }
  if (job_state == "RUNNING") {
    *live = true;
    return "training as Slurm job " + slurm.id + " (RUNNING on " +
           scontrol_field(slurm.line, "NodeList") + ")";
  }
  if (!job_state.empty() && slurm_job_may_run(job_state)) {
    const std::string reason = scontrol_field(slurm.line, "Reason");
    std::string waiting =
        "waiting as Slurm job " + slurm.id + " (" + job_state + ", reason " + reason + ")";
    if (job_state == "PENDING" && slurm_reason_blocks_for_good(reason)) {
      // A job submitted by hand, or one the cluster shrank under (submit refuses such a shape).
      waiting += ": Slurm will not start it as it asks; `scancel " + slurm.id +
                 "`, change the job's cluster section and submit it again";
    }
    return waiting;
  }
  if (!last_state.is_null()) {
    const json* e = &last_state;
    const std::string at = text(*e, "time", "?");
    if (kind == "finished") return "finished, " + at;
    if (kind == "stopped") {
      // Rank 0 names the signal it got, or says that another rank got one.
      std::string by = text(*e, "signal", text(*e, "reason", ""));
      if (by.empty() || by[0] == '(') by = "a signal" + (by.empty() ? "" : " " + by);
      return "stopped by " + by + ", " + at + ": run the same command to resume";
    }
    if (kind == "failed") {
      std::string why = text(*e, "error", text(*e, "reason", ""));
      if (why.size() > 200) why = why.substr(0, 200) + "...";
      // The cause in a rank's own words is in its log: said where to look.
      return "failed (exit code " + text(*e, "exit_code", "?") + "), " + at +
             (why.empty() ? "" : ": " + why) + "; the ranks' logs: " + dir + "/logs/";
    }
    return std::string("not training on this host (last: '") + kind + "', " + at +
           "; ended without a word if it was here: killed? run the same command to resume)";
  }
  return "not started";
}

}  // namespace

int cmd_status(const StatusArgs& args) {
  return report_errors([&] {
    const std::string& dir = args.run_dir;
    const std::string config_path = dir + "/config.yaml";
    if (!fs::is_directory(dir) || !fs::exists(config_path)) {
      print_error(dir + ": not a run directory (no config.yaml); give the run_dir of a job");
      return kExitBadInput;
    }
    // Read as any job file (bounded, text only), without the rules added since the run began.
    const JobConfig job = load_stored_job_file(config_path);
    // The last 20 step lines and the last evaluation's (a val_loss or a choice_accuracy), read
    // from the end: a long run's metrics.jsonl is never read whole, let alone held.
    constexpr size_t kRecent = 20;
    std::vector<json> metrics;  // the last kRecent step lines, oldest first
    json last_val;
    for_each_json_line_backwards(dir + "/metrics.jsonl", [&](const json& m) {
      if (!has_step(m)) return true;
      if (metrics.size() < kRecent) metrics.insert(metrics.begin(), m);
      // The last evaluation, even one whose value was not finite (written null): said so, not
      // passed over for an older one.
      if (last_val.is_null() && (m.contains("val_loss") || m.contains("choice_accuracy"))) {
        last_val = m;
      }
      return metrics.size() < kRecent || last_val.is_null();
    });
    const int64_t total = job.train.steps;
    const EventSummary events = summarize_events(dir);
    std::vector<std::string> skipped;
    const auto newest = find_resume_checkpoint(dir, &skipped);
    // How far it got: the furthest of its last logged step, its newest checkpoint (logs may be
    // sparser than saves) and its end (a crash may tear metrics.jsonl's last line, which is
    // then skipped).
    int64_t step = newest ? newest->step : 0;
    for (const json& m : metrics) step = std::max(step, m["step"].get<int64_t>());
    if (text(events.last_state, "event", "") == "finished" &&
        events.last_state.value("step", json()).is_number_integer()) {
      step = std::max(step, events.last_state["step"].get<int64_t>());
    }
    const bool finished = fs::exists(dir + "/weights.bin") && step >= total;
    bool live = false;
    const SlurmState slurm = slurm_state(dir);
    const std::string state = run_state(dir, events.last_state, slurm, finished, &live);

    std::printf("job         %s (%s)\n", job.name.c_str(), dir.c_str());
    // Past train.steps: the job file's steps were lowered after the run got there (or a line of
    // metrics.jsonl says so): no percentage over 100 is made of it.
    char progress[64];
    if (step <= total) {
      std::snprintf(progress, sizeof progress, "%.1f%%", 100.0 * step / total);
    } else {
      std::snprintf(progress, sizeof progress, "past train.steps");
    }
    std::printf("step        %lld / %lld (%s)%s\n", static_cast<long long>(step),
                static_cast<long long>(total), progress, finished ? ", finished" : "");
    std::printf("state       %s\n", state.c_str());
    if (!metrics.empty()) {
      const json& last = metrics.back();
      // metrics.jsonl writes a NaN or infinite loss as null: said as such, not as 0.
      const long long last_step = last["step"].get<int64_t>();
      if (has_number(last, "loss")) {
        std::printf("loss        %s (step %lld)", value_text(number(last, "loss")).c_str(),
                    last_step);
      } else {
        std::printf("loss        not finite (step %lld%s)", last_step,
                    last.contains("skipped") && last["skipped"] == true ? ", skipped" : "");
      }
      if (!last_val.is_null()) {
        const long long at = last_val["step"].get<int64_t>();
        for (const char* key : {"val_loss", "choice_accuracy"}) {
          if (!last_val.contains(key)) continue;
          std::printf(
              ", %s %s (step %lld)", key,
              has_number(last_val, key) ? value_text(number(last_val, key)).c_str() : "not finite",
              at);
        }
      }
      std::printf("\n");
      // Speed and ETA from the median of the last 20 steps: robust to the slow first step and
      // to steps that evaluated or waited for a checkpoint.
      std::vector<double> ms, tps;
      for (const json& m : metrics) {
        ms.push_back(number(m, "step_ms"));
        tps.push_back(number(m, "tokens_per_s"));
      }
      std::sort(ms.begin(), ms.end());
      std::sort(tps.begin(), tps.end());
      const double step_ms = ms[ms.size() / 2];
      std::printf("speed       %.0f tokens/s, %.1f ms/step (median of the last %zu steps)\n",
                  tps[tps.size() / 2], step_ms, ms.size());
      // Only for a run that trains: a stopped or failed one has no time of arrival.
      if (!finished && live && step < total) {
        std::printf("eta         %s for the %lld steps left (training time only)\n",
                    duration_text(step_ms / 1e3 * static_cast<double>(total - step)).c_str(),
                    static_cast<long long>(total - step));
      }
    }
    if (newest) {
      std::printf("checkpoint  %s (step %lld, verified)\n", newest->path.c_str(),
                  static_cast<long long>(newest->step));
    } else {
      std::printf("checkpoint  none verified\n");
    }
    for (const std::string& s : skipped) std::printf("            %s\n", s.c_str());
    const std::string best = describe_best_checkpoint(dir);
    if (!best.empty()) std::printf("best        %s\n", best.c_str());

    std::printf("restarts    %d%s\n", events.restarts,
                events.restarts ? (" (last " + events.last_restart + ")").c_str() : "");
    print_slurm_state(slurm);
    return kExitOk;
  });
}

}  // namespace rm
