#include "kernels/cuda/gemm.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "kernels/bf16.h"
#include "kernels/cuda/bias_gradient.h"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"
#include "kernels/cuda/residual.h"

namespace rm::cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    broadcast_rows_kernel(T* out, const T* bias, int OC, size_t total) {
  RM_GRID_STRIDE_LOOP(i, total) {
    out[i] = bias[i % OC];
  }
}

// The same, 16 bytes at a time (OC a whole number of Vec16<T>, out and bias aligned).
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    broadcast_rows_vec_kernel(T* out, const T* bias, int OC, size_t vectors) {
  constexpr int E = Vec16<T>::kElems;
  const size_t row_vectors = static_cast<size_t>(OC) / E;
  RM_GRID_STRIDE_LOOP(i, vectors) {
    store_vec16(out + i * E, load_vec16(bias + (i % row_vectors) * E));
  }
}

// The bias gradient's term: dout[n, o].
template <typename T>
struct DoutTerm {
  const T* dout;
  int OC;
  __device__ void operator()(int n, int o, float (&t)[1]) const {
    t[0] = load(dout[static_cast<size_t>(n) * OC + o]);
  }
};

}  // namespace

size_t linear_scratch_floats(int N, int OC) {
  if (N <= 0 || OC <= 0) return 0;
  // The column sums' partials, or the bias gradient cuBLASLt writes (OC floats).
  return std::max(
      column_sum_shape(static_cast<size_t>(N), static_cast<size_t>(OC), 1).partial_floats,
      static_cast<size_t>(OC));
}

namespace {

// The unfused forward: the bias rows first, then the GEMM onto them.
template <typename T>
void plain_linear_forward(const Blas& blas, T* out, const T* inp, const T* weight, const T* bias,
                          int N, int C, int OC, cudaStream_t stream) {
  const bool seed = bias != nullptr && N > 0 && OC > 0;
  const RowMajorGemm g = linear_forward_gemm(N, C, OC, seed);
  to_cublas(g);  // validates before anything is queued
  if (seed) {
    const size_t total = static_cast<size_t>(N) * OC;
    if (OC % Vec16<T>::kElems == 0 && vec16_ok<T>(total, {out, bias})) {
      const size_t vectors = total / Vec16<T>::kElems;
      RM_CUDA_LAUNCH(broadcast_rows_vec_kernel<T>, elementwise_launch(vectors), stream, out, bias,
                     OC, vectors);
    } else {
      RM_CUDA_LAUNCH(broadcast_rows_kernel<T>, elementwise_launch(total), stream, out, bias, OC,
                     total);
    }
  }
  gemm(blas, g, inp, weight, out);
}

// dweight += dout^T inp and dbias += column sums of dout: one cuBLASLt GEMM with the bias
// gradient in its epilogue (bf16), else a GEMM and the column sums.
template <typename T>
void weight_gradients(const Blas& blas, LtGemm* lt, float* dweight, float* dbias, const T* dout,
                      const T* inp, int N, int C, int OC, float* scratch, cudaStream_t stream) {
  const bool with_bias = dbias != nullptr && N > 0 && OC > 0;
  if constexpr (std::is_same_v<T, bf16>) {
    if (with_bias && bias_gradient_vectorizable(OC, dout)) {
      gemm(blas, linear_dweight_gemm(N, C, OC), dout, inp, dweight);
      bias_gradient(dbias, dout, N, OC, scratch, stream);
      return;
    }
    // C > 0: an empty GEMM queues nothing (LtGemm::run says it is done), and `scratch` would
    // then add stale floats into dbias.
    if (lt != nullptr && with_bias && C > 0 &&
        lt->run(lt_linear_dweight(N, C, OC, true), GemmType::kF32, inp, dout, dweight, scratch,
                nullptr)) {
      add_inplace<float>(dbias, scratch, static_cast<size_t>(OC), stream);
      return;
    }
  }
  gemm(blas, linear_dweight_gemm(N, C, OC), dout, inp, dweight);
  if (with_bias) {
    launch_column_sums<1>(ColumnOutputs<1>{{dbias}}, scratch, N, OC, DoutTerm<T>{dout, OC}, stream);
  }
}

}  // namespace

template <typename T>
void linear_forward(const Blas& blas, LtGemm* lt, T* out, const T* inp, const T* weight,
                    const T* bias, int N, int C, int OC, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, bf16>) {
    if (lt != nullptr && N > 0 && OC > 0) {
      const LtGemmArgs a = lt_linear_forward(N, C, OC, bias != nullptr, false);
      if (lt->run(a, GemmType::kBF16, weight, inp, out, const_cast<T*>(bias), nullptr)) return;
    }
  }
  plain_linear_forward(blas, out, inp, weight, bias, N, C, OC, stream);
}

namespace {

// Queues the bias gradient on side->stream after what `stream` holds so far, when it takes the
// 16-byte kernel (gemm.h); returns whether it did, the caller then joining it (join_side).
template <typename T>
bool fork_bias_gradient(const SideStream* side, float* dbias, const T* dout, int N, int OC,
                        float* scratch, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, bf16>) {
    if (side == nullptr || side->stream == nullptr || dbias == nullptr || N <= 0 || OC <= 0 ||
        !bias_gradient_vectorizable(OC, dout)) {
      return false;
    }
    RM_CUDA_CHECK(cudaEventRecord(side->fork, stream), kThrow);
    RM_CUDA_CHECK(cudaStreamWaitEvent(side->stream, side->fork, 0), kThrow);
    bias_gradient(dbias, dout, N, OC, scratch, side->stream);
    RM_CUDA_CHECK(cudaEventRecord(side->join, side->stream), kThrow);
    return true;
  } else {
    return false;
  }
}

