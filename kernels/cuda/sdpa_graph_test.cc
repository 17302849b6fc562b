// cuDNN's attention graphs (sdpa_graph.h) checked without cuDNN or a GPU: an interpreter runs
// each graph's operations as cuDNN defines them (matmul over the last two dims, broadcasting
// pointwise operations, reductions onto the output's dims of size 1, reshapes as views of the
// same memory) on host memory laid out with the graph's own dims and strides, and the results
// are compared with the cpu attention. A wrong stride, a swapped operand, a mask on the wrong
// axis or a missing scale fails here. What only a GPU checks: that cuDNN's engines take the graph
// (cudnn_sdpa.h; FlashAttentionTest.CudnnAttentionMatchesTheFlashKernels).
#include "kernels/cuda/sdpa_graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cpu/attention.h"

namespace rm::cuda::sdpa {
namespace {

using Dims = std::array<int64_t, 4>;

int64_t elements(const Dims& d) {
  return d[0] * d[1] * d[2] * d[3];
}

// Whether strides lay the dims out densely without two indices sharing an element.
bool dense(const Dims& dims, const Dims& strides) {
  std::vector<std::pair<int64_t, int64_t>> axes;  // (stride, dim) of the dims > 1
  for (int i = 0; i < 4; ++i) {
    if (dims[i] > 1) axes.emplace_back(strides[i], dims[i]);
  }
  std::sort(axes.begin(), axes.end());
  int64_t expect = 1;
  for (const auto& [stride, dim] : axes) {
    if (stride != expect) return false;
    expect *= dim;
  }
  return true;
}

// Runs a Graph on host floats. Bound tensors view the caller's arrays; intermediates get arrays
// of their own (with their strides when those are dense, else row-major: the front end gives one
// intermediate strides that alias, which cuDNN ignores for virtual tensors).
class Interpreter {
 public:
  explicit Interpreter(const Graph& g) : g_(g) {}

  void bind(Role role, float* data) { bound_[g_.bound(role).uid] = data; }

  void run() {
    for (const Tensor& t : g_.tensors) {
      View v{nullptr, t.dims, t.strides, t.type};
      if (t.by_value) {
        scalars_[t.uid] = t.value;
        v.data = &scalars_[t.uid];
      } else if (!t.is_virtual) {
        ASSERT_TRUE(bound_.count(t.uid)) << "tensor " << t.name << " is not bound";
        v.data = bound_[t.uid];
      }
      views_[t.uid] = v;
    }
    for (const Op& op : g_.ops) {
      for (int64_t in : op.inputs) {
        ASSERT_TRUE(views_[in].data != nullptr || written_.count(in))
            << op.name << " reads " << g_.tensor(in).name << " before it is written";
      }
      ASSERT_FALSE(written_.count(op.output)) << g_.tensor(op.output).name << " written twice";
      View& y = views_[op.output];
      if (op.kind == OpKind::kReshape) {
        const View& x = views_.at(op.inputs[0]);
        ASSERT_EQ(elements(x.dims), elements(y.dims)) << op.name;
        y.data = x.data;  // a view: y's strides over x's memory
      } else if (y.data == nullptr) {
        if (!dense(y.dims, y.strides)) y.strides = row_major(y.dims);
        storage_[op.output].assign(static_cast<size_t>(elements(y.dims)), 0.0f);
        y.data = storage_[op.output].data();
      }
      switch (op.kind) {
        case OpKind::kMatmul:
          matmul(op);
          break;
        case OpKind::kPointwise:
          pointwise(op);
          break;
        case OpKind::kReduction:
          reduction(op);
          break;
        case OpKind::kReshape:
          break;
      }
      written_.insert(op.output);
    }
  }

 private:
  struct View {
    float* data;
    Dims dims, strides;
    DataType type;
    float& at(const Dims& i) const {
      int64_t off = 0;
      for (int a = 0; a < 4; ++a) off += (dims[a] == 1 ? 0 : i[a]) * strides[a];
      return data[off];
    }
    void store(const Dims& i, double value) const {
      float f = static_cast<float>(value);
      if (type == DataType::kBf16) f = to_float(to_bf16(f));
      at(i) = f;
    }
  };

  static Dims row_major(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }

