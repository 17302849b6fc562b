#include "kernels/cpu/dropout.h"

#include <cstdint>
#include <cstring>

#include "kernels/cpu/parallel_util.h"

namespace rm::cpu {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "dropout's bits are read little-endian");

// Draws are made a block at a time into a small array, then applied in a loop the compiler
// vectorises (a 16-bit compare and a select an element): the hashing and the select each run
// in their own tight loop instead of interleaved with a branch an element.
constexpr size_t kBlockWords = 64;

template <typename T>
void dropout_words(T* o, const T* x, const DropoutKey& key, uint64_t prefix, size_t w0, size_t w1,
                   size_t row) {
  constexpr size_t E = kDropoutElemsPerDraw;
  uint64_t draws[kBlockWords];
  uint16_t bits[kBlockWords * E];
  for (size_t w = w0; w < w1; w += kBlockWords) {
    const size_t n = w1 - w < kBlockWords ? w1 - w : kBlockWords;
#pragma omp simd
    for (size_t k = 0; k < n; ++k) draws[k] = dropout_draw(key, prefix, w + k);
    // Little-endian: the draw's 16-bit quarters, lowest first, are dropout_bits(draw, 0..3).
    std::memcpy(bits, draws, n * sizeof(uint64_t));
    const size_t first = w * E, count = (first + n * E < row ? first + n * E : row) - first;
    const float scale = key.scale;
    const uint32_t threshold = key.threshold;
#pragma omp simd
    for (size_t e = 0; e < count; ++e) {
      o[first + e] = store<T>(dropout_value(scale, threshold, bits[e], load(x[first + e])));
    }
  }
}

}  // namespace

template <typename T>
void dropout(T* out, const T* in, const DropoutKey& key, int B, size_t row) {
  constexpr size_t E = kDropoutElemsPerDraw;
  if (B <= 0 || row == 0) return;
  const size_t words = (row + E - 1) / E;
  // Threads take blocks of kBlockWords draws over all sequences at once, so that short rows
  // (the default job's 16384 elements) still spread over the threads.
  const size_t blocks_per_row = (words + kBlockWords - 1) / kBlockWords;
  const size_t blocks = static_cast<size_t>(B) * blocks_per_row;
  const bool parallel = static_cast<size_t>(B) * row >= detail::kMinParallelElems;
#pragma omp parallel for schedule(static) if (parallel)
  for (size_t i = 0; i < blocks; ++i) {
    const size_t b = i / blocks_per_row, w0 = (i - b * blocks_per_row) * kBlockWords;
    const size_t w1 = w0 + kBlockWords < words ? w0 + kBlockWords : words;
    const size_t at = b * row;
    dropout_words(out + at, in + at, key, dropout_prefix(key, b), w0, w1, row);
  }
}

template void dropout<float>(float*, const float*, const DropoutKey&, int, size_t);
template void dropout<bf16>(bf16*, const bf16*, const DropoutKey&, int, size_t);

}  // namespace rm::cpu
