// `ringmaster plan JOB [--cluster FILE] [--set k=v ...] [--nproc N]`: prints what the job would
// cost per shard mode on a cluster (planning/step_plan.h) and what to choose. Without --cluster,
// this host: --nproc CPU ranks (default: its cores) on one node, its sgemm rate measured now
// (1024^3, one thread per rank), its RAM, and assumed shared-memory links and disk.
#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "base/error_report.h"
#include "base/exit_codes.h"
#include "base/input_error.h"
#include "configs/cluster_spec.h"
#include "configs/config_error.h"
#include "configs/job_loader.h"
#include "configs/yaml_format.h"
#include "launcher/cmd_common.h"
#include "planning/gemm_rate.h"
#include "planning/host_memory.h"
#include "planning/step_plan.h"
#include "worker/data/encoded_text.h"

namespace rm {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

ClusterSpec this_host(int ranks) {
  ClusterSpec c;
  char host[256] = "this host";
  ::gethostname(host, sizeof host - 1);
  c.name = std::string(host) + " (this host; sgemm measured now, links and disk assumed)";
  c.nodes = 1;
  c.devices_per_node = ranks;
  c.device_type = "cpu";
  c.device_name = "CPU rank, 1 thread";
  omp_set_num_threads(1);
  const GemmShape g{false, false, 1024, 1024, 1024, 1, false};
  c.tflops = g.flops() / time_gemm(g, 3) / 1e12;
  c.mfu = 0.9;  // bench train's steps reach ~90-100% of sgemm at the job's own shapes
  c.node_memory_gib = host_memory() / kGiB;
  c.intra_node = {5, 5};      // the shared-memory engine's busbw at MiB sizes (bench allreduce)
  c.inter_node = {0.125, 50};  // unused on one node
  c.fs_write_gbs = 1;
  c.node_mtbf_hours = 8760;
  return c;
}

void print_plan(const JobConfig& job, const ClusterSpec& c, const JobPlan& p) {
  std::printf("plan: job %s on %s\n", job.source_path.c_str(), c.name.c_str());
  std::printf(
      "  %d node%s x %d %s rank%s (%s, %.3g TFLOP/s x mfu %.2f, %s%.0f GiB RAM/node)\n", c.nodes,
      c.nodes == 1 ? "" : "s", c.devices_per_node, c.device_type.c_str(),
      c.devices_per_node == 1 ? "" : "s", c.device_name.c_str(), c.tflops, c.mfu,
      c.device_type == "gpu" ? (format_double(c.device_memory_gib) + " GiB/device, ").c_str() : "",
      c.node_memory_gib);
  std::printf("  model: %.4g M parameters, %.4g GFLOP per token (train); %.0f tokens per rank per "
              "step, %d micro-batch%s of %d\n",
              p.params / 1e6, p.flops_per_token / 1e9, p.tokens_per_rank, p.accumulation,
              p.accumulation == 1 ? "" : "es", job.train.micro_batch);
  std::printf("\n  %-20s %10s %10s %10s %11s %8s %8s %10s %8s  %s\n", "shard", "params", "grads",
              "optimizer", "activations", "buffers", "other", "per rank", "fits", "step (compute + exposed comm)");
  for (size_t i = 0; i < p.modes.size(); ++i) {
    const ModePlan& m = p.modes[i];
    const MemoryEstimate& e = m.memory;
    const double other = e.checkpoint + e.final_weights + e.data + e.runtime;
    const std::string row = std::string(choice_name(m.shard)) + (m.recompute ? " +recompute" : "");
    std::printf("  %-20s %10s %10s %10s %11s %8s %8s %10s %8s  %.4g s = %.4g + %.4g (of %.4g)%s\n",
                row.c_str(), format_bytes(e.parameters).c_str(),
                format_bytes(e.gradients).c_str(), format_bytes(e.optimizer).c_str(),
                format_bytes(e.activations).c_str(), format_bytes(e.buffers).c_str(),
                format_bytes(other).c_str(), format_bytes(e.total()).c_str(),
                m.fits ? "yes" : "NO", m.step_s(), m.compute_s, m.exposed_s, m.comm_s,
                static_cast<int>(i) == p.recommended ? "  <- recommended" : "");
  }
  std::printf("\n  checkpoint: %s per save, %.3g s to write at %.3g GB/s, the step stalls %.3g s%s\n",
              format_bytes(12 * p.params).c_str(), p.save_s, c.fs_write_gbs, p.stall_s,
              job.checkpoint.async ? " (async)" : "");
  std::printf("  failures: job MTBF %.4g h (node %.4g h / %d nodes); Young/Daly interval %.4g s",
              p.job_mtbf_h, c.node_mtbf_hours, c.nodes, p.interval_s);
  if (p.recommended >= 0) std::printf(" = %lld steps", static_cast<long long>(p.interval_steps));
  std::printf(", expected time lost %.2g%%\n", 100 * p.lost_fraction);
  if (p.recommended < 0) {
    std::printf("\n  recommendation: none -- no shard mode fits%s; fewer parameters, a smaller "
                "train.micro_batch, or more memory per node\n",
                job.model.type == ModelType::kGpt ? ", with or without model.recompute" : "");
    return;
  }
  const ModePlan& r = p.modes[p.recommended];
  // Only the replicated and ZeRO-1 modes bucket their gradients (ZeRO-2/3 go unit by unit).
  const bool buckets = keeps_all_grads(r.shard);  // only these reduce in buckets
  std::printf("\n  recommendation: parallel.shard: %s, %s%scheckpoint.every: %lld\n",
              choice_name(r.shard),
              r.recompute_changed ? (std::string("model.recompute: ") +
                                     (r.recompute ? "true" : "false") + ", ").c_str()
                                  : "",
              buckets ? ("parallel.bucket_mb: " + std::to_string(static_cast<int>(p.bucket_mb)) + ", ").c_str()
                      : "",
              static_cast<long long>(p.interval_steps));
  // One line per mode for scripts (scripts/plan-check.sh).
  for (const ModePlan& m : p.modes) {
    std::printf("plan-row shard=%s recompute=%d step_ms=%.2f compute_ms=%.2f exposed_ms=%.2f "
                "rss_mib=%.1f total_mib=%.1f fits=%d\n",
                choice_name(m.shard), m.recompute ? 1 : 0, 1e3 * m.step_s(), 1e3 * m.compute_s, 1e3 * m.exposed_s,
                m.memory.rss() / 1048576.0, m.memory.total() / 1048576.0, m.fits ? 1 : 0);
  }
}

}  // namespace

