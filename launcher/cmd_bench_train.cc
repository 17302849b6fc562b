// `ringmaster bench train JOB`: training throughput of a job beside the raw sgemm rate of the
// same machine at the job's own GEMM shapes, measured in the same process.
//
// Two model FLOP utilisations, printed side by side because either alone can mislead:
//  - MFU vs sgemm = achieved GFLOP/s / sgemm GFLOP/s at the step's shapes: how close the whole
//    step (element-wise kernels, attention, optimizer, data) comes to spending all its time in
//    GEMMs running as fast as the BLAS runs them in isolation. Blind to a slow BLAS: generic
//    kernels slow the step and the baseline alike, and the ratio stays high.
//  - MFU vs peak = achieved GFLOP/s / the measured FMA peak of the rank's cores
//    (kernels/cpu/fma_peak.h): what fraction of the machine the step uses. It shows a slow BLAS,
//    but mixes in how well GEMMs of the job's small shapes can use a core at all.
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "base/error_report.h"
#include "base/exit_codes.h"
#include "base/small_stats.h"
#include "kernels/cpu/blas_kernels.h"
#include "kernels/cpu/fma_peak.h"
#include "kernels/cpu/kernels.h"
#include "kernels/timed_compute.h"
#include "launcher/child_process.h"
#include "launcher/cmd_common.h"
#include "launcher/gpu_peak.h"
#include "launcher/mpi_launch.h"
#include "planning/gemm_rate.h"
#include "worker/device_select.h"
#include "worker/mpi_bootstrap.h"
#include "worker/rank_devices.h"
#include "worker/trainer.h"

