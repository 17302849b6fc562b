// The stream/event ordering the GPU path relies on, checked on the host (mpirun -np 2): a
// ShardedState runs on a Compute and a Communicator that behave like the cuda/nccl pair as far
// as ordering goes (testing/order_checking_compute.h, testing/order_checking_communicator.h), and
// every compute call that touches a buffer under a collective the host has not seen complete, or
// a download not yet fenced, is recorded as a violation.
//
// For every shard mode x parallel.grad_reduce x parallel.overlap x precision, a few steps of
// two micro-batches each are driven through ParamAccess in a GPT's order of acquires and
// releases (model/gpt_model.cc), reading parameters and accumulating gradients with compute
// calls as kernels would. Checkpoints are taken as the trainer takes them: the view after an
// optimizer step, the next step's forward and backward run before `ready` is called, and only
// then the next optimizer step (the fence runs on another thread, as the writer's). Work::test()
// answers "not yet" a few times more than the real one, more on rank 1 than on rank 0, as on a
// busy GPU, so that reductions stay in flight across later calls. The test asserts that
//  - no call raced with a collective or a download, and the run did make calls inside both
//    kinds of window (wherever the mode overlaps reductions with backward),
//  - the staged slices hold exactly what ShardedState had when the view was taken (params
//    against full_params() read just before it; adam_m and adam_v against the reference run),
//  - norms, staged slices and final parameters equal, bit for bit, the same run on the plain
//    cpu Compute and the unwrapped communicator (the same arithmetic on other staging paths).
// Then it shows that the checker bites: wrong client sequences produce violations, and a read
// of a download before its fence sees stale bytes.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "collectives/mpi/mpi_communicator.h"
#include "kernels/compute_factory.h"
#include "model/model.h"
#include "testing/order_checking_communicator.h"
#include "testing/order_checking_compute.h"
#include "testing/order_ledger.h"
#include "tests/small_gpt_job.h"
#include "worker/sharded_state.h"

namespace rm {
namespace {

constexpr int kSteps = 4;
constexpr int kMicroBatches = 2;
constexpr double kLr = 1e-2;
constexpr uint64_t kSeed = 7;
bool checkpoint_after(int step) { return step % 2 == 0 && step + 1 < kSteps; }

JobConfig small_job(const std::string& shard, const std::string& grad_reduce, bool overlap) {
  JobConfig job = test::small_gpt_job(shard);
  job.parallel.grad_reduce = choice_of<Precision>(grad_reduce);
  job.parallel.overlap = overlap;
  return job;
}

std::unique_ptr<Communicator> mpi_world() {
  CommOptions options;
  options.abort_on_error = false;
  options.timeout_s = 60;
  return make_mpi_communicator(MPI_COMM_WORLD, options);
}

std::unique_ptr<Compute> cpu_compute() { return make_compute(ComputeKind::kCpu, {}); }

// The device-like pair over the cpu backend and `world`, reporting to one ledger (test_lag as
// OrderCheckingCommunicator's).
struct Checked {
  explicit Checked(Communicator& world, int test_lag = 0)
      : compute(*cpu, ledger), comm(world, ledger, test_lag) {}
  OrderLedger ledger;
  std::unique_ptr<Compute> cpu = cpu_compute();
  OrderCheckingCompute compute;
  OrderCheckingCommunicator comm;
};

// Elements whose bits differ (all of them when the sizes do).
template <typename T>
size_t bit_differences(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return std::max(a.size(), b.size());
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  return n;
}

std::string joined(const std::vector<std::string>& lines, size_t most = 20) {
  std::string s;
  for (size_t i = 0; i < lines.size() && i < most; ++i) s += "  " + lines[i] + "\n";
  if (lines.size() > most) s += "  ... and " + std::to_string(lines.size() - most) + " more\n";
  return s;
}

void print_on_rank0(const char* title, const std::vector<std::string>& lines) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) std::printf("[checker] %s:\n%s", title, joined(lines, 4).c_str());
}

bool any_contains(const std::vector<std::string>& lines, const std::string& a,
                  const std::string& b) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
    return l.find(a) != std::string::npos && l.find(b) != std::string::npos;
  });
}

