// Dropout on the CPU: the masks of kernels/dropout_mask.h over [B, row] (row = Tn * C).
//
// out = in * key.scale where sequence b's element is kept, else 0, rounded once to T (float or
// bf16). out may alias in exactly. The same call on a gradient, with the same key, is dropout's
// backward. Threading: OpenMP over blocks of draws of all the sequences at once (a call of
// fewer than detail::kMinParallelElems elements runs inline).
#pragma once

#include <cstddef>

#include "kernels/bf16.h"
#include "kernels/dropout_mask.h"

namespace rm::cpu {

template <typename T>
void dropout(T* out, const T* in, const DropoutKey& key, int B, size_t row);

}  // namespace rm::cpu
