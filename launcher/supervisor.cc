#include "launcher/supervisor.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "checkpoint/checkpoint_reader.h"
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "base/error_report.h"
#include "base/exit_codes.h"
#include "base/rank_end.h"
#include "base/run_lock.h"
#include "base/stop_signal.h"
#include "io/atomic_file.h"
#include "io/posix_io.h"
#include "launcher/child_process.h"
#include "launcher/cmd_common.h"
#include "launcher/host_check.h"
#include "launcher/hostfile.h"
#include "launcher/mpi_launch.h"
#include "launcher/restart_placement.h"
#include "observe/run_events.h"
#include "worker/checkpoint_line.h"
#include "worker/memory_salvage.h"

namespace rm {
namespace {

// Whether a command-line word is the --fresh flag, in either spelling.
bool is_fresh_flag(const std::string& a) {
  return a == "--fresh" || a.rfind("--fresh=", 0) == 0;
}

}  // namespace

std::vector<std::string> restart_arguments(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (is_fresh_flag(argv[i])) continue;
    if (argv[i].rfind("--from=", 0) == 0) continue;
    if (argv[i] == "--from") {
      ++i;  // and its value
      continue;
    }
    out.push_back(argv[i]);
  }
  return out;
}

namespace {

// argv without --fresh (a restart must not empty what the first attempt wrote).
std::vector<std::string> without_fresh(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  for (const std::string& a : argv) {
    if (!is_fresh_flag(a)) out.push_back(a);
  }
  return out;
}

bool has_from(const std::vector<std::string>& argv) {
  for (const std::string& a : argv) {
    if (a == "--from" || a.rfind("--from=", 0) == 0) return true;
  }
  return false;
}

// --from's value in argv; empty when there is none.
std::string from_value(const std::vector<std::string>& argv) {
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i].rfind("--from=", 0) == 0) return argv[i].substr(7);
    if (argv[i] == "--from" && i + 1 < argv.size()) return argv[i + 1];
  }
  return "";
}

// Whether the run's newest checkpoint `newest` is of the line a --from `from` leaves: neither the
// checkpoint `from` names nor one that goes on from it. The attempt that failed had not removed
// the newer checkpoints of that line yet (Checkpointing::drop_newer_checkpoints: once every rank
// has restored), so a restart goes back to `from`, or it would go on with the line left.
bool left_line_still_newest(const std::string& newest, const std::string& from) {
  std::error_code ec;
  if (std::filesystem::equivalent(newest, from, ec)) return false;
  try {
    return !goes_on_from(load_manifest(newest).state, from);
  } catch (const std::exception&) {
    return false;  // unreadable: a resume will say why, as without --from
  }
}

// A healthy host takes a process in well under a second; one that has not within this long is
// treated as down.
constexpr double kHostProbeTimeoutS = 15;
// After this host's ranks have exited, how long mpirun may take to follow (child_process.h):
// it normally exits within a second; it lingers when a host it waits for is unreachable.
constexpr double kMpirunLingerS = 20;
// How long a restart waits for the failed attempt's ranks to be gone (they save or die within
// seconds of losing their mpirun).
constexpr double kRanksLeaveS = 60;

std::string join_hosts(const std::vector<std::string>& hosts) {
  std::string out;
  for (const auto& h : hosts) out += (out.empty() ? "" : ", ") + h;
  return out;
}

double host_wait_s() {
  const char* v = std::getenv("RM_HOST_WAIT_S");
  return v != nullptr && *v != '\0' ? std::atof(v) : kHostWaitS;
}

// `args` with `option` (given as "--x V" or "--x=V") set to `value`.
std::vector<std::string> with_option(const std::vector<std::string>& args,
                                     const std::string& option, const std::string& value) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind(option + "=", 0) == 0) continue;
    if (args[i] == option) {
      ++i;  // and its value
      continue;
    }
    out.push_back(args[i]);
  }
  out.push_back(option);
  out.push_back(value);
  return out;
}

