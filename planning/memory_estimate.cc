#include "planning/memory_estimate.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <vector>

#include "kernels/cuda/classifier_plan.h"
#include "kernels/cuda/flash_attention_plan.h"
#include "model/gpt_model.h"
#include "model/model.h"

namespace rm {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

// The largest binary unit (index into kUnits) in which `bytes` reads at least 1.
int unit_of(double bytes) {
  int u = 0;
  while (u < 6 && bytes >= 1024) {
    bytes /= 1024;
    ++u;
  }
  return u;
}

// What a rank holds besides its model, optimizer and buffers: the program and its libraries,
// OpenMP and OpenBLAS threads, the mapped data pages it touched. Measured as the peak RSS of
// runs whose model, optimizer and activations take a few hundred KiB (width 8, one layer,
// seq_len 8, micro_batch 1; Debian 12, Open MPI 4.1, OpenBLAS 0.3.21): 11.3 MiB for one
// process, 20.7-21.3 MiB for each of 2 or 4 ranks under mpirun (Open MPI's libraries and
// shared-memory segments). OpenBLAS's packing buffers stay within it: jobs 768 wide match their
// measured peak to 1% with nothing added for them (tests/memory_fit_cli_test.cc).
constexpr double kRuntimeAlone = 12 * kMiB;
constexpr double kRuntimeMpi = 22 * kMiB;
// A rank of the cuda backend maps cuBLAS and cuBLASLt (opened when its context is made,
// kernels/cuda/cublas_library.h): 152 MiB more at its peak than a CPU rank (measured here, no
// GPU present, when builds with CUDA still linked them into every process). A CPU rank of any
// build loads neither.
constexpr double kCudaLibraries = 152 * kMiB;
// The cuda backend: the CUDA context, cuBLAS's workspace and cuBLASLt's (32 MiB, lt_gemm.h) on
// the GPU. An assumption: a few hundred MiB is what current drivers take per process. (An H200
// showed 9.14 GiB in use at GPT-2 124M's shape with 16 sequences, context included.)
constexpr double kCudaContext = 512 * kMiB;

// cuDNN's fused attention (kernels/cuda/cudnn_sdpa.h), which the cuda backend takes for bf16
// wherever the flash kernels apply (a superset of their head sizes) and cuDNN is there, plans a
// workspace per shape (deterministic backward: RM_CUDNN_ATTENTION unset or 1). Measured once: 384
// MiB at GPT-2 124M's shape with 16 sequences (T 1024, 12 heads of 64; cuDNN 9.19 on an H200,
// 2026-11-30: 9.52 GiB in use against 9.14 GiB without it, docs/gpu.md): 8 times the float
// [B,H,T,hs] of dQ. Scaled here as dQ is, with the tokens and the width: a one-point model. (It
// may be one partial dQ per 128 keys, which would grow with T as well; nothing measured says so,
// and counting that would refuse long-context jobs on a guess.) Counted wherever cuDNN may be
// taken: a GPU without cuDNN then has this much to spare.
double cudnn_attention_workspace(double micro_batch, double seq_len, double width) {
  return 8 * 4 * micro_batch * seq_len * width;
}

struct Shape {
  bool gpt;
  double V, T, C, H, W, KE;  // vocab, seq_len, width, heads; mlp: width, context x embed
  double rows;               // micro_batch x seq_len
  double logit_rows;         // rows the classifier takes at once (gpt_classifier_rows)
  double att;                // gpt: micro_batch x heads x seq_len^2
  int layers;
};

Shape shape_of(const JobConfig& job) {
  const ModelConfig& m = job.model;
  Shape s;
  s.gpt = m.type == ModelType::kGpt;
  s.V = m.vocab_size;
  s.T = m.seq_len;
  s.C = s.W = m.width;
  s.H = m.heads;
  s.KE = static_cast<double>(m.mlp_context) * m.mlp_embed;
  s.rows = static_cast<double>(job.train.micro_batch) * m.seq_len;
  s.logit_rows =
      s.gpt ? static_cast<double>(gpt_classifier_rows(m, job.train.micro_batch)) : s.rows;
  s.att = static_cast<double>(job.train.micro_batch) * m.heads * s.T * s.T;
  s.layers = m.layers;
  return s;
}

// The float scratch of the cpu backend's emulated bf16 kernels (kernels/cpu/bf16_layers.cc):
// six slots, each grown to the largest operand it ever widened. Slot by slot, the largest of
// what the model's calls put there (linear: output, input, weight, bias / backward: input
// gradient, output gradient, input, weight; attention; cross-entropy; layernorm), for the
// model's own shapes.
double bf16_emulation_floats(const Shape& s) {
  const double N = s.rows;
  if (s.gpt) {
    const double C = s.C, V = s.V, A = s.att, NV = s.logit_rows * V;
    const double slot0 = std::max(4 * N * C, NV);
    const double slot1 = std::max({4 * N * C, A, NV});
    const double slot2 = std::max({4 * C * C, V * C, 4 * N * C});
    const double slot3 = std::max({4 * C * C, V * C, 3 * N * C});
    const double slot4 = A;
    return slot0 + slot1 + slot2 + slot3 + slot4;
  }
  const double W = s.W, V = s.V, KE = s.KE;
  const double square = s.layers >= 2 ? W * W : 0;  // fc.1 onwards: width x width
  const double slot0 = N * std::max({W, V, KE});
  const double slot1 = N * std::max({KE, W, V});
  const double slot2 = std::max({W * KE, square, V * W, N * KE, N * W});
  const double slot3 = std::max({W, V, W * KE, square, V * W});
  return slot0 + slot1 + slot2 + slot3;
}

// ShardedState's pool of unit scratch (ZeRO-2: gradients of the unit being computed and of those
// being reduce-scattered; ZeRO-3 also each unit's gathered parameters, and the next unit's,
// prefetched), replayed over the order in which the model acquires and releases units. The pool
// only grows when no buffer that is free or held by a reduction in flight fits, and takes the
// smallest that does (ties: the oldest) -- ShardedState::take_scratch. Which buffers those are
// follows from program order alone, never from when reductions finish, so the replay is exact.
// Blocks are alike, so a model of up to 4 layers reaches the pool of any deeper one. Computed
// here because ShardedState builds its pool only as a live run goes;
// tests/memory_estimate_test.cc checks the replay against ShardedState::memory_plan() after
// real steps, so a change there that this does not follow fails that test.
class ScratchPool {
 public:
  // unit: the units' sizes in floats; gather: ZeRO-3.
  ScratchPool(std::vector<double> unit, bool gather, bool bf16_params, bool bf16_wire)
      : unit_(std::move(unit)),
        gather_(gather),
        bf16_params_(bf16_params),
        wire_(bf16_wire),
        params_(unit_.size()),
        grads_(unit_.size()) {}

