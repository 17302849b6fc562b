#include "kernels/cuda/sdpa_graph.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

namespace rm::cuda::sdpa {
namespace {

using Dims = std::array<int64_t, 4>;

// Appends tensors (uids 1, 2, ... in order of creation) and operations.
class Builder {
 public:
  explicit Builder(Graph& graph) : g_(graph) {}

  int64_t tensor(std::string name, DataType type, Dims dims, Dims strides, Role role) {
    Tensor t;
    t.name = std::move(name);
    t.type = type;
    t.dims = dims;
    t.strides = strides;
    t.role = role;
    return add(std::move(t));
  }
  int64_t intermediate(std::string name, DataType type, Dims dims, Dims strides) {
    const int64_t uid = tensor(std::move(name), type, dims, strides, Role::kNone);
    g_.tensors.back().is_virtual = true;
    return uid;
  }
  int64_t scalar(std::string name, float value) {
    Tensor t;
    t.name = std::move(name);
    t.dims = {1, 1, 1, 1};
    t.strides = {1, 1, 1, 1};
    t.by_value = true;
    t.value = value;
    return add(std::move(t));
  }

  void matmul(std::string name, int64_t a, int64_t b, int64_t c) {
    Op op;
    op.kind = OpKind::kMatmul;
    op.name = std::move(name);
    op.inputs = {a, b};
    op.output = c;
    g_.ops.push_back(std::move(op));
  }
  void pointwise(std::string name, PointwiseMode mode, std::vector<int64_t> inputs, int64_t y,
                 DataType compute = DataType::kFloat, int64_t axis = -1) {
    Op op;
    op.kind = OpKind::kPointwise;
    op.name = std::move(name);
    op.pointwise = mode;
    op.compute = compute;
    op.axis = axis;
    op.inputs = std::move(inputs);
    op.output = y;
    g_.ops.push_back(std::move(op));
  }
  void reduction(std::string name, ReduceMode mode, int64_t x, int64_t y) {
    Op op;
    op.kind = OpKind::kReduction;
    op.name = std::move(name);
    op.reduce = mode;
    op.inputs = {x};
    op.output = y;
    g_.ops.push_back(std::move(op));
  }
  void reshape(std::string name, int64_t x, int64_t y) {
    Op op;
    op.kind = OpKind::kReshape;
    op.name = std::move(name);
    op.inputs = {x};
    op.output = y;
    g_.ops.push_back(std::move(op));
  }

 private:
  int64_t add(Tensor t) {
    t.uid = static_cast<int64_t>(g_.tensors.size()) + 1;
    g_.tensors.push_back(std::move(t));
    return g_.tensors.back().uid;
  }
  Graph& g_;
};

// The shapes both graphs use.
struct Shapes {
  Shapes(int B_, int Tn_, int C_, int H_) : B(B_), T(Tn_), C(C_), H(H_), hs(C_ / H_) {}
  int64_t B, T, C, H, hs;
  Dims heads() const { return {B, H, T, hs}; }    // Q, K, V, O, dO and their gradients
  Dims heads_t() const { return {B, H, hs, T}; }  // K and V transposed
  Dims in_qkv() const { return {3 * C * T, hs, 3 * C, 1}; }
  Dims in_qkv_t() const { return {3 * C * T, hs, 1, 3 * C}; }
  Dims in_out() const { return {C * T, hs, C, 1}; }
  Dims scores() const { return {B, H, T, T}; }
  Dims scores_dense() const { return {H * T * T, T * T, T, 1}; }
  Dims scores_transposed() const { return {H * T * T, T * T, 1, T}; }
  Dims rows() const { return {B, H, T, 1}; }
  Dims rows_dense() const { return {H * T, T, 1, 1}; }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(hs)); }
};

