// AdamW on the GPU: the contract and formula of kernels/cpu/adamw.h, with the per-element update
// of kernels/elementwise_math.h and the step's coefficients computed once on the host.
// Device pointers; asynchronous on `stream`; t < 1 throws std::invalid_argument.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/cuda/launch_util.h"
#include "kernels/step_scalars.h"

namespace rm::cuda {

void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int64_t t,
                  float grad_scale, cudaStream_t stream);

// The same update over the chunks of adamw_chunks() (launch_util.h), a device copy of them at
// `chunks` (`count` of them), one block a chunk, in one launch; `weight_decay` where a chunk's
// decay is set, 0 elsewhere. `rounded` (may be null): also rounded[i] = to_bf16(params[i]) after
// the update, for each element of the chunks, bit for bit what cast() writes. `guard.scalars`
// (device memory; may be null) decide on the device, in every block, whether anything is
// written and the clipping factor that multiplies grad_scale (kernels/step_scalars.h), so that
// the host queues the update before it knows the step's loss and norm.
void adamw_update_chunks(float* params, const float* grads, float* m, float* v, bf16* rounded,
                         const AdamWChunk* chunks, size_t count, float lr, float beta1, float beta2,
                         float eps, float weight_decay, int64_t t, float grad_scale,
                         const AdamWGuard& guard, cudaStream_t stream);

}  // namespace rm::cuda
