#include "planning/step_plan.h"

#include <algorithm>
#include <cmath>

#include "model/model.h"

namespace rm {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// What the step computes per token (multiply-adds x 2): forward + backward, and under
// model.recompute one more forward of every block but the last.
double flops_per_token(const ModelConfig& m, double params) {
  if (m.type != ModelType::kGpt) return 6 * params;
  const double L = m.layers, C = m.width, V = m.vocab_size, T = m.seq_len;
  const double recomputed = m.recompute ? (L - 1) * (2 * 12 * C * C + 4 * T * C) : 0;
  return 6 * (12 * L * C * C + V * C) + 12 * L * T * C + recomputed;
}

// What the backward reduces, in the order it launches it, as the worker cuts it
// (worker/sharded_state.cc): none and optimizer in buckets of whole units, from the last unit
// down, each closed once it holds parallel.bucket_mb of fp32 gradients (a unit larger than that
// is a bucket of its own; grad_reduce: bf16 halves the bytes, not the cut); gradients and full
// unit by unit. The last launched holds unit 0 (a gpt's embeddings, held to the end of the
// backward for the tied classifier): what shows after the backward.
struct Reductions {
  double count = 1;       // collectives a pass, for the latency terms
  double last_share = 1;  // the last one's share of the gradients
};

// From the footprint's units (model.h: first, layer 1, then layers 2..L alike, last), with the
// run of equal layers counted in closed form: a model of 10^9 layers is planned in constant time
// and memory, as every other figure of the plan is.
Reductions reductions_of(const JobConfig& job, const double (&units)[4]) {
  Reductions r;
  const double L = std::max(1, job.model.layers);
  const double first = units[0], layer1 = units[1], layer = units[2], last = units[3];
  const double total = first + layer1 + (L - 1) * layer + last;
  if (total <= 0) return r;
  if (!keeps_all_grads(job.parallel.shard)) {
    r.count = L + 2;
    r.last_share = first / total;
    return r;
  }
  const double bucket = std::max(1.0, std::floor(job.parallel.bucket_mb * 1024 * 1024 / 4));
  r.count = 0;
  double open = 0;  // floats of the bucket being filled, from the last unit down
  const auto add = [&](double unit) {
    open += unit;
    if (open >= bucket) r.count += 1, open = 0;
  };
  add(last);
  // L - 1 layers of `layer` floats: the first closes the open bucket after k1 of them, then one
  // closes every k; what is left stays open.
  const double n = L - 1;
  if (n > 0 && layer > 0) {
    const double k1 = std::ceil((bucket - open) / layer), k = std::ceil(bucket / layer);
    if (n < k1) {
      open += n * layer;
    } else {
      const double rest = n - k1;
      r.count += 1 + std::floor(rest / k);
      open = std::fmod(rest, k) * layer;
    }
  }
  add(layer1);
  // Unit 0 closes the last bucket whatever it holds.
  r.count += 1;
  r.last_share = (open + first) / total;
  return r;
}

ModePlan plan_mode(const JobConfig& base, ShardMode shard, bool recompute, const ClusterSpec& c,
                   const JobPlan& p, double text_bytes) {
  JobConfig job = base;
  job.parallel.shard = shard;
  job.model.recompute = recompute;
  ModePlan m;
  m.shard = shard;
  m.recompute = recompute;
  m.recompute_changed = recompute != base.model.recompute;
  const bool gpu = c.device_type == "gpu";
  m.memory = estimate_memory(job, p.ranks, gpu ? ComputeKind::kCuda : ComputeKind::kCpu, c.nodes,
                             text_bytes);
  m.host_need_gib = m.memory.host_for(c.devices_per_node) / kGiB;
  m.device_need_gib = gpu ? m.memory.device / kGiB : 0;
  m.fits = m.host_need_gib <= c.node_memory_gib &&
           (!gpu || m.device_need_gib <= c.device_memory_gib);

  const double rate = c.tflops * 1e12 * c.mfu;
  m.compute_s = p.tokens_per_rank * flops_per_token(job.model, p.params) / rate;
  if (p.ranks == 1) return m;

  const double grad = p.params * bytes_per_element(job.parallel.grad_reduce);
  const double params_fp32 = p.params * 4;
  const double params_compute = p.params * bytes_per_element(job.parallel.precision);
  const double A = p.accumulation;
  // Per collective: the ring's steps within a node and between nodes (hierarchical).
  const double lat = (2 * (c.devices_per_node - 1) * c.intra_node.latency_us +
                      2 * (c.nodes - 1) * c.inter_node.latency_us) * 1e-6;
  const Reductions reductions = reductions_of(job, p.unit_floats);
  // Per mode, the bytes that may hide behind compute and those that may not, and the latencies:
  // `lat` is an all-reduce's (2(n-1) ring steps), a reduce-scatter's or an all-gather's half.
  double overlappable = 0, fixed = 0, latency = 0;
  switch (shard) {
    case ShardMode::kNone:  // each bucket all-reduced once a step
      overlappable = all_reduce_s(grad, c);
      latency = reductions.count * lat;
      break;
    case ShardMode::kOptimizer:  // each bucket reduce-scattered, then one gather of the update
      overlappable = half_collective_s(grad, c);
      fixed = half_collective_s(params_fp32, c);  // parameters gathered after the update
      latency = (reductions.count + 1) * lat / 2;
      break;
    case ShardMode::kGradients:  // each unit reduce-scattered every micro-batch, then likewise
      overlappable = A * half_collective_s(grad, c);
      fixed = half_collective_s(params_fp32, c);
      latency = (A * reductions.count + 1) * lat / 2;
      break;
    case ShardMode::kFull:  // each unit, every micro-batch: one scatter, two gathers
      overlappable = A * (half_collective_s(grad, c) + 2 * half_collective_s(params_compute, c));
      latency = 3 * A * reductions.count * lat / 2;
      break;
  }
  m.comm_s = overlappable + fixed + latency;
  if (!gpu || !job.parallel.overlap) {
    m.exposed_s = m.comm_s;
  } else {
    // Backward is 2/3 of the compute; ZeRO-3's gathers also run beside the forward third. The
    // bucketed modes reduce in the last micro-batch's backward only: 1/A of it hides them.
    const double hide = m.compute_s * (keeps_all_params(shard) ? 2.0 / 3.0 : 1.0) /
                        (keeps_all_grads(shard) ? A : 1.0);
    // What the last micro-batch launches last shows whatever was hidden before it: its last
    // bucket, or unit 0's reduce-scatter (ZeRO-3 gathered unit 0 long before).
    const double last_pass = keeps_all_grads(shard) ? overlappable : half_collective_s(grad, c);
    const double tail = last_pass * reductions.last_share;
    m.exposed_s = std::max(tail, overlappable - hide) + fixed + latency;
  }
  return m;
}

}  // namespace