  // ZeRO-3 prefetch (ShardedState::begin_micro_batch, acquire_params): the first training
  // micro-batch records the order of acquires; later ones gather the next unit of that order
  // while the current one is in use.
  void begin_micro_batch() {
    recording_ = order_.empty();
    cursor_ = 0;
  }
  void acquire_params(int u) {
    if (!gather_) return;
    if (recording_) order_.push_back(u);
    int current;
    if (prefetch_unit_ == u) {
      current = prefetch_buf_;
      prefetch_unit_ = -1;
    } else {
      drop_prefetch();
      current = gather(u);
    }
    if (cursor_ < order_.size() && !recording_ && order_[cursor_] == u) {
      if (++cursor_ < order_.size()) {
        prefetch_unit_ = order_[cursor_];
        prefetch_buf_ = gather(prefetch_unit_);
      }
    } else {
      cursor_ = kNone;
    }
    params_[u] = current;
  }
  void release_params(int u) {
    if (gather_) bufs_[params_[u]].state = kFree;
  }
  void acquire_grads(int u) { grads_[u] = take(unit_[u]); }
  void release_grads(int u) {
    int held = grads_[u];
    if (wire_) {
      const int wire = take(std::ceil(unit_[u] / 2));
      bufs_[held].state = kFree;
      held = wire;
    }
    bufs_[held].state = kPending;
  }
  void finish_backward() {
    recording_ = false;
    cursor_ = kNone;
    drop_prefetch();
    for (Buffer& b : bufs_) {
      if (b.state == kPending) b.state = kFree;
    }
  }
  double floats() const {
    double n = 0;
    for (const Buffer& b : bufs_) n += b.floats;
    return n;
  }