  template <typename F>
  static void each(const Dims& d, F f) {
    for (int64_t a = 0; a < d[0]; ++a)
      for (int64_t b = 0; b < d[1]; ++b)
        for (int64_t c = 0; c < d[2]; ++c)
          for (int64_t e = 0; e < d[3]; ++e) f(Dims{a, b, c, e});
  }

  void matmul(const Op& op) {
    const View& a = views_.at(op.inputs[0]);
    const View& b = views_.at(op.inputs[1]);
    const View& c = views_.at(op.output);
    ASSERT_EQ(a.dims[3], b.dims[2]) << op.name;
    ASSERT_EQ(c.dims[2], a.dims[2]) << op.name;
    ASSERT_EQ(c.dims[3], b.dims[3]) << op.name;
    each(c.dims, [&](const Dims& i) {
      double sum = 0.0;
      for (int64_t k = 0; k < a.dims[3]; ++k) {
        sum += static_cast<double>(a.at({i[0], i[1], i[2], k})) * b.at({i[0], i[1], k, i[3]});
      }
      c.store(i, sum);
    });
  }

  void pointwise(const Op& op) {
    const View& y = views_.at(op.output);
    std::vector<const View*> in;
    for (int64_t uid : op.inputs) in.push_back(&views_.at(uid));
    for (const View* x : in) {
      for (int a = 0; a < 4; ++a) {
        ASSERT_TRUE(x->dims[a] == y.dims[a] || x->dims[a] == 1) << op.name << " axis " << a;
      }
    }
    each(y.dims, [&](const Dims& i) {
      auto arg = [&](size_t n) { return static_cast<double>(in.at(n)->at(i)); };
      double r = 0.0;
      switch (op.pointwise) {
        case PointwiseMode::kAdd:
          r = arg(0) + arg(1);
          break;
        case PointwiseMode::kSub:
          r = arg(0) - arg(1);
          break;
        case PointwiseMode::kMul:
          r = arg(0) * arg(1);
          break;
        case PointwiseMode::kDiv:
          r = arg(0) / arg(1);
          break;
        case PointwiseMode::kExp:
          r = std::exp(arg(0));
          break;
        case PointwiseMode::kLog:
          r = std::log(arg(0));
          break;
        case PointwiseMode::kIdentity:
          r = arg(0);
          break;
        case PointwiseMode::kGenIndex:
          r = static_cast<double>(i.at(op.axis));
          break;
        case PointwiseMode::kCmpGe:
          r = arg(0) >= arg(1) ? 1.0 : 0.0;
          break;
        case PointwiseMode::kBinarySelect:
          r = arg(2) != 0.0 ? arg(0) : arg(1);
          break;
      }
      y.store(i, r);
    });
  }

  void reduction(const Op& op) {
    const View& x = views_.at(op.inputs[0]);
    const View& y = views_.at(op.output);
    const bool max = op.reduce == ReduceMode::kMax;
    each(y.dims, [&](const Dims& i) { y.at(i) = max ? -INFINITY : 0.0f; });
    std::map<int64_t, double> acc;  // double sums, stored once at the end
    each(x.dims, [&](const Dims& i) {
      Dims o = i;
      for (int a = 0; a < 4; ++a) {
        if (y.dims[a] == 1) o[a] = 0;
      }
      float& dst = y.at(o);
      if (max) {
        dst = std::max(dst, x.at(i));
      } else {
        acc[&dst - y.data] += x.at(i);
      }
    });
    for (const auto& [off, sum] : acc) y.data[off] = static_cast<float>(sum);
  }