// A restart without the hosts in `down` (restart_placement.h), if the hosts left can take the
// job: their hostfile goes to RUN_DIR/hosts.restart, `launch` starts the job there, and when it
// shrinks, the ranks learn the rank count their in-memory checkpoints were kept by
// (worker/memory_salvage.h). Returns whether it did.
bool restart_without(const JobConfig& job, const std::vector<std::string>& down,
                     MpiLaunch& launch) {
  const RestartPlacement p =
      place_without(job, read_hostfile(launch.hostfile), launch.nproc, down);
  if (p.nproc == 0) {
    std::printf("ringmaster: cannot go on without %s: %s\n", join_hosts(down).c_str(),
                p.why.c_str());
    std::fflush(stdout);
    return false;
  }
  const std::string path =
      (std::filesystem::absolute(job.run_dir) / "hosts.restart").lexically_normal().string();
  const std::string text = hostfile_text(p.hosts);
  write_file_atomic(path, text.data(), text.size());
  if (p.nproc != launch.nproc) {
    ::setenv(kShrunkFromRanksEnv, std::to_string(launch.nproc).c_str(), 1);
  }
  std::printf("ringmaster: going on without %s: %s (hostfile %s)\n", join_hosts(down).c_str(),
              p.why.c_str(), path.c_str());
  std::fflush(stdout);
  append_run_event(job.run_dir, "hosts_dropped",
                   {{"hosts", down}, {"from_ranks", launch.nproc}, {"ranks", p.nproc},
                    {"hostfile", path}});
  launch.nproc = p.nproc;
  launch.hostfile = path;
  return true;
}

// How many times the run's ranks have all started (the "started" events in events.jsonl); -1
// when the file cannot be read.
long started_events(const std::string& run_dir) {
  try {
    long n = 0;
    for (const nlohmann::json& e : read_run_events(run_dir)) n += e.value("event", "") == "started";
    return n;
  } catch (const std::exception&) {
    return -1;
  }
}

// Whether the attempt that began with `started_before` "started" events got to its end: it
// started, its last event is rank 0's "finished" (written once weights.bin is committed) and
// weights.bin is there. A rank that dies after that -- killed in MPI's teardown, a crash in
// MPI_Finalize -- costs the job nothing: a restart would only resume at the end to finish again.
bool finished_anyway(const std::string& run_dir, long started_before) {
  if (started_events(run_dir) <= started_before) return false;
  bool finished = false;
  for_each_json_line_backwards(run_dir + "/events.jsonl", [&](const nlohmann::json& e) {
    finished = e.value("event", "") == "finished";
    return false;
  });
  return finished && io::is_regular_file(run_dir + "/weights.bin");
}

// With a hostfile: every host must take a process before mpirun starts the job (mpirun would
// wait forever for one that cannot). The first launch fails at once, naming the hosts; a
// restart goes on without them where the hosts left can take the job (restart_without), else
// waits for them to come back, up to host_wait_s(). Returns 0 when the job can start or a stop
// signal came while it waited (the caller checks for those), else the exit code to leave with.
int wait_for_hosts(const JobConfig& job, MpiLaunch& launch, bool restart) {
  if (launch.hostfile.empty()) return 0;
  const std::vector<HostSlots> hosts = read_hostfile(launch.hostfile);
  std::vector<std::string> reasons;
  std::vector<std::string> down = unreachable_hosts(hosts, kHostProbeTimeoutS, &reasons);
  if (down.empty()) return 0;
  const std::string names = join_hosts(down);
  // What the probe found, host by host: said again at the end with the last probe's findings
  // (hosts that came back meanwhile are no longer named).
  const auto why_of = [](const std::vector<std::string>& hosts_down,
                         const std::vector<std::string>& host_reasons) {
    std::string each;
    for (size_t i = 0; i < hosts_down.size(); ++i) {
      each += (i == 0 ? "" : "; ") + hosts_down[i] + ": " +
              (i < host_reasons.size() ? host_reasons[i] : "no answer");
    }
    return "mpirun could not start a process on " + each +
           " (is the host up and reachable from this one?)";
  };
  std::string why = why_of(down, reasons);
  if (!restart) {
    print_error("host" + std::string(down.size() == 1 ? " " : "s ") + names + " unreachable: " + why);
    return kExitFailure;
  }
  if (restart_without(job, down, launch)) return 0;
  const double limit = host_wait_s();
  std::printf("ringmaster: waiting up to %.0f s for %s to come back (%s)\n", limit, names.c_str(),
              why.c_str());
  std::fflush(stdout);
  append_run_event(job.run_dir, "hosts_unreachable", {{"hosts", down}});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit);
  while (std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 10 && !stop_signal_seen(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    // Not the job's end here: the caller's check of stops between attempts says why, writes the
    // "stopped" event and leaves with the failed attempt's code (75 would say "saved, resume").
    if (stop_signal_seen()) return 0;
    reasons.clear();
    down = unreachable_hosts(hosts, kHostProbeTimeoutS, &reasons);
    why = why_of(down, reasons);
    if (down.empty()) {
      std::printf("ringmaster: every host answers again\n");
      std::fflush(stdout);
      return 0;
    }
  }
  print_error("gave up after " + std::to_string(static_cast<int>(limit)) + " s: " + join_hosts(down) +
              " still unreachable (" + why + ")");
  return kExitFailure;
}