 private:
  enum State { kFree, kPending, kInUse };
  struct Buffer {
    double floats;
    State state;
  };
  static constexpr size_t kNone = static_cast<size_t>(-1);

  int take(double n) {
    int best = -1;
    for (int i = 0; i < static_cast<int>(bufs_.size()); ++i) {
      const Buffer& b = bufs_[i];
      if (b.state == kInUse || b.floats < n) continue;
      if (best < 0 || b.floats < bufs_[best].floats) best = i;  // ties: the older, first
    }
    if (best < 0) {
      bufs_.push_back({n, kInUse});
      return static_cast<int>(bufs_.size()) - 1;
    }
    bufs_[best].state = kInUse;
    return best;
  }
  // A unit's parameters in the compute precision.
  int gather(int u) { return take(bf16_params_ ? std::ceil(unit_[u] / 2) : unit_[u]); }
  void drop_prefetch() {
    if (prefetch_unit_ < 0) return;
    bufs_[prefetch_buf_].state = kFree;
    prefetch_unit_ = -1;
  }

  std::vector<double> unit_;
  bool gather_, bf16_params_, wire_;
  std::vector<Buffer> bufs_;
  std::vector<int> params_, grads_;  // by unit: the buffer it holds
  std::vector<int> order_;           // ZeRO-3: acquires of one recorded micro-batch
  bool recording_ = false;
  size_t cursor_ = kNone;
  int prefetch_unit_ = -1, prefetch_buf_ = -1;
};

// The units' order of acquire and release in the models' forward_backward and forward_loss
// (model/gpt_model.cc, model/mlp_model.cc).
void replay_forward_backward(ScratchPool& pool, bool gpt, int units) {
  const int last = units - 1, layers = last - 1;
  pool.begin_micro_batch();
  if (gpt) {
    pool.acquire_params(0);  // held to the end of backward (tied LM head)
    for (int u = 1; u <= last; ++u) {
      pool.acquire_params(u);
      pool.release_params(u);
    }
    pool.acquire_grads(0);
    pool.acquire_params(last);
    pool.acquire_grads(last);
    pool.release_params(last);
    pool.release_grads(last);
    for (int u = layers; u >= 1; --u) {
      pool.acquire_params(u);
      pool.acquire_grads(u);
      pool.release_params(u);
      pool.release_grads(u);
    }
    pool.release_grads(0);
    pool.release_params(0);
    return;
  }
  for (int u = 0; u <= last; ++u) {
    pool.acquire_params(u);
    pool.release_params(u);
  }
  for (int u = last; u >= 1; --u) {
    pool.acquire_params(u);
    pool.acquire_grads(u);
    pool.release_params(u);
    pool.release_grads(u);
  }
  pool.acquire_grads(0);
  pool.release_grads(0);
}

void replay_forward(ScratchPool& pool, bool gpt, int units) {
  const int last = units - 1;
  pool.acquire_params(0);
  if (!gpt) pool.release_params(0);
  for (int u = 1; u <= last; ++u) {
    pool.acquire_params(u);
    pool.release_params(u);
  }
  if (gpt) pool.release_params(0);  // forward_loss keeps the embeddings to the logits
}

double unit_scratch_floats(const JobConfig& job, int ranks, const ModelFootprint& f) {
  const ShardMode mode = job.parallel.shard;
  if (keeps_all_grads(mode)) return 0;  // no unit scratch: reduced in buckets
  if (!std::isfinite(f.param_floats)) return f.param_floats;
  const int layers = std::min(job.model.layers, 4);
  std::vector<double> unit = {f.units[0], f.units[1]};
  for (int l = 2; l <= layers; ++l) unit.push_back(f.units[2]);
  unit.push_back(f.units[3]);
  ScratchPool pool(unit, !keeps_all_params(mode), job.parallel.precision == Precision::kBf16,
                   job.parallel.grad_reduce == Precision::kBf16);
  const bool gpt = job.model.type == ModelType::kGpt;
  const int units = static_cast<int>(unit.size());
  // Two steps of their micro-batches (reductions of one still in flight in the next), and an
  // evaluation between them.
  const int micro_batches = std::max(1, job.train.global_batch / (job.train.micro_batch * ranks));
  for (int step = 0; step < 2; ++step) {
    for (int i = 0; i < std::min(micro_batches, 2); ++i) replay_forward_backward(pool, gpt, units);
    pool.finish_backward();
    replay_forward(pool, gpt, units);
  }
  return pool.floats();
}

// A gpt model's footprint with the cuda backend's attention buffers and classifier scratch.
// `flash`: whether the bf16 flash kernels take this head size.
ModelFootprint cuda_gpt_footprint(const ModelConfig& model, int mb, bool bf16, bool flash) {
  const int T = model.seq_len, H = model.heads;
  const AttentionBuffers attention = flash ? rm::cuda::flash_attention_buffers(mb, T, H)
                                           : materialised_attention_buffers(mb, T, H);
  // Shapes past int's range are refused as unbounded by footprint() itself (its logits check).
  const size_t rows = gpt_classifier_rows(model, mb);  // model.classifier_chunk_tokens
  const bool fits_int = rows <= INT_MAX && model.vocab_size <= INT_MAX - rm::cuda::kVocabPad;
  const size_t classifier = fits_int ? rm::cuda::classifier_scratch_elements(
                                           static_cast<int>(rows), model.width, model.vocab_size)
                                     : 0;
  return bf16 ? GptModel<rm::bf16>::footprint(model, mb, attention, classifier)
              : GptModel<float>::footprint(model, mb, attention, classifier);
}

}  // namespace