// ---- The model's side of ParamAccess, without kernels ----------------------------------------

// A GPT's acquires and releases (model/gpt_model.cc: unit 0 holds the tied embedding, read
// again by the head and released last; the final norm's unit is the last), each parameter unit
// read as a kernel reads it (a compute copy into device memory) and each gradient accumulated as
// a kernel writes it (upload into device memory, then add_inplace into the acquired buffer).
class GptShapedPass {
 public:
  GptShapedPass(Compute& compute, const Model& model, int rank)
      : compute_(compute), units_(model.units()), rank_(rank),
        param_bytes_(model.precision() == Precision::kBf16 ? sizeof(bf16) : sizeof(float)) {
    size_t largest = 0;
    for (const ParamUnit& u : units_) largest = std::max(largest, u.size());
    read_back_ = DeviceArray<float>(compute, largest);
    computed_ = DeviceArray<float>(compute, largest);
    host_.resize(largest);
  }

  void forward_backward(ParamAccess& access, int step, int micro) {
    const int last = static_cast<int>(units_.size()) - 1;
    // Forward.
    const void* p0 = access.acquire_params(0);
    read(p0, 0);
    for (int u = 1; u <= last; ++u) {
      read(access.acquire_params(u), u);
      access.release_params(u);
    }
    read(p0, 0);  // the logits, through the tied embedding
    // Backward, units released from the last to the first.
    float* g0 = access.acquire_grads(0);
    accumulate(g0, 0, step, micro, /*part=*/0);  // the head's share of the embedding gradient
    for (int u = last; u >= 1; --u) {
      read(access.acquire_params(u), u);
      accumulate(access.acquire_grads(u), u, step, micro, 0);
      access.release_params(u);
      access.release_grads(u);
    }
    accumulate(g0, 0, step, micro, /*part=*/1);  // the embedding's own share
    access.release_grads(0);
    access.release_params(0);
  }

 private:
  void read(const void* params, int u) {
    compute_.copy(read_back_.data(), params, units_[u].size() * param_bytes_);
  }
  // Rank r's gradient of element i: +-(1 + k/1024) / 64 -- exact in fp32, mostly off the bf16
  // grid, different for every step, micro-batch, part and rank.
  void accumulate(float* grads, int u, int step, int micro, int part) {
    const ParamUnit& unit = units_[u];
    for (size_t i = unit.begin; i < unit.end; ++i) {
      const size_t k = i * 7 + static_cast<size_t>(rank_ * 5 + step * 3 + micro * 11 + part * 2);
      host_[i - unit.begin] =
          std::ldexp(1.0f + static_cast<float>(k % 13) / 1024.0f, -6) * (k % 3 == 0 ? -1.0f : 1.0f);
    }
    compute_.upload(computed_.data(), host_.data(), unit.size() * sizeof(float));
    compute_.add_inplace(grads, computed_.data(), unit.size());
  }

  Compute& compute_;
  const std::vector<ParamUnit>& units_;
  int rank_;
  size_t param_bytes_;
  DeviceArray<float> read_back_, computed_;
  std::vector<float> host_;
};

// ---- One training run -------------------------------------------------------------------------

struct Trace {
  std::vector<double> norms;
  std::vector<std::vector<float>> staged;  // per checkpoint: params, adam_m, adam_v slices
  std::vector<float> final_params;
};

// What a checkpoint writer reads once `ready` has returned; the params slice must be what
// full_params() said just before the view was taken.
std::vector<float> read_staged(const ShardedState::CheckpointView& view,
                               const std::vector<float>& params_at_view, const char* label) {
  std::vector<float> all;
  for (const ShardSlice& s : view.slices) {
    const std::vector<float> slice(s.data, s.data + (s.end - s.begin));
    if (s.buffer == "params") {
      const std::vector<float> want(params_at_view.begin() + s.begin,
                                    params_at_view.begin() + s.end);
      EXPECT_EQ(bit_differences(slice, want), 0u)
          << label << ": staged params differ from the parameters at view time";
    }
    all.insert(all.end(), slice.begin(), slice.end());
  }
  return all;
}