void join_side(const SideStream& side, cudaStream_t stream) {
  RM_CUDA_CHECK(cudaStreamWaitEvent(stream, side.join, 0), kThrow);
}

// Joins a forked bias gradient at the latest as the backward of its Linear is left, also when
// a GEMM between throws: left unjoined, the side kernel would run on unordered with what the
// caller does next (a scratch regrowth frees the buffer it reads), and a recording would end
// with a fork never joined (cudaErrorStreamCaptureUnjoined) instead of the GEMM's own error.
class SideJoin {
 public:
  SideJoin(const SideStream* side, bool forked, cudaStream_t stream)
      : side_(forked ? side : nullptr), stream_(stream) {}
  SideJoin(const SideJoin&) = delete;
  SideJoin& operator=(const SideJoin&) = delete;
  void join() {
    if (const SideStream* side = std::exchange(side_, nullptr)) join_side(*side, stream_);
  }
  ~SideJoin() {
    // Unwinding already: the first error is the one reported, this one is not.
    if (side_ != nullptr) (void)cudaStreamWaitEvent(stream_, side_->join, 0);
  }

 private:
  const SideStream* side_;
  cudaStream_t stream_;
};

}  // namespace

template <typename T>
void linear_backward(const Blas& blas, LtGemm* lt, T* dinp, float* dweight, float* dbias,
                     const T* dout, const T* inp, const T* weight, int N, int C, int OC,
                     float* scratch, cudaStream_t stream, const SideStream* side) {
  const RowMajorGemm gi = linear_dinp_gemm(N, C, OC), gw = linear_dweight_gemm(N, C, OC);
  to_cublas(gi);  // both validated before anything is queued
  to_cublas(gw);
  const bool beside = fork_bias_gradient(side, dbias, dout, N, OC, scratch, stream);
  SideJoin joined(side, beside, stream);
  if (dinp != nullptr) gemm(blas, gi, dout, weight, dinp);
  weight_gradients(blas, lt, dweight, beside ? nullptr : dbias, dout, inp, N, C, OC, scratch,
                   stream);
  joined.join();
}

template <typename T>
void linear_gelu_forward(const Blas& blas, LtGemm* lt, T* out, T* pre, const T* inp,
                         const T* weight, const T* bias, int N, int C, int OC,
                         cudaStream_t stream) {
  if constexpr (std::is_same_v<T, bf16>) {
    // GELU_AUX_BIAS takes a bias: without one, the unfused path.
    if (lt != nullptr && bias != nullptr && N > 0 && OC > 0) {
      const LtGemmArgs a = lt_linear_forward(N, C, OC, true, true);
      if (lt->run(a, GemmType::kBF16, weight, inp, out, const_cast<T*>(bias), pre)) return;
    }
  }
  linear_forward(blas, lt, pre, inp, weight, bias, N, C, OC, stream);
  gelu_forward(out, pre, static_cast<size_t>(N) * OC, stream);
}

template <typename T>
void linear_backward_into_gelu(const Blas& blas, LtGemm* lt, T* dpre, float* dweight, float* dbias,
                               const T* dout, const T* inp, const T* weight, const T* pre, int N,
                               int C, int OC, float* scratch, cudaStream_t stream,
                               const SideStream* side) {
  const RowMajorGemm gi = linear_dinp_gemm(N, C, OC), gw = linear_dweight_gemm(N, C, OC);
  to_cublas(gi);  // both validated before anything is queued
  to_cublas(gw);
  const bool beside = fork_bias_gradient(side, dbias, dout, N, OC, scratch, stream);
  SideJoin joined(side, beside, stream);
  bool fused = false;
  if constexpr (std::is_same_v<T, bf16>) {
    fused = lt != nullptr && N > 0 && C > 0 &&
            lt->run(lt_linear_dinp(N, C, OC, true), GemmType::kBF16, weight, dout, dpre, nullptr,
                    const_cast<T*>(pre));
  }
  if (!fused) {
    gemm(blas, gi, dout, weight, dpre);
    gelu_backward(dpre, pre, dpre, static_cast<size_t>(N) * C, stream);
  }
  weight_gradients(blas, lt, dweight, beside ? nullptr : dbias, dout, inp, N, C, OC, scratch,
                   stream);
  joined.join();
}

#define RM_LINEAR_INSTANCES(T)                                                                     \
  template void linear_forward<T>(const Blas&, LtGemm*, T*, const T*, const T*, const T*, int,     \
                                  int, int, cudaStream_t);                                         \
  template void linear_backward<T>(const Blas&, LtGemm*, T*, float*, float*, const T*, const T*,   \
                                   const T*, int, int, int, float*, cudaStream_t,                  \
                                   const SideStream*);                                             \
  template void linear_gelu_forward<T>(const Blas&, LtGemm*, T*, T*, const T*, const T*, const T*, \
                                       int, int, int, cudaStream_t);                               \
  template void linear_backward_into_gelu<T>(const Blas&, LtGemm*, T*, float*, float*, const T*,   \
                                             const T*, const T*, const T*, int, int, int, float*,  \
                                             cudaStream_t, const SideStream*);
RM_LINEAR_INSTANCES(float)
RM_LINEAR_INSTANCES(bf16)
#undef RM_LINEAR_INSTANCES

}  // namespace rm::cuda