int cmd_plan(const PlanArgs& args) {
  return report_errors([&] {
    if (!args.cluster.empty() && args.job.nproc_given) {
      throw InputError(
          "--nproc with --cluster: the cluster file's nodes x devices_per_node are "
          "the ranks planned for; give one or the other");
    }
    const ClusterSpec cluster = args.cluster.empty()
                                    ? this_host(args.job.nproc_given ? args.job.nproc
                                                                     : static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)))
                                    : read_cluster_file(args.cluster);
    JobArgs job_args = args.job;
    job_args.nproc = cluster.ranks();
    const JobConfig job = load_job_args(job_args);
    const JobPlan plan = plan_job(job, cluster, tokenized_text_bytes(job.data));
    // As validate refuses it (its estimate unbounded): inf and NaN in every column otherwise.
    if (!std::isfinite(plan.params) || plan.modes.empty() ||
        !std::isfinite(plan.modes.front().memory.total())) {
      throw JobConfigError({ConfigError{
          job.source_path, 0, 0, "",
          "the model's sizes overflow (model.width, model.layers, model.seq_len, "
          "model.vocab_size, ...): its parameters or activations cannot be counted, so nothing "
          "can be planned"}});
    }
    print_plan(job, cluster, plan);
    if (args.cluster.empty() && job.parallel.backend == Backend::kCuda) {
      // this_host() measures the CPU's sgemm: the figures above are not a GPU's.
      std::printf(
          "\n  note: parallel.backend is cuda, but without --cluster this plans this host's CPU "
          "ranks; give a cluster file of the GPU nodes (configs/clusters/h100-8x8.yaml is one)\n");
    }
    return kExitOk;
  });
}

}  // namespace rm