Trace train(const JobConfig& job, Precision precision, Compute& compute, Communicator& comm,
            const char* label) {
  auto model = make_model(job.model, 1, &compute, precision);
  ShardedState state(job, *model, comm);
  state.init_params(kSeed);
  GptShapedPass pass(compute, *model, comm.rank());
  Trace trace;
  ShardedState::CheckpointView view;
  std::vector<float> params_at_view;
  for (int step = 0; step < kSteps; ++step) {
    state.begin_step();
    for (int micro = 0; micro < kMicroBatches; ++micro) {
      state.begin_micro_batch(micro == kMicroBatches - 1);
      pass.forward_backward(state, step, micro);
    }
    state.finish_backward();
    if (view.ready) {
      // As Checkpointing::wait_staged: the save had this step's forward and backward to finish,
      // and the writer's thread runs the fence.
      std::thread writer(view.ready);
      writer.join();
      trace.staged.push_back(read_staged(view, params_at_view, label));
      view = {};
    }
    trace.norms.push_back(state.optimizer_step(kLr).grad_norm);
    if (checkpoint_after(step)) {
      params_at_view = state.full_params();  // collective, and a download: before the view
      view = state.checkpoint_view();
    }
  }
  trace.final_params = state.full_params();
  return trace;
}

// ---- Every mode, against the plain cpu run ---------------------------------------------------

using Mode = std::tuple<const char*, const char*, bool, Precision>;

class StreamOrder : public testing::TestWithParam<Mode> {};

TEST_P(StreamOrder, ShardedStateKeepsTheDeviceOrderingContract) {
  const auto& [shard, grad_reduce, overlap, precision] = GetParam();
  const JobConfig job = small_job(shard, grad_reduce, overlap);
  auto world = mpi_world();

  auto plain = cpu_compute();
  const Trace want = train(job, precision, *plain, *world, "cpu reference");

  // Completions seen late, and later on rank 1 than on rank 0, as from a busy GPU.
  Checked checked(*world, /*test_lag=*/1 + 2 * world->rank());
  const Trace got = train(job, precision, checked.compute, checked.comm, "order-checking run");

  const std::vector<std::string> violations = checked.ledger.violations();
  EXPECT_TRUE(violations.empty()) << violations.size() << " ordering violations:\n"
                                  << joined(violations);
  EXPECT_EQ(checked.ledger.collectives_in_flight(), 0u) << "collectives never observed complete";
  // The windows were exercised: the backward after each view ran beside its downloads, and
  // wherever reductions overlap backward, kernels ran beside them.
  const OrderLedger::Exposure exposure = checked.ledger.exposure();
  RecordProperty("beside_collectives", static_cast<int>(exposure.beside_collectives));
  RecordProperty("beside_downloads", static_cast<int>(exposure.beside_downloads));
  EXPECT_GT(exposure.beside_downloads, 0u);
  const bool per_unit = std::string(shard) == "gradients" || std::string(shard) == "full";
  if (overlap || per_unit) {
    EXPECT_GT(exposure.beside_collectives, 0u);
  }
  ASSERT_EQ(got.staged.size(), want.staged.size());
  for (size_t i = 0; i < got.staged.size(); ++i) {
    EXPECT_EQ(bit_differences(got.staged[i], want.staged[i]), 0u)
        << "checkpoint " << i << ": staged params/adam_m/adam_v differ from the cpu run's";
  }
  EXPECT_EQ(bit_differences(got.norms, want.norms), 0u) << "gradient norms";
  EXPECT_EQ(bit_differences(got.final_params, want.final_params), 0u) << "final parameters";
}

std::string mode_name(const testing::TestParamInfo<Mode>& info) {
  const auto& [shard, grad_reduce, overlap, precision] = info.param;
  return std::string(shard) + "_reduce" + grad_reduce + (overlap ? "_overlap" : "_serial") +
         "_params" + choice_name(precision);
}

INSTANTIATE_TEST_SUITE_P(AllModes, StreamOrder,
                         testing::Combine(testing::Values("none", "optimizer", "gradients", "full"),
                                          testing::Values("fp32", "bf16"), testing::Bool(),
                                          testing::Values(Precision::kFp32, Precision::kBf16)),
                         mode_name);