namespace rm {
namespace {

using Clock = std::chrono::steady_clock;

// What a step's rate is measured against, on either backend.
struct Baseline {
  const char* gemm_name = "sgemm";  // "sgemm" (cpu) | "cuBLAS" (cuda)
  double gemm_rate = 0;             // flops/s per rank at the job's GEMM shapes
  double gemm_seconds = 0;          // per micro-batch
  double peak = 0;                  // flops/s per rank: measured (cpu) or datasheet (cuda); 0 unknown
};

// Seconds of each of `gemms` (time_gemm), every rank timing at once.
std::vector<double> time_gemms(const std::vector<GemmShape>& gemms, Communicator& comm) {
  comm.barrier();
  std::vector<double> seconds;
  for (const GemmShape& g : gemms) seconds.push_back(time_gemm(g, 5));
  return seconds;
}

double total_flops(const std::vector<GemmShape>& gemms) {
  double flops = 0;
  for (const GemmShape& g : gemms) flops += g.flops();
  return flops;
}

template <typename Say>
Baseline cpu_baseline(const Model& model, int B, int threads, Communicator& comm, Say say) {
  Baseline b;
  say("# sgemm baseline at the job's shapes (per micro-batch, every rank at once)\n");
  say("%6s %6s %6s %3s %6s %9s %9s %9s\n", "M", "N", "K", "op", "count", "GFLOP", "ms",
      "GFLOP/s");
  const std::vector<GemmShape> gemms = model.train_gemms(B);
  const std::vector<double> seconds = time_gemms(gemms, comm);
  for (size_t i = 0; i < gemms.size(); ++i) {
    const GemmShape& g = gemms[i];
    const double s = seconds[i];
    b.gemm_seconds += s;
    say("%6d %6d %6d %c%c%c %6lld %9.3f %9.2f %9.1f\n", g.m, g.n, g.k, g.trans_a ? 'T' : 'N',
        g.trans_b ? 'T' : 'N', g.per_head ? 'h' : ' ', static_cast<long long>(g.count),
        g.flops() / 1e9, s * 1e3, g.flops() / s / 1e9);
  }
  b.gemm_rate = total_flops(gemms) / b.gemm_seconds;
  comm.barrier();  // every rank at once: the clock under an all-core load
  const cpu::FmaPeak peak = cpu::measure_fma_peak(cpu::host_cpu_features(), threads, 0.1);
  b.peak = peak.flops_per_s;
  say("# cpu: %s\n# blas: %s\n", cpu::host_cpu_features().summary().c_str(),
      cpu::blas_description().c_str());
  say("peak: %.1f GFLOP/s per rank (FMA loop, %d fp32 lanes x %d thread%s at once on every "
      "rank); sgemm at these shapes reaches %.1f%% of it\n",
      peak.flops_per_s / 1e9, peak.lanes, threads, threads == 1 ? "" : "s",
      100.0 * b.gemm_rate / peak.flops_per_s);
  return b;
}

// The job's dense GEMMs through the backend's own GEMM (planning/gemm_rate.h); attention's
// per-head products are left out of the baseline (their flops still count in the step's MFU).
template <typename Say>
Baseline device_baseline(Compute& compute, const Model& model, int B, Say say) {
  Baseline b;
  b.gemm_name = "cuBLAS";
  const Precision p = model.precision();
  say("# cuBLAS baseline at the job's dense GEMM shapes (%s, per micro-batch)\n",
      choice_name(p));
  say("%6s %6s %6s %6s %9s %9s %9s\n", "M", "N", "K", "count", "GFLOP", "ms", "TFLOP/s");
  double gemm_flops = 0;
  for (const GemmShape& g : model.train_gemms(B)) {
    if (g.per_head) continue;
    const double s = time_device_gemm(compute, g, p, 5);
    gemm_flops += g.flops();
    b.gemm_seconds += s;
    say("%6d %6d %6d %6lld %9.3f %9.3f %9.1f\n", g.m, g.n, g.k, static_cast<long long>(g.count),
        g.flops() / 1e9, s * 1e3, g.flops() / s / 1e12);
  }
  b.gemm_rate = b.gemm_seconds > 0 ? gemm_flops / b.gemm_seconds : 0;
  const GpuPeak peak = gpu_peak(compute.describe());
  b.peak = p == Precision::kBf16 ? peak.bf16_flops : peak.tf32_flops;
  say("# device: %s\n", compute.describe().c_str());
  if (b.peak > 0) {
    say("peak: %.0f TFLOP/s dense %s (%s); cuBLAS at these shapes reaches %.1f%% of it\n",
        b.peak / 1e12, p == Precision::kBf16 ? "bf16" : "tf32", peak.source.c_str(),
        100.0 * b.gemm_rate / b.peak);
  } else {
    say("peak: unknown for this GPU (set RM_GPU_PEAK_TFLOPS to its dense bf16 TFLOP/s)\n");
  }
  return b;
}

// --profile: args.profile more steps with every compute call timed alone; the table per
// operation and shape, per step, slowest first, with the calls per step and how many of them
// returned a value to the host.
template <typename Say>
void profile_steps(Trainer& trainer, TimedCompute& timed, const BenchTrainArgs& args,
                   double step_median_s, Say say) {
  const int64_t first = args.warmup + args.steps;
  timed.reset();
  for (int64_t i = 0; i < args.profile; ++i) trainer.train_step(first + i);
  const int64_t allocations_after_first_steps = timed.counts().allocations;
  timed.reset();
  timed.set_timing(true);
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < args.profile; ++i) trainer.train_step(first + args.profile + i);
  const double profiled = seconds_between(t0, Clock::now()) / args.profile;
  timed.set_timing(false);
  const double n = args.profile;
  double total = 0;
  for (const TimedCompute::Op& op : timed.ops()) total += op.seconds;
  say("# profile: %d step%s with every compute call synchronised and timed alone: %.1f ms a "
      "step (unprofiled median %.1f ms); %.1f calls a step, %.1f returning to the host, %lld "
      "allocations in %d steps after the timed ones\n",
      args.profile, args.profile == 1 ? "" : "s", profiled * 1e3, step_median_s * 1e3,
      timed.counts().calls / n, timed.counts().host_syncs / n,
      static_cast<long long>(allocations_after_first_steps), args.profile);
  say("%-58s %8s %10s %7s\n", "operation", "calls", "ms/step", "share");
  for (const TimedCompute::Op& op : timed.ops()) {
    say("%-58s %8.1f %10.3f %6.1f%%\n", op.name.c_str(), op.calls / n, op.seconds / n * 1e3,
        100.0 * op.seconds / total);
  }
  say("%-58s %8s %10.3f\n", "(sum of the timed calls)", "", total / n * 1e3);
}

}  // namespace