double all_reduce_s(double bytes, const ClusterSpec& c) {
  const double L = c.devices_per_node, H = c.nodes;
  double s = 0;
  if (L > 1) s += 2 * (L - 1) / L * bytes / (c.intra_node.bandwidth_gbs * 1e9);
  if (H > 1) s += 2 * (H - 1) / H * bytes / (c.inter_node.bandwidth_gbs * 1e9);
  return s;
}

double half_collective_s(double bytes, const ClusterSpec& c) {
  return all_reduce_s(bytes, c) / 2;
}

JobPlan plan_job(const JobConfig& job, const ClusterSpec& c, double text_bytes) {
  JobPlan p;
  p.ranks = c.ranks();
  const ModelFootprint f =
      model_footprint(job.model, job.train.micro_batch, job.parallel.precision);
  p.params = f.param_floats;
  for (int i = 0; i < 4; ++i) p.unit_floats[i] = f.units[i];
  p.flops_per_token = flops_per_token(job.model, p.params);
  const double samples_per_rank = static_cast<double>(job.train.global_batch) / p.ranks;
  const bool gpt = job.model.type == ModelType::kGpt;
  // Every position of a sample is a prediction, the MLP's too (it predicts each next token
  // from the ones before it).
  p.tokens_per_rank = samples_per_rank * job.model.seq_len;
  p.accumulation = std::max(1, static_cast<int>(std::ceil(samples_per_rank / job.train.micro_batch)));
  std::vector<bool> recomputes = {job.model.recompute};
  if (gpt && !job.model.recompute) recomputes.push_back(true);
  for (const bool recompute : recomputes) {
    for (const ShardMode shard : every_choice<ShardMode>()) {
      p.modes.push_back(plan_mode(job, shard, recompute, c, p, text_bytes));
    }
  }
  for (size_t i = 0; i < p.modes.size(); ++i) {
    if (!p.modes[i].fits) continue;
    if (p.recommended < 0 || p.modes[i].step_s() < p.modes[p.recommended].step_s() * 0.98) {
      p.recommended = static_cast<int>(i);
    }
  }
  // Bucket size: only the replicated and ZeRO-1 modes bucket their gradients.
  double best = -1;
  for (const double mb : {1.0, 4.0, 25.0, 100.0}) {
    JobConfig j = job;
    j.parallel.bucket_mb = mb;
    const ShardMode shard = p.recommended >= 0 ? p.modes[p.recommended].shard : ShardMode::kNone;
    const bool recompute =
        p.recommended >= 0 ? p.modes[p.recommended].recompute : job.model.recompute;
    const double s = plan_mode(j, shard, recompute, c, p, text_bytes).step_s();
    if (best < 0 || s < best * (1 - 1e-9)) best = s, p.bucket_mb = mb;
  }
  // Checkpoints: 12 bytes per parameter (fp32 parameters, Adam m and v).
  const double ckpt_bytes = 12 * p.params;
  p.save_s = ckpt_bytes / (c.fs_write_gbs * 1e9);
  // Asynchronous: the step waits only while each rank copies its slice (~5 GB/s memcpy on a
  // host; device-to-host copies on a GPU are of the same order).
  p.stall_s = job.checkpoint.async ? ckpt_bytes / p.ranks / 5e9 : p.save_s;
  p.job_mtbf_h = c.node_mtbf_hours / c.nodes;
  // Bounded: a node_mtbf_hours near DBL_MAX (a spec built in code; files are bounded at 1e9)
  // made it inf, and the lost fraction below inf/inf: NaN, printed as 100% lost.
  const double mtbf_s = std::min(p.job_mtbf_h * 3600, 1e300);
  p.interval_s = std::sqrt(2 * std::max(p.stall_s, 1e-3) * mtbf_s);
  if (p.recommended >= 0) {
    // The recommended row's step at the bucket size recommended with it (`best`): the row itself
    // is timed at the job's own, and the interval in steps would not be the one the plan's
    // seconds say once both recommendations are taken.
    const double step = best;
    // Bounded before the conversion: an extreme node_mtbf_hours (1e300) overflowed it to 1.
    const double steps = p.interval_s / step;
    p.interval_steps = steps >= 1 ? static_cast<int64_t>(std::min(steps, 1e15)) : 1;
  }
  // Young's first-order expected overhead: stall per interval plus half an interval lost per
  // failure (and the restart's reload, ~ a save).
  // At most all of it (a node_mtbf_hours or fs_write_gbs near zero made it 7e294%).
  p.lost_fraction =
      std::min(1.0, p.stall_s / p.interval_s + (p.interval_s / 2 + p.save_s) / mtbf_s);
  return p;
}

}  // namespace rm