// ---- The checker bites -------------------------------------------------------------------------

// A client that touches a buffer after issuing an all_reduce on it, before the host has seen the
// reduction complete: a write and a read are both races on a GPU. After wait() it is fine.
TEST(StreamOrderChecker, CatchesAccessToABufferUnderACollective) {
  auto world = mpi_world();
  Checked c(*world);
  const size_t n = 1024;
  float* buf = static_cast<float*>(c.comm.allocate(n * sizeof(float)));

  auto work = c.comm.all_reduce(buf, n, DType::kFloat32, ReduceOp::kSum);
  c.compute.zero(buf + 512, 256 * sizeof(float));  // wrong: the reduction is in flight
  c.compute.sum_squares(buf, 16);                  // wrong too: the values are changing
  work->wait();
  c.compute.zero(buf, n * sizeof(float));  // fine: the host has seen it complete
  c.compute.sum_squares(buf, n);

  const std::vector<std::string> v = c.ledger.violations();
  print_on_rank0("access under an all_reduce", v);
  ASSERT_EQ(v.size(), 2u) << joined(v);
  EXPECT_TRUE(any_contains(v, "zero writes [comm.allocate#1+2048, 1024 bytes)",
                           "all_reduce(seq=1) on [comm.allocate#1+0, 4096 bytes) is in flight"))
      << joined(v);
  EXPECT_TRUE(any_contains(v, "sum_squares reads [comm.allocate#1+0, 64 bytes)", "all_reduce"))
      << joined(v);
  EXPECT_EQ(c.ledger.collectives_in_flight(), 0u);
}

// progress() tells the host nothing, nor does a test() that said "not yet": the buffer stays
// in flight until test() says true.
TEST(StreamOrderChecker, OnlyAnObservedCompletionEndsACollective) {
  auto world = mpi_world();
  Checked c(*world);
  const std::vector<size_t> counts(c.comm.size(), 64);
  float* buf = static_cast<float*>(c.comm.allocate(64 * c.comm.size() * sizeof(float)));

  auto work = c.comm.reduce_scatter(buf, counts, DType::kBFloat16, ReduceOp::kSum);
  c.comm.progress();  // progress alone tells the host nothing
  c.compute.cast(buf + 32, reinterpret_cast<const bf16*>(buf), 8);  // both inside its 256 bytes
  while (!work->test()) {
  }
  c.compute.cast(buf + 32, reinterpret_cast<const bf16*>(buf), 8);  // fine now

  const std::vector<std::string> v = c.ledger.violations();
  print_on_rank0("access after progress() only", v);
  ASSERT_EQ(v.size(), 2u) << joined(v);  // the cast's read and its write
  EXPECT_TRUE(any_contains(v, "cast(bf16->f32) reads", "reduce_scatter(seq=1)")) << joined(v);
  EXPECT_TRUE(any_contains(v, "cast(bf16->f32) writes", "reduce_scatter(seq=1)")) << joined(v);
}

// Two operations in flight on overlapping bytes (checked on the ledger alone: the real
// communicator is not to be given such a sequence).
TEST(StreamOrderChecker, CatchesOverlappingCollectivesInFlight) {
  OrderLedger ledger;
  std::vector<float> buf(64);
  ledger.name_memory(buf.data(), 256, "buf");
  const uint64_t first = ledger.begin_collective("all_reduce(seq=1)", buf.data(), 128);
  ledger.begin_collective("all_gather(seq=2)", buf.data() + 32, 128);  // disjoint: fine
  ledger.end_collective(first);
  ledger.begin_collective("broadcast(seq=3)", buf.data() + 16, 64);  // fine: seq=1 observed
  ledger.begin_collective("reduce_scatter(seq=4)", buf.data() + 40, 8);
  const std::vector<std::string> v = ledger.violations();
  ASSERT_EQ(v.size(), 1u) << joined(v);
  EXPECT_EQ(v[0],
            "reduce_scatter(seq=4) on [buf+160, 8 bytes) is issued while all_gather(seq=2) on "
            "[buf+128, 128 bytes) is in flight");
}