int cmd_bench_train(const BenchTrainArgs& args) {
  if (!launched_by_mpi() && (args.job.nproc > 1 || !args.job.hosts.empty())) {
    return report_errors([&] {
      int nproc = args.job.nproc;
      const MpiLaunch launch = resolve_launch(args.job.hosts, args.job.nproc_given, nproc);
      return run_mpirun(launch, args.argv, SignalForwarding::kSame);
    });
  }
  MpiSession mpi;
  return report_errors([&] {
    JobArgs job_args = args.job;
    job_args.nproc = mpi.world();
    JobConfig job = load_job_args(job_args);
    const DeviceChoice choice =
        choose_device(job.parallel.backend, mpi.local_rank(), mpi.local_size());
    const bool on_device = choice.kind != ComputeKind::kCpu;
    const int threads = configure_threads(job.parallel.threads_per_rank, mpi.local_size());
    // The rank's compute and communicators as a run makes them (worker/rank_devices.h).
    const RankDevices devices = make_rank_devices(choice, threads, job.parallel.timeout_s,
                                                  launched_by_mpi() ? &mpi : nullptr);
    Communicator& comm = devices.comm();
    Communicator& host_comm = *devices.host_comm;
    const bool rank0 = comm.rank() == 0;
    TrainingData data = open_training_data(job);
    // --profile: every call through a TimedCompute (counting only, until the profiled steps).
    std::unique_ptr<TimedCompute> timed;
    if (args.profile > 0) timed = std::make_unique<TimedCompute>(*devices.compute);
    Compute& compute = timed ? *timed : *devices.compute;
    TrainerOptions options;
    options.verbose = false;
    options.compute = &compute;
    options.host_comm = devices.host_comm.get();
    Trainer trainer(job, data, comm, options);
    Model& model = trainer.model();
    const int B = job.train.micro_batch;
    const int accum = job.train.global_batch / (B * comm.size());
    auto say = [&](const char* fmt, auto... xs) {
      if (rank0) std::printf(fmt, xs...);
    };

    say("# bench train: job '%s' | %s %.2fM params | micro_batch %d x seq_len %d, %d "
        "micro-batches/step | %d rank%s x %d threads | shard %s, overlap %s, bucket %.0f MB | "
        "%s, %s\n",
        job.name.c_str(), choice_name(job.model.type), model.layout().size() / 1e6, B,
        job.model.seq_len, accum, comm.size(), comm.size() == 1 ? "" : "s", threads,
        choice_name(job.parallel.shard), job.parallel.overlap ? "on" : "off", job.parallel.bucket_mb,
        compute_kind_name(choice.kind), choice_name(job.parallel.precision));
    // The convention, said where the figure is printed: model flops, the usual 6N + attention
    // count (PaLM's, nanoGPT's), attention in full T x T. The CPU kernel skips most masked blocks
    // (at T=256 it runs about 62% of the T x T work), so it executes fewer flops than it is
    // credited with: by attention's share of the count (about 15% at the default shape).
    if (job.model.type == ModelType::kGpt) {
      say("# flops: GEMMs only, attention counted in full (T x T) though the kernels skip most "
          "of the masked half\n");
    }
    Baseline base = on_device ? device_baseline(*devices.compute, model, B, say)
                              : cpu_baseline(model, B, threads, host_comm, say);

    for (int i = 0; i < args.warmup; ++i) trainer.train_step(i);
    devices.compute->synchronize();
    host_comm.barrier();
    const double memory_before = devices.compute->device_memory_used();
    std::vector<double> step_s, wait_ms, in_backward_ms;
    const int64_t replayed_before = trainer.steps_replayed();
    for (int i = 0; i < args.steps; ++i) {
      const auto t0 = Clock::now();
      trainer.train_step(args.warmup + i);
      // A step returns once its loss is on the host; on a device, wait for the optimizer too,
      // so that each step's time is its own.
      devices.compute->synchronize();
      step_s.push_back(seconds_between(t0, Clock::now()));
      wait_ms.push_back(trainer.last_timing().comm_wait_ms);
      in_backward_ms.push_back(trainer.state().overlap_stats().comm_ms);
    }
    // A shared machine's load can change between the baseline and the steps, and a baseline
    // slowed by it puts the step above 100% of sgemm. So on the cpu the baseline is timed again
    // after the steps; the faster of the two is the one measured against, and both are said.
    const double baseline_before = base.gemm_rate;
    double baseline_after = 0;
    if (!on_device) {
      const std::vector<GemmShape> gemms = model.train_gemms(B);
      double seconds = 0;
      for (double s : time_gemms(gemms, host_comm)) seconds += s;
      baseline_after = total_flops(gemms) / seconds;
      if (baseline_after > base.gemm_rate) {
        base.gemm_rate = baseline_after;
        base.gemm_seconds = seconds;
      }
    }
    const double med = median(step_s);
    const double lo = *std::min_element(step_s.begin(), step_s.end());
    const double hi = *std::max_element(step_s.begin(), step_s.end());
    const double tokens = static_cast<double>(job.train.global_batch) * model.targets_per_sample();
    const double flops = model.train_flops_per_sample() * job.train.global_batch;
    const double achieved = flops / med;  // all ranks together
    const double rank_rate = achieved / comm.size();
    say("%s at these shapes: %.1f GFLOP/s per rank (%.1f ms of GEMM per step)", base.gemm_name,
        base.gemm_rate / 1e9, base.gemm_seconds * accum * 1e3);
    if (baseline_after > 0) {
      say(", the faster of %.1f before the steps and %.1f after them (%.1f%% apart)",
          baseline_before / 1e9, baseline_after / 1e9,
          100.0 * std::abs(baseline_after - baseline_before) /
              std::min(baseline_after, baseline_before));
    }
    say("\n");
    char peak_text[64] = "";
    if (base.peak > 0) {
      std::snprintf(peak_text, sizeof peak_text, " | MFU vs peak %.1f%%",
                    100.0 * rank_rate / base.peak);
    }
    say("train step: median %.1f ms [%.1f-%.1f] over %d steps | %.0f tokens/s (all ranks) | "
        "%.1f GFLOP/s per rank | MFU vs %s %.1f%%%s | waiting on gradient communication "
        "%.1f ms = %.1f%% of a step\n",
        med * 1e3, lo * 1e3, hi * 1e3, args.steps, tokens / med, rank_rate / 1e9, base.gemm_name,
        100.0 * rank_rate / base.gemm_rate, peak_text, median(wait_ms),
        median(wait_ms) / (med * 1e3) * 100);

    if (rank_rate > base.gemm_rate) {
      say("note: MFU vs %s above 100%%: a step's GEMMs do not run faster than the same GEMMs "
          "alone (bar the masked attention blocks credited but skipped), so the machine's load "
          "most likely changed while the baseline was timed; rerun on a quiet machine for a "
          "figure to quote\n",
          base.gemm_name);
    }
    if (trainer.has_step_graphs()) {
      // A recording that failed leaves the run call by call: say how the timed steps ran.
      say("step graphs: %lld of the %d timed steps replayed the step graph\n",
          static_cast<long long>(trainer.steps_replayed() - replayed_before), args.steps);
    }
    const OverlapStats& ov = trainer.state().overlap_stats();
    say("overlap (last step): %d gradient reductions, %d started and %d finished while backward "
        "was running; median %.1f ms per step inside communicator calls during backward\n",
        ov.reductions, ov.started_in_backward, ov.finished_in_backward, median(in_backward_ms));
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    const MemoryPlan plan = trainer.state().memory_plan();
    say("memory per rank: params %.1f MB, grads %.1f MB, optimizer %.1f MB, shard scratch %.1f "
        "MB = %.1f MB expected for state; peak RSS %.1f MB (rank 0, includes activations)\n",
        plan.param_bytes / 1e6, plan.grad_bytes / 1e6, plan.optimizer_bytes / 1e6,
        plan.scratch_bytes / 1e6, plan.total() / 1e6, ru.ru_maxrss / 1e3);
    if (on_device) {
      const double after = devices.compute->device_memory_used();
      say("device memory in use: %.2f GiB after the timed steps, %.2f GiB before them "
          "(cudaMemGetInfo: the CUDA context and cuBLAS workspace included; equal figures mean "
          "nothing was allocated during the steps)\n",
          after / (1 << 30), memory_before / (1 << 30));
    }
    if (timed) profile_steps(trainer, *timed, args, med, say);
    host_comm.barrier();
    return kExitOk;
  });
}

}  // namespace rm