// supervise() but for what it throws once an attempt has failed; *last_code: that attempt's exit
// code (-1 until one has).
int supervise_attempts(const JobConfig& job, const MpiLaunch& first_launch,
                       const std::vector<std::string>& argv, int* last_code_out) {
  const SignalForwarding forwarding =
      job.checkpoint.on_signal ? SignalForwarding::kAsUsr1 : SignalForwarding::kSame;
  const int max_restarts = job.resilience.max_restarts;
  MpiLaunch launch = first_launch;  // a restart may go on without lost hosts
  std::vector<std::string> base_args = argv;
  std::vector<std::string> args = argv;
  int& last_code = *last_code_out;
  // Whether an attempt run with --from has started training: its ranks had restored and removed
  // the newer checkpoints of the line it leaves (Checkpointing::drop_newer_checkpoints comes
  // before the "started" event), so no restart passes --from again to drop the new line's.
  bool line_started = false;
  for (int attempt = 0;; ++attempt) {
    ::setenv(kRestartCountEnv, std::to_string(attempt).c_str(), 1);
    const MpiLaunch before = launch;
    // A stop that came since the attempt failed (as the checkpoint was chosen, the hosts probed,
    // the ranks waited for) had no job to pass it on to: none is started to run on without it.
    // Checked before the wait for the ranks to leave too, which may take a minute: a scheduler's
    // grace time is often shorter.
    const auto stopped_before_restart = [&] { return attempt > 0 && stop_signal_seen(); };
    if (const int code = wait_for_hosts(job, launch, attempt > 0); code != 0) {
      if (attempt == 0) return code;
      // The hosts did not come back: the job's end, said as the end of its restarts is, with
      // the failed attempt's code (before: 1, and no event, so `status` took the run for one
      // killed with its launcher).
      append_run_event(job.run_dir, "failed",
                       {{"exit_code", last_code},
                        {"restarts", attempt - 1},
                        {"error", "hosts unreachable after a failure: not restarted"}});
      return last_code;
    }
    // The failed attempt's ranks on a host mpirun lost may live on a moment: not beside them.
    if (attempt > 0 && !stopped_before_restart()) {
      wait_for_ranks_to_leave(job.run_dir, kRanksLeaveS);
    }
    if (stopped_before_restart()) {
      const std::string sig = signal_name(first_stop_signal());
      print_error("stopped by " + sig + " before restart " + std::to_string(attempt) +
                  ": not restarted (the attempt before failed with exit code " +
                  std::to_string(last_code) + "); run the same command again" +
                  (std::any_of(base_args.begin(), base_args.end(), is_fresh_flag)
                       ? " without --fresh"
                       : "") +
                  " to go on from the newest checkpoint");
      append_run_event(job.run_dir, "stopped",
                       {{"signal", sig}, {"before_restart", attempt}, {"exit_code", last_code}});
      return last_code;
    }
    if (launch.hostfile != before.hostfile || launch.nproc != before.nproc) {
      for (std::vector<std::string>* a : {&base_args, &args}) {
        *a = with_option(with_option(*a, "--hosts", launch.hostfile), "--nproc",
                         std::to_string(launch.nproc));
      }
    }
    // One rank on this host needs no mpirun; one rank elsewhere does.
    const bool alone = launch.nproc <= 1 && launch.hostfile.empty();
    bool replaced = false;
    std::vector<std::string> command{self_path(&replaced)};
    if (replaced) {
      // Removed rather than replaced: every restart would fail the same way, so none is tried.
      if (::access(command[0].c_str(), X_OK) != 0) {
        print_error(command[0] + " was removed since this run started and no program is there " +
                    "now: cannot restart the job; run it again once ringmaster is installed");
        if (attempt > 0) {
          append_run_event(job.run_dir, "failed",
                           {{"exit_code", last_code},
                            {"restarts", attempt - 1},
                            {"error", command[0] + " removed: not restarted"}});
        }
        return std::max(last_code, 1);
      }
      std::fprintf(stderr,
                   "ringmaster: %s was replaced since this run started: the restart runs "
                   "the program now there\n",
                   command[0].c_str());
    }
    command.insert(command.end(), args.begin(), args.end());
    // Rank 0 writes a "started" event once every rank is up: a stop notice is held until then
    // (child_process.h). An events.jsonl that cannot be read holds nothing.
    const long started_before = started_events(job.run_dir);
    const auto ranks_started = [&] {
      const long now = started_events(job.run_dir);
      return now < 0 || now > started_before;
    };
    ChildWatch watch;
    watch.ranks_started = ranks_started;
    if (!alone && !launch.hostfile.empty()) {
      watch.linger_limit_s = kMpirunLingerS;
      // This attempt's ranks write this token when they end (base/rank_end.h): it is made of
      // RM_RUN_LOCK and RM_RESTART_COUNT, as set here for them.
      watch.rank_ended = [&job, token = rank_end_token()] {
        return first_rank_ended(job.run_dir, token);
      };
    }
    const int code =
        alone ? run_child(command, forwarding, watch) : run_mpirun(launch, args, forwarding, watch);
    last_code = code;
    if (has_from(args) && started_events(job.run_dir) > started_before) line_started = true;
    if (stop_signal_seen() && forwarding == SignalForwarding::kAsUsr1 &&
        first_stop_signal() != SIGUSR1) {
      // The ranks were told with SIGUSR1 and say so; what this process got is what was sent.
      const std::string sig = signal_name(first_stop_signal());
      bool said = false;         // rank 0's last event names it already
      bool said_failed = false;  // ...or says the stop failed (its checkpoint not saved)
      for_each_json_line_backwards(job.run_dir + "/events.jsonl", [&](const nlohmann::json& e) {
        said = e.value("event", "") == "stopped" && e.value("signal", "") == sig;
        said_failed = e.value("event", "") == "failed";
        return false;
      });
      if (code == kExitStopped) {
        // The ranks' line names the SIGUSR1 they got.
        std::printf(
            "ringmaster: the stop was %s, sent to ringmaster run, which passed it on to "
            "the ranks as SIGUSR1\n",
            sig.c_str());
        std::fflush(stdout);
      }
      if (code == kExitStopped && !said) {
        append_run_event(job.run_dir, "stopped",
                         {{"signal", sig}, {"by", "ringmaster run, passed on as SIGUSR1"}});
      } else if (code != kExitOk && killed_by_second_signal()) {
        // This process's own doing, on the second signal: said as such, and an event, or
        // `status` would say the run ended without a word.
        print_error("stopped by " + sig +
                    ", sent again before the ranks had saved: the job was "
                    "killed (exit code " +
                    std::to_string(code) +
                    "); run the same command again to go on from the newest checkpoint");
        append_run_event(job.run_dir, "stopped",
                         {{"signal", sig}, {"killed", true}, {"exit_code", code}});
      } else if (code != kExitOk && !said_failed) {
        print_error("stopped by " + sig + ", but the job ended with exit code " +
                    std::to_string(code) +
                    " before its ranks saved (a signal sent to mpirun "
                    "too, or to the ranks more than once, kills them); its log is in " +
                    job.run_dir + "/logs/");
      }
    }
    if (code == kExitOk || code == kExitBadInput || code == kExitStopped || stop_signal_seen()) {
      return code;
    }
    if (finished_anyway(job.run_dir, started_before)) {
      std::fprintf(stderr,
                   "ringmaster: the job finished (weights.bin written), then exited with code "
                   "%d as its ranks shut down; nothing to restart (their logs are in %s/logs/)\n",
                   code, job.run_dir.c_str());
      append_run_event(job.run_dir, "exit_after_finish", {{"exit_code", code}});
      return kExitOk;
    }
    // 131 or 132 before every rank was up: mpirun could not execute the program on a host ("could
    // not access or execute an executable"), or a rank died of SIGILL as it started (a binary
    // built for another CPU). A restart fails the same way, its messages burying the cause.
    if ((code == 131 || code == 132) && started_events(job.run_dir) <= started_before) {
      print_error("the job's ranks did not start (exit code " + std::to_string(code) +
                  "): mpirun could not execute " + command[0] +
                  " on a host (its message above), or a rank was killed by " +
                  (code == 132 ? "SIGILL" : "SIGQUIT") +
                  " as it started (SIGILL: a program built for another CPU); not restarted, as a "
                  "restart would fail the same way. The ranks' logs are in " +
                  job.run_dir + "/logs/");
      append_run_event(job.run_dir, "failed",
                       {{"exit_code", code},
                        {"restarts", attempt},
                        {"error", "the ranks did not start: not restarted"}});
      return code;
    }
    if (attempt >= max_restarts) {
      // What `status` says of it: a rank's own message is in its log (a rank writes the event
      // itself only for bad input); a signal's death is said here.
      nlohmann::json failed = {{"exit_code", code}, {"restarts", attempt}};
      const std::string by = signal_in_exit_code(code);  // "SIGKILL", or "" for none
      if (!by.empty()) failed["error"] = "a rank was killed by " + by;
      if (max_restarts > 0) {
        print_error("the job failed (exit code " + std::to_string(code) + ") after " +
                    std::to_string(max_restarts) + " restart" + (max_restarts == 1 ? "" : "s") +
                    " (resilience.max_restarts); giving up");
      } else if (!by.empty()) {
        // A rank killed by a signal (the OOM killer, a node's shutdown, kill -9) says nothing
        // itself: say it here, and where to look.
        print_error("the job failed: a rank was killed by " + by + " (exit code " +
                    std::to_string(code) + "), with nothing said; its log is in " + job.run_dir +
                    "/logs/; resilience.max_restarts restarts the job from its "
                    "newest checkpoint after such a failure");
      } else if (code != kExitFailure) {
        // Not a rank's failure, which exits 1, nor a signal's: mpirun's own (255: a launch it
        // could not make), whose message is above.
        print_error("the job failed: mpirun ended with exit code " + std::to_string(code) +
                    ", which is no rank's failure nor a signal's: mpirun's own message is above");
      }
      append_run_event(job.run_dir, "failed", failed);
      return code;
    }
    const auto newest = find_resume_checkpoint(job.run_dir);
    // --from is for the first attempt: a restart goes on from the run's own newest checkpoint --
    // unless there is none yet (another run's checkpoint, none saved since), or no attempt got
    // as far as training and the newest is still of the line --from leaves: then from it again.
    const std::string from = from_value(base_args);
    const bool from_again =
        !from.empty() && (!newest || (!line_started && left_line_still_newest(newest->path, from)));
    args = from_again || !newest ? without_fresh(base_args) : restart_arguments(base_args);
    const bool memory = job.checkpoint.memory_every > 0;
    // Without a checkpoint to resume, the run starts over -- unless its ranks may hold newer
    // state in memory (worker/memory_checkpoints.h), which --fresh would discard.
    // Nor over committed checkpoints that do not verify now: the rank passes them over as this
    // attempt did, saying why, and keeps them -- a read that failed (EIO, a mount lost as the
    // ranks failed) may succeed again, and --fresh would have removed them unsaid.
    if (!newest && !memory && !has_from(args) && !holds_committed_checkpoint(job.run_dir)) {
      args.push_back("--fresh");
    }
    append_run_event(job.run_dir, "restart",
                     {{"reason", "failed"}, {"exit_code", code}, {"restart", attempt + 1}});
    const std::string source = from_again ? from + " (--from again)"
                               : newest   ? newest->path
                                          : "the beginning (no checkpoint verifies)";
    std::printf("ringmaster: the job failed (exit code %d); restart %d of %d from %s%s\n", code,
                attempt + 1, max_restarts,
                // With --from again, only where its line trained (FromUse::kLineGoesOn): a
                // new line's start discards memory.
                memory && (!from_again || line_started) ? "memory if newer, else " : "",
                source.c_str());
    std::fflush(stdout);
  }
}

}  // namespace

int supervise(const JobConfig& job, const MpiLaunch& first_launch,
              const std::vector<std::string>& argv) {
  int last_code = -1;
  try {
    return documented_exit_code(supervise_attempts(job, first_launch, argv, &last_code));
  } catch (const std::exception& e) {
    // Before any attempt ran: the command's error, as any (bad hosts, exit 2). After one failed,
    // what stops the restart (ranks that never leave the run directory, a file that cannot be
    // read) is not bad input: the job failed, with its exit code, and says so.
    if (last_code < 0) throw;
    print_error("the job failed (exit code " + std::to_string(last_code) +
                ") and could not be restarted: " + e.what());
    append_run_event(job.run_dir, "failed", {{"exit_code", last_code}, {"error", e.what()}});
    return documented_exit_code(last_code);
  }
}

}  // namespace rm
