// Softmax cross-entropy on the GPU (kernels/cpu/cross_entropy.h), T = float or bf16, with the
// per-row formulas of kernels/row_math.h.
//
// Everything stays on the device; the caller downloads the result (cuda_context.h):
//  - status->bad_row: N when every target is below V, else the first row whose target is not.
//    It is computed before the row kernel, which then writes nothing (the CPU's "throws before
//    any output is written" becomes: the caller throws after the download, outputs untouched).
//  - status->loss: the loss sum over counted rows (targets < 0 are ignored), in double; the
//    per-row losses are summed in row order by one block, so the result is deterministic.
// One block per row; row_loss is scratch of N doubles. Asynchronous on `stream`.
#pragma once

#include <cuda_runtime_api.h>

namespace rm::cuda {

struct CrossEntropyStatus {
  double loss;
  int bad_row;
};

// The running total of queued calls (CudaLayers::queue_cross_entropy_forward_backward). All
// zero bytes is the empty total.
struct CrossEntropyTotal {
  double loss;  // the calls' loss sums, added in call order (deterministic)
  int bad;      // 1 once a call found a target >= V; the first such call's row and target:
  int bad_row;
  int bad_target;
};

// total->loss += status->loss, or, the first time status->bad_row < N, the row and its target
// kept in total. One thread, after the call that wrote status; asynchronous on `stream`.
void accumulate_cross_entropy(CrossEntropyTotal* total, const CrossEntropyStatus* status,
                              const int* targets, int N, cudaStream_t stream);

// *dst = total->loss, or NaN once a call found a bad target (one thread; asynchronous): the
// total as a training step's update guard reads it (kernels/step_scalars.h).
void copy_cross_entropy_total(double* dst, const CrossEntropyTotal* total, cudaStream_t stream);

// The loss only; logits are not modified.
template <typename T>
void cross_entropy_forward(CrossEntropyStatus* status, double* row_loss, const T* logits,
                           const int* targets, int N, int V, cudaStream_t stream);

// Where the row kernel's sum and gradient passes read each row: again from global memory
// (kReread), or from a copy in shared memory the first pass made (kInSharedMemory: one read of
// the logits from global memory instead of three; taken where ld is a whole number of 16-byte
// vectors, the logits 16-byte aligned and a row fits the device's shared memory a block, else
// kReread). The same bits either way. kEnvironment: kInSharedMemory when RM_CUDA_CE_ROW_IN_SMEM=1
// (opt-in until a GPU sitting measures it), kReread when unset or 0; other values throw
// std::invalid_argument naming the variable.
enum class CrossEntropyRow { kEnvironment, kReread, kInSharedMemory };

// The loss, and logits OVERWRITTEN with (softmax - onehot(target)) * grad_scale (zero rows for
// ignored targets). Rows are ld >= V elements apart; the padding columns [V, ld) are ignored by
// the loss and set to zero.
template <typename T>
void cross_entropy_forward_backward(CrossEntropyStatus* status, double* row_loss,
                                    T* logits_then_dlogits, const int* targets, int N, int V,
                                    int ld, float grad_scale, cudaStream_t stream,
                                    CrossEntropyRow row = CrossEntropyRow::kEnvironment);

}  // namespace rm::cuda