// download_async copies at the fence: a host read before it sees what the staging held (stale);
// a compute write to the source before it is a race, and the fence then copies the new values.
TEST(StreamOrderChecker, EarlyReadOfADownloadSeesStaleBytes) {
  auto world = mpi_world();
  Checked c(*world);
  const size_t n = 256;
  std::vector<float> before(n), after(n);
  for (size_t i = 0; i < n; ++i) {
    before[i] = static_cast<float>(i + 1);
    after[i] = -static_cast<float>(i + 1);
  }
  DeviceArray<float> src(c.compute, n);
  float* staging = static_cast<float*>(c.compute.allocate_host(n * sizeof(float)));
  c.compute.upload(src.data(), before.data(), n * sizeof(float));

  // Right: fence, then read.
  c.compute.download_async(staging, src.data(), n * sizeof(float));
  std::function<void()> ready = c.compute.downloads_fence();
  EXPECT_EQ(staging[0], 0.0f) << "read before the fence: the staging is still as allocated";
  ready();
  EXPECT_EQ(bit_differences(std::vector<float>(staging, staging + n), before), 0u);
  EXPECT_TRUE(c.ledger.violations().empty()) << joined(c.ledger.violations());

  // Wrong: overwrite the source, and read the staging through the compute, before the fence.
  c.compute.download_async(staging, src.data(), n * sizeof(float));
  ready = c.compute.downloads_fence();
  c.compute.upload(src.data(), after.data(), n * sizeof(float));
  c.compute.upload(src.data(), staging, sizeof(float));
  ready();
  const std::vector<std::string> v = c.ledger.violations();
  print_on_rank0("download hazards", v);
  EXPECT_EQ(staging[1], after[1]) << "the late side stream copied the overwritten source";
  EXPECT_TRUE(any_contains(v, "upload writes [compute.allocate#1+0, 1024 bytes)",
                           "download_async#2 still reads [compute.allocate#1+0, 1024 bytes)"))
      << joined(v);
  EXPECT_TRUE(any_contains(v, "upload reads host [allocate_host#1+0, 4 bytes)",
                           "download_async#2 still fills"))
      << joined(v);
  c.compute.release_host(staging);
}

// The trainer's order broken on purpose: an optimizer step before the checkpoint's `ready`. The
// update races with the staging downloads, and the staged params are the updated ones.
TEST(StreamOrderChecker, CatchesAnOptimizerStepBeforeTheCheckpointIsStaged) {
  const JobConfig job = small_job("optimizer", "fp32", true);
  auto world = mpi_world();
  Checked c(*world);
  auto model = make_model(job.model, 1, &c.compute, Precision::kFp32);
  ShardedState state(job, *model, c.comm);
  state.init_params(kSeed);
  GptShapedPass pass(c.compute, *model, c.comm.rank());
  auto step = [&](int s) {
    state.begin_step();
    state.begin_micro_batch(true);
    pass.forward_backward(state, s, 0);
    state.finish_backward();
    state.optimizer_step(kLr);
  };
  step(0);
  const std::vector<float> at_view = state.full_params();
  ShardedState::CheckpointView view = state.checkpoint_view();
  step(1);  // wrong: `ready` belongs before this step's optimizer_step
  view.ready();

  const std::vector<std::string> v = c.ledger.violations();
  print_on_rank0("optimizer step before ready", v);
  EXPECT_TRUE(any_contains(v, "adamw_update writes", "download_async#1 still reads")) << joined(v);
  EXPECT_TRUE(any_contains(v, "adamw_update writes", "download_async#2 still reads")) << joined(v);
  EXPECT_TRUE(any_contains(v, "all_gather", "download_async#1 still reads")) << joined(v);
  const ShardSlice& params = view.slices[0];
  const std::vector<float> staged(params.data, params.data + (params.end - params.begin));
  const std::vector<float> want(at_view.begin() + params.begin, at_view.begin() + params.end);
  EXPECT_GT(bit_differences(staged, want), 0u) << "the race shows in the data";
}

}  // namespace
}  // namespace rm