  const Graph& g_;
  std::map<int64_t, float*> bound_;
  std::map<int64_t, float> scalars_;
  std::map<int64_t, View> views_;
  std::map<int64_t, std::vector<float>> storage_;
  std::set<int64_t> written_;
};

std::vector<float> random_bf16(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = to_float(to_bf16(dist(rng)));
  return v;
}

float max_abs(const std::vector<float>& v) {
  float m = 0.0f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

struct Shape {
  int B, Tn, C, H;
};

class SdpaGraphs : public ::testing::TestWithParam<Shape> {};

// The forward graph's O and Stats against the cpu attention and a log-sum-exp in double; the
// backward graph's dQ, dK, dV (both variants) against the cpu attention's backward.
TEST_P(SdpaGraphs, ComputeTheCpuAttentionAndItsGradient) {
  const auto [B, Tn, C, H] = GetParam();
  const size_t n_qkv = static_cast<size_t>(B) * Tn * 3 * C;
  const size_t n_out = static_cast<size_t>(B) * Tn * C;
  const size_t rows = static_cast<size_t>(B) * H * Tn;
  const std::vector<float> qkv = random_bf16(n_qkv, 7, 1.0f);
  const std::vector<float> dout = random_bf16(n_out, 8, 1.0f);
  const SdpaOffsets off = sdpa_offsets(C);

  std::vector<float> out(n_out, NAN), stats(rows, NAN);
  const Graph fwd = sdpa_forward_graph(B, Tn, C, H);
  Interpreter f(fwd);
  std::vector<float> qkv_mut = qkv;  // bound pointers are non-const; nothing writes them
  f.bind(Role::kQ, qkv_mut.data());
  f.bind(Role::kK, qkv_mut.data() + off.k);
  f.bind(Role::kV, qkv_mut.data() + off.v);
  f.bind(Role::kO, out.data());
  f.bind(Role::kStats, stats.data());
  f.run();
  if (HasFatalFailure()) return;

  std::vector<float> ref_out(n_out), att(static_cast<size_t>(B) * H * Tn * Tn);
  cpu::attention_forward(ref_out.data(), att.data(), qkv.data(), B, Tn, C, H);
  const float out_tol = 0.02f * max_abs(ref_out);  // P and O rounded to bf16
  for (size_t i = 0; i < n_out; ++i) ASSERT_NEAR(out[i], ref_out[i], out_tol) << "O " << i;

  const int hs = C / H;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      for (int i = 0; i < Tn; ++i) {
        double m = -INFINITY, sum = 0.0;
        std::vector<double> s(static_cast<size_t>(i) + 1);
        for (int j = 0; j <= i; ++j) {
          double dot = 0.0;
          for (int d = 0; d < hs; ++d) {
            const size_t base = static_cast<size_t>(b) * Tn * 3 * C + static_cast<size_t>(h) * hs;
            dot += static_cast<double>(qkv[base + static_cast<size_t>(i) * 3 * C + d]) *
                   qkv[base + static_cast<size_t>(j) * 3 * C + C + d];
          }
          s[static_cast<size_t>(j)] = dot * scale;
          m = std::max(m, s[static_cast<size_t>(j)]);
        }
        for (double x : s) sum += std::exp(x - m);
        const size_t row = (static_cast<size_t>(b) * H + h) * Tn + i;
        ASSERT_NEAR(stats[row], m + std::log(sum), 1e-4)
            << "Stats b" << b << " h" << h << " i" << i;
      }
    }
  }

