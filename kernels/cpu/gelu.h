// GELU, tanh approximation (PyTorch nn.GELU(approximate="tanh")); math in elementwise_math.h.
//
// Element-wise: out may alias inp, dinp may alias dout (exactly, not partially).
// Threading: OpenMP over elements.
#pragma once

#include <cstddef>

namespace rm::cpu {

void gelu_forward(float* out, const float* inp, size_t N);

// dinp = gelu'(inp) * dout, OVERWRITTEN.
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N);

}  // namespace rm::cpu
