#include "planning/memory_fit.h"

#include <algorithm>
#include <climits>

#include "configs/config_error.h"

namespace rm {
namespace {

// The hosts `ranks` take at `ranks_on_host` a host.
int hosts_for(int ranks, int ranks_on_host) {
  return static_cast<int>((int64_t{ranks} + ranks_on_host - 1) / std::max(1, ranks_on_host));
}

struct Need {
  double host = 0;  // bytes of RAM on the busiest host
  double gpu = 0;   // bytes of one GPU (cuda)
};

Need need_of(const MemoryEstimate& e, int ranks_on_host, ComputeKind backend) {
  return {e.host_for(ranks_on_host), backend == ComputeKind::kCuda ? e.device : 0};
}

bool fits(const Need& n, const MemoryCapacity& c) {
  return (c.host <= 0 || n.host <= c.host) && (c.gpu <= 0 || n.gpu <= c.gpu);
}

// "~3.1 GiB per host" (cpu), "~7.9 GiB per GPU, ~3.1 GiB per host" (cuda with a GPU visible);
// "per node" on Slurm.
std::string per_host(const Need& n, ComputeKind backend, const MemoryCapacity& c) {
  std::string s = "~" + format_bytes(n.host) + (c.slurm ? " per node" : " per host");
  if (backend == ComputeKind::kCuda && c.gpu > 0) s = "~" + format_bytes(n.gpu) + " per GPU, " + s;
  return s;
}

// "2 ranks on this host", "8 ranks per host" (the busiest of a hostfile's), "4 ranks per node".
std::string ranks_phrase(int ranks, int ranks_on_host, const MemoryCapacity& c) {
  return std::to_string(ranks_on_host) + " rank" + (ranks_on_host == 1 ? "" : "s") +
         (c.slurm ? " per node" : ranks_on_host == ranks ? " on this host" : " per host");
}

// The train.eval_batches that keeps the job's validation windows at micro-batch `mb`: with it
// val_loss compares with the job's, and a run in the directory resumes with it (base/run_dir.h
// refuses a resume that changes them). 0 when there is none to keep (no validation data, none
// evaluated, the same micro-batch) or when no whole number keeps them.
int eval_batches_keeping_validation(const JobConfig& job, int mb) {
  const TrainConfig& t = job.train;
  if (!has_validation_data(job.data) || t.eval_batches == 0 || mb == t.micro_batch) return 0;
  const long long windows = static_cast<long long>(t.eval_batches) * t.micro_batch;
  return windows % mb == 0 && windows / mb <= kMaxEvalBatches ? static_cast<int>(windows / mb) : 0;
}

// Micro-batches up to job's that keep the batch arithmetic whole on `ranks` (divisors of the
// per-rank batch) and, where the job is validated, its validation windows whole in at most
// kMaxEvalBatches micro-batches (a suggestion the schema would refuse is none), largest first;
// empty when the ranks do not divide the global batch or no micro-batch keeps the windows.
std::vector<int> micro_batches(const JobConfig& job, int ranks) {
  std::vector<int> out;
  if (job.train.global_batch % ranks != 0) return out;
  const int per_rank = job.train.global_batch / ranks;
  // The validation windows to keep whole; 0: none to keep.
  const long long windows =
      has_validation_data(job.data)
          ? static_cast<long long>(job.train.eval_batches) * job.train.micro_batch
          : 0;
  for (int d = std::min(job.train.micro_batch, per_rank); d >= 1; --d) {
    if (per_rank % d != 0) continue;
    if (windows == 0 || (windows % d == 0 && windows / d <= kMaxEvalBatches)) out.push_back(d);
  }
  return out;
}

// The knobs a variant of the job turns.
constexpr unsigned kShard = 1, kMicroBatch = 2, kAsync = 4, kRanks = 8, kRecompute = 16,
                   kChunks = 32, kKnobSets = 64;

struct Variant {
  int mode = 0, micro_batch = 0, ranks = 0;
  int chunk_tokens = 0;  // model.classifier_chunk_tokens; 0: all of a micro-batch's at once
  // With another micro_batch: the train.eval_batches that keeps the validation set (the first
  // eval_batches x micro_batch windows), so that val_loss compares with the job's and a run
  // resumes with it (base/run_dir.h); 0 when there is none to keep or no whole number keeps it.
  int eval_batches = 0;
  unsigned changed = 0;  // kShard | kMicroBatch | kAsync | kRanks | kRecompute | kChunks
  Need need;
};

// A chunk of `tokens`, 0 being all of them: the larger, the fewer classifier calls.
long long chunk_size(int tokens) {
  return tokens > 0 ? tokens : (1LL << 62);
}

// Of two variants that turn the same knobs, the gentler: fewer ranks, then a weaker shard mode
// (less communication), then a larger micro-batch (fewer accumulation steps), then larger
// classifier chunks.
bool gentler(const Variant& a, const Variant& b) {
  if (a.ranks != b.ranks) return a.ranks < b.ranks;
  if (a.mode != b.mode) return a.mode < b.mode;
  if (a.micro_batch != b.micro_batch) return a.micro_batch > b.micro_batch;
  return chunk_size(a.chunk_tokens) > chunk_size(b.chunk_tokens);
}

// model.classifier_chunk_tokens to try, the job's first: for gpt, 4096, 1024 and 256 tokens
// where smaller than the job's chunk and than its micro-batch's tokens (a chunk that large
// changes nothing). The logits of a chunk are [tokens, vocabulary]: GPT-2's 50257 words make
// 4096 tokens 0.8 GB of fp32 logits instead of 3.3 GB for 16 sequences of 1024.
std::vector<int> chunk_choices(const JobConfig& job) {
  std::vector<int> out = {job.model.classifier_chunk_tokens};
  if (job.model.type != ModelType::kGpt) return out;
  const long long tokens = static_cast<long long>(job.train.micro_batch) * job.model.seq_len;
  for (const int c : {4096, 1024, 256}) {
    if (c < tokens && c < chunk_size(job.model.classifier_chunk_tokens)) out.push_back(c);
  }
  return out;
}

// The settings of the knobs that neither the ranks nor the batch arithmetic constrain, the job's
// own first: checkpoint.async off, model.recompute on (gpt), smaller classifier chunks (gpt).
struct Setting {
  bool async, recompute;
  int chunk_tokens;
};
std::vector<Setting> settings(const JobConfig& job) {
  std::vector<bool> asyncs = {job.checkpoint.async};
  if (job.checkpoint.async) asyncs.push_back(false);
  std::vector<bool> recomputes = {job.model.recompute};
  if (job.model.type == ModelType::kGpt && !job.model.recompute) recomputes.push_back(true);
  const std::vector<int> chunks = chunk_choices(job);
  std::vector<Setting> out;
  for (const bool async : asyncs) {
    for (const bool recompute : recomputes) {
      for (const int chunk : chunks) out.push_back({async, recompute, chunk});
    }
  }
  return out;
}

// Every variant, the job itself first: each shard mode from the job's on, each micro-batch up to
// the job's, each of settings(), and 2, 4, ... 1024 times the ranks on hosts like this one
// with as many ranks on each. Some ten thousand estimates at most, each microseconds.
std::vector<Variant> variants(const JobConfig& job, int ranks, int ranks_on_host,
                              ComputeKind backend, double text_bytes) {
  std::vector<Variant> out;
  // Shard modes by index, weakest first (ShardMode's order).
  const int mode0 = static_cast<int>(job.parallel.shard);
  const int modes = static_cast<int>(kChoiceWords<ShardMode>.size());
  const std::vector<Setting> knobs = settings(job);
  // In 64 bits: ranks x 1024 passes INT_MAX from 2^21 ranks on (a doubling that wrapped to a
  // negative count ended the loop before any variant, and least_need read an empty list).
  for (int64_t r64 = ranks; r64 <= int64_t{ranks} * 1024 && r64 <= INT_MAX; r64 *= 2) {
    const int r = static_cast<int>(r64);
    const std::vector<int> mbs = micro_batches(job, r);
    if (mbs.empty()) break;  // more ranks than the global batch divides among
    for (int mode = mode0; mode < modes; ++mode) {
      for (const int mb : mbs) {
        for (const Setting& k : knobs) {
          JobConfig j = job;
          j.parallel.shard = static_cast<ShardMode>(mode);
          j.train.micro_batch = mb;
          j.checkpoint.async = k.async;
          j.model.recompute = k.recompute;
          j.model.classifier_chunk_tokens = k.chunk_tokens;
          Variant v;
          v.mode = mode;
          v.micro_batch = mb;
          v.ranks = r;
          v.chunk_tokens = k.chunk_tokens;
          v.eval_batches = eval_batches_keeping_validation(job, mb);
          v.changed = (mode != mode0 ? kShard : 0u) |
                      (mb != job.train.micro_batch ? kMicroBatch : 0u) |
                      (k.async != job.checkpoint.async ? kAsync : 0u) |
                      (r != ranks ? kRanks : 0u) |
                      (k.recompute != job.model.recompute ? kRecompute : 0u) |
                      (k.chunk_tokens != job.model.classifier_chunk_tokens ? kChunks : 0u);
          v.need = need_of(estimate_memory(j, r, backend, hosts_for(r, ranks_on_host), text_bytes),
                           ranks_on_host, backend);
          out.push_back(v);
        }
      }
    }
  }
  return out;
}

// "parallel.shard: full and train.micro_batch: 2 on 16 ranks (8 hosts like this one, 2 ranks
// each: --hosts) (~3.1 GiB per host)"
std::string words(const Variant& v, int ranks_on_host, ComputeKind backend,
                  const MemoryCapacity& c) {
  std::vector<std::string> keys;
  if (v.changed & kShard) keys.push_back(std::string("parallel.shard: ") +
                                      choice_name(static_cast<ShardMode>(v.mode)));
  if (v.changed & kMicroBatch) {
    keys.push_back("train.micro_batch: " + std::to_string(v.micro_batch));
    if (v.eval_batches > 0) {
      keys.push_back("train.eval_batches: " + std::to_string(v.eval_batches));
    }
  }
  if (v.changed & kAsync) keys.push_back("checkpoint.async: false");
  if (v.changed & kRecompute) keys.push_back("model.recompute: true");
  if (v.changed & kChunks) {
    keys.push_back("model.classifier_chunk_tokens: " + std::to_string(v.chunk_tokens));
  }
  std::string s;
  for (size_t i = 0; i < keys.size(); ++i) s += (i == 0 ? "" : " and ") + keys[i];
  if (v.changed & kRanks) {
    const int hosts = hosts_for(v.ranks, ranks_on_host);
    s += (s.empty() ? "" : " ") + std::string("on ") + std::to_string(v.ranks) + " ranks (" +
         (c.slurm ? "cluster.nodes: " + std::to_string(hosts)
                  : std::to_string(hosts) + " hosts like this one, " +
                        std::to_string(ranks_on_host) + " rank" +
                        (ranks_on_host == 1 ? "" : "s") + " each: --hosts") +
         ")";
  }
  return s + " (" + per_host(v.need, backend, c) + ")";
}

// When nothing fits: the variant that needs least.
std::string least_need(const JobConfig& job, int ranks, int ranks_on_host, ComputeKind backend,
                       const MemoryCapacity& c, double text_bytes) {
  const std::vector<Variant> all = variants(job, ranks, ranks_on_host, backend, text_bytes);
  if (all.empty()) return "";
  const Variant* least = &all.front();
  for (const Variant& v : all) {
    if (v.need.host + v.need.gpu < least->need.host + least->need.gpu) least = &v;
  }
  return least->changed == 0
             ? ""
             : "; the least any needs is with " + words(*least, ranks_on_host, backend, c);
}

}  // namespace

std::vector<std::string> memory_fit_suggestions(const JobConfig& job, int ranks, int ranks_on_host,
                                                ComputeKind backend, const MemoryCapacity& c,
                                                double text_bytes) {
  // The gentlest fitting variant for each set of knobs; then the sets of the fewest knobs,
  // leaving out a set that contains one already chosen (it would change more than needed).
  Variant best[kKnobSets];
  bool have[kKnobSets] = {};
  for (const Variant& v : variants(job, ranks, ranks_on_host, backend, text_bytes)) {
    if (v.changed == 0 || !fits(v.need, c)) continue;
    if (!have[v.changed] || gentler(v, best[v.changed])) best[v.changed] = v;
    have[v.changed] = true;
  }
  std::vector<unsigned> chosen;
  for (int knobs = 1; knobs <= 6; ++knobs) {
    for (unsigned set = 1; set < kKnobSets; ++set) {
      if (!have[set] || __builtin_popcount(set) != knobs) continue;
      bool contains_chosen = false;
      for (const unsigned s : chosen) contains_chosen |= (set & s) == s;
      if (!contains_chosen) chosen.push_back(set);
    }
  }
  std::vector<std::string> out;
  for (const unsigned set : chosen) out.push_back(words(best[set], ranks_on_host, backend, c));
  return out;
}

MemoryFit check_memory_fit(const JobConfig& job, int ranks, int ranks_on_host, ComputeKind backend,
                           const MemoryCapacity& c, double text_bytes) {
  MemoryFit fit;
  fit.per_rank = estimate_memory(job, ranks, backend, hosts_for(ranks, ranks_on_host), text_bytes);
  fit.backend = backend;
  fit.ranks = ranks;
  fit.ranks_on_host = ranks_on_host;
  const Need need = need_of(fit.per_rank, ranks_on_host, backend);
  if (fits(need, c)) return fit;

  const bool cuda = backend == ComputeKind::kCuda;
  const bool gpu_short = cuda && c.gpu > 0 && need.gpu > c.gpu;
  const bool host_short = c.host > 0 && need.host > c.host;
  std::string msg = "needs " + describe_estimate(fit.per_rank);
  if (gpu_short) {
    msg += ", of which ~" + format_bytes(need.gpu) + " on its GPU; a GPU here has " +
           format_bytes(c.gpu);
  }
  if (host_short) {
    if (cuda) {
      msg += (gpu_short ? "; and ~" : ", of which ~") + format_bytes(fit.per_rank.host()) +
             " on the host";
    }
    msg += " x " + ranks_phrase(ranks, ranks_on_host, c) + " = " + format_bytes(need.host) +
           "; " + c.host_name + " has " + format_bytes(c.host);
  }
  const std::vector<std::string> ways =
      memory_fit_suggestions(job, ranks, ranks_on_host, backend, c, text_bytes);
  if (ways.empty()) {
    msg +=
        ". Nothing tried fits (every parallel.shard mode from the job's, train.micro_batch "
        "down to 1, checkpoint.async: false, model.recompute: true, "
        "model.classifier_chunk_tokens down to 256, up to 1024 times the ranks on more " +
        std::string(c.slurm ? "nodes" : "hosts like this one") + ")" +
        least_need(job, ranks, ranks_on_host, backend, c, text_bytes);
  } else {
    msg += ". It would fit with: ";
    for (size_t i = 0; i < ways.size(); ++i) msg += (i == 0 ? "" : ", or ") + ways[i];
  }
  if (fit.per_rank.data > 0) {
    msg += ". Every rank holds the text of data.train and data.val encoded (~" +
           format_bytes(fit.per_rank.data) +
           " at most): token shards made once with `ringmaster tokenize` are mapped instead";
  }
  throw JobConfigError({ConfigError{job.source_path, 0, 0, "", msg}});
}

std::string MemoryFit::summary(const MemoryCapacity& c) const {
  std::string s = "memory: " + describe_estimate(per_rank);
  if (backend == ComputeKind::kCuda) {
    s += ", of which ~" + format_bytes(per_rank.device) + " on its GPU (" +
         (c.gpu > 0   ? "a GPU here has " + format_bytes(c.gpu)
          : c.slurm ? std::string("a node's GPUs are not known here: not checked")
                    : std::string("no GPU visible here: not checked")) +
         ")";
  }
  s += "; x " + ranks_phrase(ranks, ranks_on_host, c) + " = " +
       format_bytes(per_rank.host_for(ranks_on_host));
  if (c.host > 0) s += " of " + format_bytes(c.host) + (c.slurm ? " on " + c.host_name : "");
  return s;
}

}  // namespace rm
