// The CPU kernels of Ringmaster: GPT-2 / MLP layers, loss and optimizer over flat buffers.
//
// Contracts shared by every kernel:
//  * float32, row-major, contiguous; shapes are passed explicitly (B batch, T time, C channels,
//    OC out channels, H heads, V vocab, N rows).
//  * The caller owns all memory. Kernels never allocate; scratch is passed in.
//  * Backward: parameter gradients are ACCUMULATED (+=), so micro-batches add up; input
//    gradients are OVERWRITTEN (=), except layernorm_backward, which ADDS into dinp (its input
//    is the residual stream, whose gradient already holds the residual path).
//  * Threading: OpenMP inside the kernels, OpenBLAS (OpenMP build) for GEMMs; set the count
//    with set_num_threads. Kernels keep no state; each call forks its own team, so call them
//    from one thread (the worker's compute thread), not from inside another parallel region.
//  * Errors in arguments (bad shapes, out-of-range targets) throw before any output is written.
#pragma once

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/residual.h"
#include "kernels/cpu/threads.h"
