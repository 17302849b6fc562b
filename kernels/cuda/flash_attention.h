// Causal flash attention for bf16 (FlashAttention-2 style, our own kernels): the attention of
// kernels/cpu/attention.h (qkv[B,Tn,3C], heads side by side, scale 1/sqrt(hs)) without the
// [B,H,Tn,Tn] matrix in memory.
//
//  - Forward: one block per (batch, head, 64 query rows); it walks the key tiles up to the
//    diagonal, keeping a running maximum and sum per row (online softmax, float) and the output
//    accumulator in float; writes out[B,Tn,C] and the base-2 log-sum-exp of each row's scaled
//    scores, float [B,H,Tn], which is all the backward keeps (in the `att` buffer).
//  - Backward: D = rowsum(dO * O) per row first (float [B,H,Tn], in `datt_scratch`), then two
//    kernels that recompute the probabilities from Q, K and the log-sum-exp: one per 64 (or,
//    with two row fragments a warp, 128) keys accumulating dK and dV over the query tiles at or
//    after them, one per 64 (128) queries accumulating dQ over the key tiles up to them. No
//    atomics: the result is deterministic (bit-identical reruns, as the rest of the backend).
//  - Q, K, V are read in place from qkv (row stride 3C, head h at column h*hs, K at +C, V at
//    +2C); out, dqkv are written in place. Tile products run on tensor cores through mma.sync
//    m16n8k16 (bf16 in, float accumulation), whose fragment layout the PTX ISA documents: the
//    scores, probabilities, score gradients, the online softmax's statistics and every
//    accumulator stay in registers, and only the Q, K, V, dO tiles pass through shared memory.
//  - Roundings: the probabilities P and score gradients dS are rounded to bf16 before their
//    tensor-core products (as the materialised path rounds att and dpre); the row sums, the
//    log-sum-exp, D and every accumulator are float; out and dqkv are rounded once.
//  - Shapes: flash_attention_supported() (flash_attention_plan.h): head size a multiple of 16
//    up to 128, any B and Tn (rows past Tn are zero-padded and masked). Pointers must be 16-byte
//    aligned (allocate() gives 256); std::invalid_argument otherwise.
//
// Why our own kernels beside cuDNN's: cuDNN's fused attention on cuDNN 9.19 is a graph of ~15
// (forward) / 21-22 (backward) primitive operations whose acceptance only cuDNN on a GPU decides,
// and a GPU has been lent rarely. These kernels are small, their arithmetic is on the host
// (flash_attention_plan.h, unit-tested with an emulation of the tile loops), and they are checked
// against the materialised path and the cpu reference on a GPU (cuda_compute_gpu_test.cc,
// FlashAttention*). Since 2026-11-29 cuDNN's graphs are written too (sdpa_graph.h, cudnn_sdpa.h,
// the default for bf16 since the sitting of 2026-11-30 measured them faster; RM_CUDNN_ATTENTION=0
// turns them off); where cuDNN refuses a shape, or is not there, these kernels run.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/bf16.h"
#include "kernels/cuda/flash_attention_plan.h"

namespace rm::cuda {

// lse: flash_attention_buffers(B, Tn, H).saved bf16 elements (float [B,H,Tn]).
void flash_attention_forward(bf16* out, bf16* lse, const bf16* qkv, int B, int Tn, int C, int H,
                             cudaStream_t stream);

// The backward kernels' row fragments a warp (flash_backward_max_fragments(); the same bits
// either way): the dK/dV kernel's keys, the dQ kernel's queries. 0 takes the environment's,
// RM_FLASH_DKV_FRAGMENTS / RM_FLASH_DQ_FRAGMENTS (1 when unset; 2 clamped to what the head size
// takes; any other value throws std::invalid_argument naming the variable).
struct FlashBackwardFragments {
  int dkv = 0;
  int dq = 0;
};

// dqkv OVERWRITTEN; out and lse are the forward's; scratch: flash_attention_buffers().scratch.
void flash_attention_backward(bf16* dqkv, bf16* scratch, const bf16* dout, const bf16* qkv,
                              const bf16* lse, const bf16* out, int B, int Tn, int C, int H,
                              cudaStream_t stream, FlashBackwardFragments fragments = {});

}  // namespace rm::cuda
