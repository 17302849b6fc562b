// Host reduction kernels shared by the host backends and the tests.
//
// Sums are taken in rank order (srcs[0] + srcs[1] + ...), whichever rank computes them, so every
// algorithm gives bitwise the same result and every rank ends with identical values; kAvg then
// divides by the rank count (a division, not a multiplication by 1/n, so that results match a
// plain reference exactly). bf16 is reduced in float: each element's sources are converted,
// summed in rank order, divided (kAvg) in float, and the result rounded to bf16 once, so it is
// the same bits as that computation written out plainly.
#pragma once

#include <cstddef>

#include "collectives/communicator.h"

namespace rm::detail {

// For i < count: r = reduce(srcs[0][i], ..., srcs[nsrc-1][i]), stored to dsts[0][i], ...,
// dsts[ndst-1][i]. A destination may alias a source (each element is read before it is written).
// nsrc >= 1, ndst >= 1. Reads each source once and writes each destination once.
void reduce_sources(DType dtype, ReduceOp op, int nsrc, const void* const* srcs, size_t count,
                    int ndst, void* const* dsts);

// buf[i] /= divisor for i < count (completes kAvg after a sum). For bf16 this rounds a second
// time (the sum was rounded already); the host backends avoid it by reducing bf16 only through
// reduce_sources.
void divide_in_place(DType dtype, void* buf, size_t count, int divisor);

}  // namespace rm::detail
