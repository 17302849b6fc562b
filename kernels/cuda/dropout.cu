#include "kernels/cuda/dropout.h"

#include "kernels/bf16.h"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"

namespace rm::cuda {
namespace {

// One thread a draw: four elements of one sequence (words = B * words_per_row). The draw's
// 64-bit hashing, not memory, is what a thread spends its time on, so each is made once.
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    dropout_kernel(T* out, const T* in, DropoutKey key, size_t row, size_t words_per_row,
                   size_t words) {
  constexpr size_t E = kDropoutElemsPerDraw;
  RM_GRID_STRIDE_LOOP(i, words) {
    const size_t b = i / words_per_row, w = i - b * words_per_row;
    const uint64_t draw = dropout_draw(key, dropout_prefix(key, b), w);
    const size_t first = w * E, end = first + E < row ? first + E : row;
    const size_t at = b * row;
    for (size_t e = first; e < end; ++e) {
      const uint32_t bits = dropout_bits(draw, static_cast<int>(e - first));
      out[at + e] = store<T>(dropout_value(key.scale, key.threshold, bits, load(in[at + e])));
    }
  }
}

}  // namespace

template <typename T>
void dropout(T* out, const T* in, const DropoutKey& key, int B, size_t row, cudaStream_t stream) {
  const size_t words_per_row = (row + kDropoutElemsPerDraw - 1) / kDropoutElemsPerDraw;
  const size_t words = static_cast<size_t>(B) * words_per_row;
  if (words == 0) return;
  RM_CUDA_LAUNCH(dropout_kernel<T>, elementwise_launch(words), stream, out, in, key, row,
                 words_per_row, words);
}

template void dropout<float>(float*, const float*, const DropoutKey&, int, size_t, cudaStream_t);
template void dropout<bf16>(bf16*, const bf16*, const DropoutKey&, int, size_t, cudaStream_t);

}  // namespace rm::cuda