  std::vector<float> ref_dqkv(n_qkv), scratch(att.size());
  cpu::attention_backward(ref_dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B,
                          Tn, C, H);
  const float grad_tol = 0.03f * max_abs(ref_dqkv);  // P^T, dS^T and the outputs in bf16
  for (bool deterministic : {true, false}) {
    SCOPED_TRACE(deterministic ? "deterministic" : "dQ accumulated");
    const Graph bwd = sdpa_backward_graph(B, Tn, C, H, deterministic);
    std::vector<float> dqkv(n_qkv, NAN), softmax_sum(rows, NAN);
    std::vector<float> accum(sdpa_dq_accum_floats(B, Tn, C, H, deterministic), NAN);
    std::vector<float> dout_mut = dout;
    Interpreter r(bwd);
    r.bind(Role::kQ, qkv_mut.data());
    r.bind(Role::kK, qkv_mut.data() + off.k);
    r.bind(Role::kV, qkv_mut.data() + off.v);
    r.bind(Role::kO, out.data());
    r.bind(Role::kDO, dout_mut.data());
    r.bind(Role::kStats, stats.data());
    r.bind(Role::kSoftmaxSum, softmax_sum.data());
    r.bind(Role::kDQ, dqkv.data());
    r.bind(Role::kDK, dqkv.data() + off.k);
    r.bind(Role::kDV, dqkv.data() + off.v);
    if (!deterministic) r.bind(Role::kDQAccum, accum.data());
    r.run();
    if (HasFatalFailure()) return;
    for (size_t i = 0; i < n_qkv; ++i) {
      ASSERT_NEAR(dqkv[i], ref_dqkv[i], grad_tol)
          << "dqkv " << i << " (" << (i % (3 * C)) / C << " = q, k, v)";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SdpaGraphs,
                         ::testing::Values(Shape{2, 7, 16, 2}, Shape{1, 9, 48, 3},
                                           Shape{3, 2, 8, 1}),
                         [](const ::testing::TestParamInfo<Shape>& p) {
                           return "B" + std::to_string(p.param.B) + "_T" +
                                  std::to_string(p.param.Tn) + "_C" + std::to_string(p.param.C) +
                                  "_H" + std::to_string(p.param.H);
                         });

// What the caller binds stays inside the buffers it passes: Q, K, V (and dQ, dK, dV) inside
// qkv[B,Tn,3C] from their offsets, O and dO inside [B,Tn,C], the row tensors [B,H,Tn]. And no
// tensor of B*H*Tn*Tn elements is bound to memory: the scores exist only inside cuDNN's kernels.
TEST(SdpaGraph, BoundTensorsStayInsideTheCallersBuffersAndNoScoresAreInMemory) {
  const int B = 4, Tn = 64, C = 96, H = 3;
  const SdpaOffsets off = sdpa_offsets(C);
  const int64_t qkv = int64_t{B} * Tn * 3 * C, out = int64_t{B} * Tn * C,
                rows = int64_t{B} * H * Tn;
  const std::map<Role, std::pair<int64_t, int64_t>> extent = {
      // offset, buffer size
      {Role::kQ, {0, qkv}},           {Role::kK, {off.k, qkv}},  {Role::kV, {off.v, qkv}},
      {Role::kDQ, {0, qkv}},          {Role::kDK, {off.k, qkv}}, {Role::kDV, {off.v, qkv}},
      {Role::kO, {0, out}},           {Role::kDO, {0, out}},     {Role::kStats, {0, rows}},
      {Role::kSoftmaxSum, {0, rows}}, {Role::kDQAccum, {0, out}}};
  for (const Graph& g : {sdpa_forward_graph(B, Tn, C, H), sdpa_backward_graph(B, Tn, C, H, true),
                         sdpa_backward_graph(B, Tn, C, H, false)}) {
    std::set<Role> seen;
    for (const Tensor& t : g.tensors) {
      if (t.is_virtual || t.by_value) {
        EXPECT_EQ(t.role, Role::kNone) << t.name;
        continue;
      }
      ASSERT_NE(t.role, Role::kNone) << t.name << " is in memory but no caller binds it";
      EXPECT_TRUE(seen.insert(t.role).second) << t.name << ": two tensors of one role";
      EXPECT_LT(elements(t.dims), int64_t{B} * H * Tn * Tn) << t.name;
      int64_t last = 0;
      for (int a = 0; a < 4; ++a) last += (t.dims[a] - 1) * t.strides[a];
      const auto [offset, size] = extent.at(t.role);
      EXPECT_LT(offset + last, size) << t.name << " reaches past its buffer";
      EXPECT_EQ(t.type == DataType::kFloat,
                t.role == Role::kStats || t.role == Role::kSoftmaxSum || t.role == Role::kDQAccum)
          << t.name;
    }
  }
  // uids are 1..n in order, as Graph::tensor() assumes.
  const Graph g = sdpa_backward_graph(B, Tn, C, H, false);
  for (size_t i = 0; i < g.tensors.size(); ++i) EXPECT_EQ(g.tensors[i].uid, int64_t(i) + 1);
}

TEST(SdpaGraph, ShapesCudnnDoesNotTakeAreRefusedByName) {
  EXPECT_TRUE(sdpa_shape_supported(16, 1024, 768, 12));  // GPT-2 124M: head size 64
  EXPECT_TRUE(sdpa_shape_supported(1, 2, 1024, 8));      // head size 128
  EXPECT_FALSE(sdpa_shape_supported(1, 1024, 12 * 136, 12));
  EXPECT_FALSE(sdpa_shape_supported(1, 1024, 12 * 12, 12));  // head size 12: not a multiple of 8
  EXPECT_FALSE(sdpa_shape_supported(1, 1, 768, 12));
  EXPECT_FALSE(sdpa_shape_supported(0, 8, 768, 12));
  EXPECT_FALSE(sdpa_shape_supported(1, 8, 770, 12));
  try {
    sdpa_forward_graph(1, 8, 12 * 12, 12);
    FAIL() << "head size 12 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("C=144 H=12"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sdpa_backward_graph(1, 1, 768, 12, true), std::invalid_argument);
}

}  // namespace
}  // namespace rm::cuda::sdpa