MemoryEstimate estimate_memory(const JobConfig& job, int ranks, ComputeKind backend, int hosts,
                               double text_bytes) {
  const bool bf16 = job.parallel.precision == Precision::kBf16;
  const ShardMode mode = job.parallel.shard;
  const bool cuda = backend == ComputeKind::kCuda;
  // The cuda backend's bf16 attention keeps only per-row statistics where the flash kernels
  // take the head size (kernels/cuda/flash_attention_plan.h, CudaLayers::attention_buffers),
  // and its gpt classifier pads the vocabulary in its scratch (kernels/cuda/classifier_plan.h).
  const ModelConfig& model = job.model;
  const int mb = job.train.micro_batch;
  const bool gpt = model.type == ModelType::kGpt;
  const bool flash = cuda && gpt &&
                     rm::cuda::flash_attention_supported(bf16, model.width, model.heads);
  const ModelFootprint f =
      cuda && gpt ? cuda_gpt_footprint(model, mb, bf16, flash)
                  : model_footprint(model, mb, job.parallel.precision);
  const double P = f.param_floats;
  const double shard = std::ceil(P / ranks);  // the largest rank's (shard_counts)
  const bool full_params = keeps_all_params(mode);
  const bool full_grads = keeps_all_grads(mode);

  MemoryEstimate m;
  const double param_floats = full_params ? P : shard;
  m.parameters = param_floats * (4 + (bf16 ? 2 : 0));
  m.gradients = (full_grads ? P : shard) * 4;
  m.optimizer = 2 * (shards_optimizer_state(mode) ? shard : P) * 4;

  const Shape s = shape_of(job);
  const double token_ids = 2 * s.rows * 4;  // the trainer's inputs and targets of a micro-batch
  m.activations = f.arena_bytes + token_ids;
  if (bf16 && !cuda) m.activations += bf16_emulation_floats(s) * 4;
  double device_scratch = 0;
  if (cuda) {
    // Grow-only device scratch (kernels/cuda/cuda_context.h): bf16 attention scores of one
    // sequence (the materialised path only), per-row losses (of the rows the classifier
    // takes at once), the column sums' partials (at most 4C columns, one partial per 256
    // rows) and the embedding backward's token sort (3 int arrays, cub's temporary storage
    // counted as a fourth); and cuDNN's attention workspace where it may run.
    // (An mlp has no attention: nothing of H x T x T whatever model.heads says.)
    device_scratch = (bf16 && gpt && !flash ? s.H * s.T * s.T * 4 : 0) + s.logit_rows * 8 +
                     std::ceil(s.rows / 256) * 4 * model.width * 4 + 4 * s.rows * 4 +
                     (flash ? cudnn_attention_workspace(mb, s.T, s.C) : 0);
    m.activations += device_scratch;
  }

  m.buffers = unit_scratch_floats(job, ranks, f) * 4;
  const double wire = job.parallel.grad_reduce == Precision::kBf16 && full_grads ? std::ceil(P / 2) * 4 : 0;
  m.buffers += wire;
  // The writer's staging copy of this rank's params, m and v slices (async saves); on a GPU
  // also ShardedState's pinned download buffer of the same size.
  const double slices = 3 * shard * 4;
  m.checkpoint = (job.checkpoint.async ? slices : 0) + (cuda ? slices : 0);
  // In-memory checkpoints (checkpoint.memory_every): the rank's /dev/shm segment of two slots of
  // the same slices (worker/memory_checkpoints.h) -- tmpfs pages, host memory however they are
  // named -- and on several hosts the replica of a peer's it keeps.
  // A slot also holds the state's words (kMemoryMetaWords int64s: 64 KiB;
  // tests/memory_estimate_test.cc compares with the segment itself).
  if (job.checkpoint.memory_every > 0) {
    constexpr double kSlotMetaBytes = 64 * 1024;
    m.checkpoint += 2 * (slices + kSlotMetaBytes) * (hosts > 1 ? 2 : 1);
  }
  // After the last step rank 0 streams the model into weights.bin (ShardedState::stream_params):
  // the pieces are the compute's own buffers where the host reads them, so nothing more on the
  // cpu; on a GPU one downloaded piece at a time, the largest unit under ZeRO-3 or a fixed-size
  // piece of the whole buffer otherwise. Counted in every rank's figure (the largest rank's),
  // and once per host by host_for().
  if (cuda) {
    const double largest_unit = *std::max_element(std::begin(f.units), std::end(f.units));
    m.final_weights =
        (full_params ? std::min(P, double(kParamDownloadPiece)) : largest_unit) * 4;
  }

  if (ranks > 1 && !cuda) {
    const double others = ranks - 1.0, part = others / ranks;
    const double fp32_params = param_floats * 4;
    if (full_grads) m.shared_views = part * (m.gradients + wire);  // reduced in buckets
    if (full_params && shards_optimizer_state(mode)) m.shared_views += part * fp32_params;
    if (!full_grads) m.shared_views += others * (m.buffers - wire);  // the unit scratch pool
  }

  // Every rank encodes all of it (each reads its samples from the whole global order).
  m.data = 2 * std::max(0.0, text_bytes);
  m.runtime = ranks > 1 ? kRuntimeMpi : kRuntimeAlone;
  if (cuda) {
    m.runtime += kCudaLibraries + kCudaContext;
    m.device = m.parameters + m.gradients + m.optimizer + f.arena_bytes + device_scratch +
               m.buffers + kCudaContext;
  }
  return m;
}

