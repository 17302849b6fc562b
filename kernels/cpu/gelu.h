// GELU, tanh approximation (PyTorch nn.GELU(approximate="tanh")); math in elementwise_math.h.
//
// Element-wise: out may alias inp, dinp may alias dout (exactly, not partially).
// Threading: OpenMP over elements.
#pragma once

namespace rm::cpu {

void gelu_forward(float* out, const float* inp, int N);

// dinp = gelu'(inp) * dout, OVERWRITTEN.
void gelu_backward(float* dinp, const float* inp, const float* dout, int N);

}  // namespace rm::cpu
