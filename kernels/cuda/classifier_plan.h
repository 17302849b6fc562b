// The cuda classifier's padded vocabulary (CudaLayers::queue_classifier_forward_backward), as
// plain host code: the memory estimate sizes the classifier's scratch with it on machines
// without CUDA, and kernels_cuda_host_test checks it.
//
// V is rounded up to kVocabPad, so that every GEMM dimension and leading dimension over the
// vocabulary is a multiple of 128 -- with GPT-2's odd 50257, cuBLAS fell back to unaligned
// kernels (~100 TFLOP/s on an H100 against ~600 at aligned shapes); 50304 is llm.c's choice too.
// The copy of wte the GEMMs multiply by has Vp rows, the padding rows zero, so the logits'
// padding columns are zero and take no part in the loss. The padding lives only in the
// backend's scratch: parameters, gradients, checkpoints and exports keep V rows.
#pragma once

#include <climits>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace rm::cuda {

inline constexpr int kVocabPad = 128;

// V rounded up to a multiple of kVocabPad; throws std::invalid_argument for V < 0 or a result
// past INT_MAX.
inline int padded_vocab(int V) {
  if (V < 0) throw std::invalid_argument("rm::cuda: vocabulary " + std::to_string(V) + " < 0");
  const long long padded = (static_cast<long long>(V) + kVocabPad - 1) / kVocabPad * kVocabPad;
  if (padded > INT_MAX) {
    throw std::invalid_argument("rm::cuda: vocabulary " + std::to_string(V) + " too large to pad");
  }
  return static_cast<int>(padded);
}

// Elements of T in the classifier's scratch: the padded wte [Vp, C], then the logits [N, Vp].
inline size_t classifier_scratch_elements(int N, int C, int V) {
  const size_t Vp = static_cast<size_t>(padded_vocab(V));
  return static_cast<size_t>(N) * Vp + Vp * static_cast<size_t>(C);
}

}  // namespace rm::cuda
