// Fused softmax + cross-entropy over logits[N,V] with integer targets[N].
//
// Rows whose target is negative are ignored: no loss, zero gradient (PyTorch ignore_index).
// Targets >= V throw std::out_of_range before any output is written.
// Threading: OpenMP over rows; the loss sum is a double reduction.
#pragma once

namespace rm::cpu {

// Returns the SUM over counted rows of -log softmax(logits[n])[targets[n]]. Writes per-row
// losses (0 for ignored rows) if losses is not null. Does not modify logits.
double cross_entropy_forward(float* losses, const float* logits, const int* targets, int N, int V);

// Forward and backward in one pass: returns the same loss sum, and OVERWRITES logits in place
// with dlogits = (softmax - onehot(target)) * grad_scale (all-zero rows for ignored targets).
// grad_scale is typically 1 / (number of counted rows in the global batch).
double cross_entropy_forward_backward(float* logits_then_dlogits, const int* targets, int N, int V,
                                      float grad_scale);

}  // namespace rm::cpu