void check_shape(const char* what, int B, int Tn, int C, int H) {
  if (!sdpa_shape_supported(B, Tn, C, H)) {
    throw std::invalid_argument(std::string("rm::cuda::sdpa::") + what + ": cuDNN's attention " +
                                "does not take B=" + std::to_string(B) +
                                " Tn=" + std::to_string(Tn) + " C=" + std::to_string(C) +
                                " H=" + std::to_string(H) +
                                " (head size a multiple of 8 up to 128, " + "Tn >= 2)");
  }
}

// The causal mask as the front end lowers it (a "diagonal band" with right bound 0, top-left
// aligned): row and column indices of the scores, row >= column kept, the rest -infinity.
int64_t causal_mask(Builder& b, const Shapes& s, int64_t scores) {
  const int64_t row = b.intermediate("row_index", DataType::kInt32, s.scores(), s.scores_dense());
  const int64_t col = b.intermediate("col_index", DataType::kInt32, s.scores(), s.scores_dense());
  const int64_t keep = b.intermediate("row>=col", DataType::kBool, s.scores(), s.scores_dense());
  const int64_t neg_inf = b.scalar("-inf", -std::numeric_limits<float>::infinity());
  const int64_t masked = b.intermediate("masked", DataType::kFloat, s.scores(), s.scores_dense());
  b.pointwise("gen_row_index", PointwiseMode::kGenIndex, {scores}, row, DataType::kFloat, 2);
  b.pointwise("gen_col_index", PointwiseMode::kGenIndex, {scores}, col, DataType::kFloat, 3);
  b.pointwise("row>=col", PointwiseMode::kCmpGe, {row, col}, keep, DataType::kBool);
  b.pointwise("binary_select", PointwiseMode::kBinarySelect, {scores, neg_inf, keep}, masked);
  return masked;
}

}  // namespace

const Tensor& Graph::tensor(int64_t uid) const {
  if (uid < 1 || uid > static_cast<int64_t>(tensors.size())) {
    throw std::out_of_range("rm::cuda::sdpa::Graph: no tensor " + std::to_string(uid));
  }
  return tensors[static_cast<size_t>(uid - 1)];
}

const Tensor& Graph::bound(Role role) const {
  for (const Tensor& t : tensors) {
    if (t.role == role) return t;
  }
  throw std::out_of_range("rm::cuda::sdpa::Graph: no tensor of role " +
                          std::to_string(static_cast<int>(role)));
}

SdpaOffsets sdpa_offsets(int C) {
  return {C, 2 * static_cast<int64_t>(C)};
}

bool sdpa_shape_supported(int B, int Tn, int C, int H) {
  if (B <= 0 || Tn < 2 || C <= 0 || H <= 0 || C % H != 0) return false;
  const int hs = C / H;
  return hs % 8 == 0 && hs <= 128;
}