std::string format_bytes(double bytes) {
  if (!std::isfinite(bytes)) return "unbounded";
  const int u = unit_of(bytes);
  const double v = bytes / std::pow(1024.0, u);
  // Three significant digits: "1.23 GiB", "12.3 GiB", "123 GiB".
  const int decimals = u == 0 || v >= 100 ? 0 : v >= 10 ? 1 : 2;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f %s", decimals, v, kUnits[u]);
  return buf;
}

std::string describe_estimate(const MemoryEstimate& m) {
  const double total = m.total();
  if (!std::isfinite(total)) {
    return "an unbounded amount of memory per rank (the model's sizes overflow)";
  }
  // The categories in the total's unit, with enough decimals that small ones do not read 0.
  const double scale = std::pow(1024.0, unit_of(total));
  auto part = [&](const char* name, double bytes) {
    const double v = bytes / scale;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s %.*f", name, v >= 10 || v == 0 ? 1 : v >= 0.1 ? 2 : 3, v);
    return std::string(buf);
  };
  return "~" + format_bytes(total) + " per rank (" + part("parameters", m.parameters) + ", " +
         part("gradients", m.gradients) + ", " + part("optimizer", m.optimizer) + ", " +
         part("activations", m.activations) + ", " + part("buffers", m.buffers) + ", " +
         part("checkpoint", m.checkpoint) + ", " + part("final weights", m.final_weights) + ", " +
         (m.data > 0 ? part("encoded text", m.data) + ", " : "") + part("runtime", m.runtime) + ")";
}

}  // namespace rm
