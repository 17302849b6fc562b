// cuDNN's fused causal attention (scaled dot-product attention, "SDPA") described as the graphs
// of primitive operations cuDNN 9.19's runtime-fusion engines recognise -- host data only, no
// cuDNN types, so the graphs are built and checked on machines without cuDNN or a GPU.
//
// Why a graph of primitives: cuDNN 9.19 declares single SDPA operations too, but takes a causal
// mask on them only from 9.21 (cudnn-frontend's support surface); before that, the fused flash
// kernels are reached by a graph of 14 (forward) / 21-22 (backward) matmul, pointwise, reduction
// and reshape operations matching the pattern cuDNN looks for. These are that pattern as the
// cudnn-frontend (commit 3929da2, the one llm.c + cuDNN was built with) lowers its
// `sdpa(causal, stats)` and `sdpa_backward(causal)` nodes for cuDNN 9.19 on sm_90: the same
// operations in the same order, the same tensor types, dims and strides (compared against the
// descriptors cuDNN's API log shows the front end finalizing; docs/gpu.md says how).
//
// Layout (GPT-2's, read and written in place, as the flash kernels do):
//  - Q, K, V are [B,H,Tn,hs] views of qkv[B,Tn,3C]: strides {3C*Tn, hs, 3C, 1}, K at +C and V
//    at +2C elements (kSdpaOffsets). The graph takes K transposed ([B,H,hs,Tn], strides of the
//    last two swapped), which is the same memory.
//  - O and dO are [B,H,Tn,hs] views of out[B,Tn,C]: strides {C*Tn, hs, C, 1}; dQ, dK, dV views
//    of dqkv like Q, K, V.
//  - Stats: the natural-log log-sum-exp of each row's scaled, masked scores, float [B,H,Tn,1]
//    (NOT the flash kernels' base-2 one: the two paths' saved buffers do not mix).
//  - The backward's softmax_sum is rowsum(dO * O), float [B,H,Tn,1], in memory of the caller's
//    (the flash backward's scratch has that size); with `deterministic` off, dQ is accumulated
//    in a float [B,H,Tn,hs] buffer (dq_accum) that cuDNN adds into from several blocks, so the
//    result varies in its last bits from run to run (llm.c + cuDNN runs the deterministic one).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rm::cuda::sdpa {

enum class DataType { kFloat, kBf16, kInt32, kBool };
enum class OpKind { kMatmul, kPointwise, kReduction, kReshape };
enum class PointwiseMode {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kExp,
  kLog,
  kIdentity,
  kGenIndex,
  kCmpGe,
  kBinarySelect
};
enum class ReduceMode { kAdd, kMax };

// The tensors the caller binds to memory when the graph runs (everything else is virtual, or a
// scalar passed by value whose value is in the graph).
enum class Role { kNone, kQ, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV, kSoftmaxSum, kDQAccum };

struct Tensor {
  int64_t uid = 0;
  std::string name;
  DataType type = DataType::kFloat;
  std::array<int64_t, 4> dims{};
  std::array<int64_t, 4> strides{};
  bool is_virtual = false;
  bool by_value = false;  // a float scalar, dims and strides all 1
  float value = 0.0f;     // by_value only
  Role role = Role::kNone;
};

// Inputs by kind: matmul {A, B} (C = A x B over the last two dims); pointwise {x}, {x, b} or,
// for kBinarySelect, {x, b, t} (y = t ? x : b); reduction {x} (reduced over the output's dims of
// size 1); reshape {x} (y views x's memory with y's dims and strides).
struct Op {
  OpKind kind = OpKind::kPointwise;
  std::string name;
  PointwiseMode pointwise = PointwiseMode::kIdentity;
  ReduceMode reduce = ReduceMode::kAdd;
  int64_t axis = -1;                    // kGenIndex: the dimension whose index is produced
  DataType compute = DataType::kFloat;  // math precision
  std::vector<int64_t> inputs;          // uids
  int64_t output = 0;                   // uid
};

struct Graph {
  std::vector<Tensor> tensors;  // uid i is tensors[i - 1]
  std::vector<Op> ops;          // in the order cuDNN is given them
  const Tensor& tensor(int64_t uid) const;
  // The tensor bound to `role`; std::out_of_range if the graph has none.
  const Tensor& bound(Role role) const;
};

// Element offsets of K and V from Q (and of dK, dV from dQ) in a [B,Tn,3C] buffer.
struct SdpaOffsets {
  int64_t k = 0, v = 0;
};
SdpaOffsets sdpa_offsets(int C);

// Whether cuDNN 9.19's fused attention takes the shape (its sm_90 support surface): head size
// C/H a multiple of 8 up to 128 (GPT-2's 64; the flash kernels' multiples of 16 are a subset),
// Tn >= 2. Shapes outside keep our own kernels.
bool sdpa_shape_supported(int B, int Tn, int C, int H);

// Throw std::invalid_argument (naming the shape) when !sdpa_shape_supported.
Graph sdpa_forward_graph(int B, int Tn, int C, int H);
Graph sdpa_backward_graph(int B, int Tn, int C, int H, bool deterministic);

// float elements the backward needs besides cuDNN's own workspace: softmax_sum is the caller's
// scratch; dq_accum (B*H*Tn*hs floats) only when !deterministic.
size_t sdpa_dq_accum_floats(int B, int Tn, int C, int H, bool deterministic);

}  // namespace rm::cuda::sdpa