Graph sdpa_forward_graph(int B, int Tn, int C, int H) {
  check_shape("sdpa_forward_graph", B, Tn, C, H);
  const Shapes s(B, Tn, C, H);
  Graph g;
  Builder b(g);
  const int64_t q = b.tensor("Q", DataType::kBf16, s.heads(), s.in_qkv(), Role::kQ);
  const int64_t kt = b.tensor("K^T", DataType::kBf16, s.heads_t(), s.in_qkv_t(), Role::kK);
  const int64_t v = b.tensor("V", DataType::kBf16, s.heads(), s.in_qkv(), Role::kV);
  const int64_t o = b.tensor("O", DataType::kBf16, s.heads(), s.in_out(), Role::kO);
  const int64_t stats = b.tensor("Stats", DataType::kFloat, s.rows(), s.rows_dense(), Role::kStats);
  const int64_t scale = b.scalar("attn_scale", s.scale());

  const int64_t qk = b.intermediate("Q*K^T", DataType::kFloat, s.scores(), s.scores_dense());
  b.matmul("bmm1", q, kt, qk);
  const int64_t scaled = b.intermediate("scaled", DataType::kFloat, s.scores(), s.scores_dense());
  b.pointwise("attn_scale", PointwiseMode::kMul, {qk, scale}, scaled);
  const int64_t masked = causal_mask(b, s, scaled);

  // The softmax with its statistics: max, exp(x - max), sum, log(sum) + max, exp / sum.
  const int64_t max = b.intermediate("max", DataType::kFloat, s.rows(), s.rows_dense());
  b.reduction("max", ReduceMode::kMax, masked, max);
  const int64_t sub = b.intermediate("x-max", DataType::kFloat, s.scores(), s.scores_dense());
  b.pointwise("sub", PointwiseMode::kSub, {masked, max}, sub);
  const int64_t e = b.intermediate("exp", DataType::kFloat, s.scores(), s.scores_dense());
  b.pointwise("exp", PointwiseMode::kExp, {sub}, e);
  const int64_t sum = b.intermediate("sum", DataType::kFloat, s.rows(), s.rows_dense());
  b.reduction("sum", ReduceMode::kAdd, e, sum);
  const int64_t log = b.intermediate("log(sum)", DataType::kFloat, s.rows(), s.rows_dense());
  b.pointwise("log", PointwiseMode::kLog, {sum}, log);
  b.pointwise("add", PointwiseMode::kAdd, {max, log}, stats);
  // P in the inputs' type: the second product runs on bf16 operands, as the flash kernels' does.
  const int64_t p = b.intermediate("P", DataType::kBf16, s.scores(), s.scores_dense());
  b.pointwise("div", PointwiseMode::kDiv, {e, sum}, p);
  b.matmul("bmm2", p, v, o);
  return g;
}

