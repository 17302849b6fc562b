// cuBLASLt matmuls with fused epilogues (lt_gemm_args.h) on one stream: bf16 operands, a bf16 or
// fp32 output, fp32 accumulation and scale. One handle and one workspace (kWorkspaceBytes, taken
// at creation); one plan per distinct call -- its descriptors and the algorithm cuBLASLt's
// heuristic picked -- made on first use and kept, so a training step after the first asks
// cuBLASLt for nothing and allocates nothing.
//
// A plan's key is the arguments, the output type and the alignment of every pointer (the
// heuristic picks by alignment; a kept algorithm is valid for any pointers aligned alike).
// Where cuBLASLt offers no algorithm, or the epilogue's documented requirements fail
// (lt_epilogue_shape_ok, 16-byte vectors and aux), run() returns false having queued nothing,
// says so once per plan on stderr, and the caller takes its unfused path: slower, never wrong.
// Errors of cuBLASLt itself throw std::runtime_error. Thread: the owning context's.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "kernels/cuda/cublas_gemm.h"
#include "kernels/cuda/lt_gemm_args.h"

namespace rm::cuda {

class LtGemm {
 public:
  static constexpr size_t kWorkspaceBytes = 32u << 20;  // cuBLAS's advice for Hopper

  explicit LtGemm(cudaStream_t stream);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // D = C (in place) per `a`, with cuBLAS's operands `first` and `second` (bf16; gemm_args.h's
  // swap already made) and an output of type `out`. `vec`: the bias (kBias, kGeluAuxBias; of
  // D's type) or the bias gradient written (kBGradB; of D's type); `aux`: the pre-activation
  // (bf16), written by kGeluAuxBias, read by kDGelu. Returns whether it queued the matmul.
  bool run(const LtGemmArgs& a, GemmType out, const void* first, const void* second, void* D,
           void* vec, void* aux);

  int64_t fallbacks() const { return fallbacks_; }  // calls that returned false
  size_t plans() const { return plans_.size(); }

 private:
  struct Plan;
  // A distinct call: the epilogue, the column-major GEMM's ops, sizes, leading dimensions and
  // whether it accumulates, the output type, then the alignments of A, B, D, the vector and aux
  // (what the heuristic picks by), aux's leading dimension and the vector's length.
  using Key = std::tuple<int, int, int, int, int, int, int, int, int, bool, int, int, int, int, int,
                         int, int64_t, int>;
  struct Alignments {
    int a, b, d;
  };
  // Fills a new plan: the descriptors, then cuBLASLt's heuristic for an algorithm (p.ok).
  void make_plan(Plan& p, const LtGemmArgs& a, GemmType out, const void* vec, const void* aux,
                 Alignments align);

  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  int64_t fallbacks_ = 0;
};

}  // namespace rm::cuda