Graph sdpa_backward_graph(int B, int Tn, int C, int H, bool deterministic) {
  check_shape("sdpa_backward_graph", B, Tn, C, H);
  const Shapes s(B, Tn, C, H);
  Graph g;
  Builder b(g);
  const int64_t q = b.tensor("Q", DataType::kBf16, s.heads(), s.in_qkv(), Role::kQ);
  const int64_t kt = b.tensor("K^T", DataType::kBf16, s.heads_t(), s.in_qkv_t(), Role::kK);
  const int64_t vt = b.tensor("V^T", DataType::kBf16, s.heads_t(), s.in_qkv_t(), Role::kV);
  const int64_t o = b.tensor("O", DataType::kBf16, s.heads(), s.in_out(), Role::kO);
  const int64_t d_o = b.tensor("dO", DataType::kBf16, s.heads(), s.in_out(), Role::kDO);
  const int64_t stats = b.tensor("Stats", DataType::kFloat, s.rows(), s.rows_dense(), Role::kStats);
  const int64_t dq = b.tensor("dQ", DataType::kBf16, s.heads(), s.in_qkv(), Role::kDQ);
  const int64_t dk = b.tensor("dK", DataType::kBf16, s.heads(), s.in_qkv(), Role::kDK);
  const int64_t dv = b.tensor("dV", DataType::kBf16, s.heads(), s.in_qkv(), Role::kDV);
  const int64_t scale = b.scalar("attn_scale", s.scale());

  // softmax_sum = rowsum(dO * O) (times the dropout's keep probability, 1 here).
  const Dims dense_bhtd = {s.H * s.T * s.hs, s.T * s.hs, s.hs, 1};
  const Dims d_o_o_strides = {s.H * s.T * s.hs, s.T * s.hs, s.C, 1};  // as the front end sets
  const int64_t d_o_o = b.intermediate("dO*O", DataType::kFloat, s.heads(), d_o_o_strides);
  b.pointwise("mul_dO_O", PointwiseMode::kMul, {d_o, o}, d_o_o);
  const int64_t row_sum = b.intermediate("rowsum", DataType::kFloat, s.rows(), s.rows_dense());
  b.reduction("reduce_dO_O", ReduceMode::kAdd, d_o_o, row_sum);
  const int64_t one = b.scalar("one", 1.0f);
  const int64_t softmax_sum =
      b.tensor("softmax_sum", DataType::kFloat, s.rows(), s.rows_dense(), Role::kSoftmaxSum);
  b.pointwise("scale_dropout_inv", PointwiseMode::kMul, {row_sum, one}, softmax_sum);

  // P again from Q, K and the statistics: exp(mask(scale * Q K^T - stats)).
  const int64_t qk = b.intermediate("Q*K^T", DataType::kFloat, s.scores(), s.scores_dense());
  b.matmul("matmul_Q_KT", q, kt, qk);
  const int64_t scaled = b.intermediate("scaled", DataType::kFloat, s.scores(), s.scores_dense());
  b.pointwise("mul_s_attn_scale", PointwiseMode::kMul, {qk, scale}, scaled);
  const int64_t shifted = b.intermediate("x-stats", DataType::kFloat, s.scores(), s.scores_dense());
  b.pointwise("sub_s_m", PointwiseMode::kSub, {scaled, stats}, shifted);
  const int64_t masked = causal_mask(b, s, shifted);
  const int64_t p = b.intermediate("P", DataType::kFloat, s.scores(), s.scores_dense());
  b.pointwise("exp_s", PointwiseMode::kExp, {masked}, p);

  // dV = P^T dO, P^T a bf16 view of P.
  const int64_t p_t = b.intermediate("P^T", DataType::kBf16, s.scores(), s.scores_transposed());
  b.reshape("reshape_p", p, p_t);
  b.matmul("matmul_pT_dO", p_t, d_o, dv);

  // dS = P * (dO V^T - softmax_sum) * scale.
  const int64_t dp = b.intermediate("dP", DataType::kFloat, s.scores(), s.scores_dense());
  b.matmul("matmul_dO_VT", d_o, vt, dp);
  const int64_t dp_sub = b.intermediate("dP-sum", DataType::kFloat, s.scores(), s.scores_dense());
  b.pointwise("sub_dP_softmax_sum", PointwiseMode::kSub, {dp, softmax_sum}, dp_sub);
  const int64_t dp_p = b.intermediate("(dP-sum)*P", DataType::kFloat, s.scores(), s.scores_dense());
  b.pointwise("mul_dP_exp_s", PointwiseMode::kMul, {dp_sub, p}, dp_p);
  const int64_t ds = b.intermediate("dS", DataType::kFloat, s.scores(), s.scores_dense());
  b.pointwise("mul_dS_attn_scale", PointwiseMode::kMul, {dp_p, scale}, ds);

  // dK = dS^T Q.
  const int64_t ds_t = b.intermediate("dS^T", DataType::kBf16, s.scores(), s.scores_transposed());
  b.reshape("reshape_dS", ds, ds_t);
  b.matmul("matmul_dST_Q", ds_t, q, dk);

  // dQ = dS K, K a view of K^T (the front end leaves this view in float).
  const int64_t k = b.intermediate("K", DataType::kFloat, s.heads(), s.in_qkv());
  b.reshape("reshape_k", kt, k);
  if (deterministic) {
    b.matmul("matmul_dS_K", ds, k, dq);
  } else {
    const int64_t accum =
        b.tensor("dQ_accum", DataType::kFloat, s.heads(), dense_bhtd, Role::kDQAccum);
    b.matmul("matmul_dS_K", ds, k, accum);
    b.pointwise("identity_dQ", PointwiseMode::kIdentity, {accum}, dq);
  }
  return g;
}

size_t sdpa_dq_accum_floats(int B, int Tn, int C, int H, bool deterministic) {
  (void)H;
  if (deterministic || B <= 0 || Tn <= 0 || C <= 0) return 0;
  return static_cast<size_t>(B) * static_cast<size_t>(Tn) * static_cast<size_t>(C);
}

}  // namespace rm::cuda::sdpa
