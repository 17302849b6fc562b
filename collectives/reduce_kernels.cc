#include "collectives/reduce_kernels.h"

#include <cstring>

#include "kernels/bf16.h"

namespace rm::detail {
namespace {

// 64-byte vectors through GCC/Clang vector extensions: one AVX-512 register, or several narrower
// ones on older targets. Explicit vectors because the destination aliases a source, which
// would make an auto-vectorised loop fall back to its scalar version at run time.
typedef float VecF __attribute__((vector_size(64)));
typedef double VecD __attribute__((vector_size(64)));

template <typename V>
inline __attribute__((always_inline)) V load(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}

template <typename V>
inline __attribute__((always_inline)) void store(void* p, const V& v) {
  std::memcpy(p, &v, sizeof(V));
}

// kNsrc / kNdst > 0: the source / destination count fixed at compile time (the common cases);
// 0: taken at run time.
template <typename T, typename V, int kNsrc, int kNdst>
void reduce_typed(bool avg, int nsrc, const void* const* srcs, size_t count, int ndst,
                  void* const* dsts) {
  if (kNsrc > 0) nsrc = kNsrc;
  if (kNdst > 0) ndst = kNdst;
  constexpr size_t kLanes = sizeof(V) / sizeof(T);
  const T divisor = static_cast<T>(nsrc);
  V vdivisor;
  for (size_t l = 0; l < kLanes; ++l) vdivisor[l] = divisor;
  const T* s0 = static_cast<const T*>(srcs[0]);
  size_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    V acc = load<V>(s0 + i);
    for (int s = 1; s < nsrc; ++s) acc += load<V>(static_cast<const T*>(srcs[s]) + i);
    if (avg) acc /= vdivisor;
    for (int d = 0; d < ndst; ++d) store(static_cast<T*>(dsts[d]) + i, acc);
  }
  for (; i < count; ++i) {
    T acc = s0[i];
    for (int s = 1; s < nsrc; ++s) acc += static_cast<const T*>(srcs[s])[i];
    if (avg) acc /= divisor;
    for (int d = 0; d < ndst; ++d) static_cast<T*>(dsts[d])[i] = acc;
  }
}

template <typename T, typename V, int kNsrc>
void reduce_ndst(bool avg, int nsrc, const void* const* srcs, size_t count, int ndst,
                 void* const* dsts) {
  if (ndst == 1) {
    reduce_typed<T, V, kNsrc, 1>(avg, nsrc, srcs, count, ndst, dsts);
  } else if (ndst == 2) {
    reduce_typed<T, V, kNsrc, 2>(avg, nsrc, srcs, count, ndst, dsts);
  } else {
    reduce_typed<T, V, kNsrc, 0>(avg, nsrc, srcs, count, ndst, dsts);
  }
}

template <typename T, typename V>
void reduce_dispatch(bool avg, int nsrc, const void* const* srcs, size_t count, int ndst,
                     void* const* dsts) {
  if (nsrc == 2) {
    reduce_ndst<T, V, 2>(avg, nsrc, srcs, count, ndst, dsts);
  } else {
    reduce_ndst<T, V, 0>(avg, nsrc, srcs, count, ndst, dsts);
  }
}

// bf16 sources, accumulated in float and rounded once per element. Blocks of kBlock elements:
// all sources of a block are read into the float accumulator before any destination is written,
// so a destination may alias a source, and the plain loops over the local array vectorise.
void reduce_bf16(bool avg, int nsrc, const void* const* srcs, size_t count, int ndst,
                 void* const* dsts) {
  constexpr size_t kBlock = 256;
  const float divisor = static_cast<float>(nsrc);
  float acc[kBlock];
  for (size_t begin = 0; begin < count; begin += kBlock) {
    const size_t n = count - begin < kBlock ? count - begin : kBlock;
    const bf16* s0 = static_cast<const bf16*>(srcs[0]) + begin;
    for (size_t i = 0; i < n; ++i) acc[i] = to_float(s0[i]);
    for (int s = 1; s < nsrc; ++s) {
      const bf16* src = static_cast<const bf16*>(srcs[s]) + begin;
      for (size_t i = 0; i < n; ++i) acc[i] += to_float(src[i]);
    }
    if (avg) {
      for (size_t i = 0; i < n; ++i) acc[i] /= divisor;
    }
    for (int d = 0; d < ndst; ++d) {
      bf16* dst = static_cast<bf16*>(dsts[d]) + begin;
      for (size_t i = 0; i < n; ++i) dst[i] = to_bf16(acc[i]);
    }
  }
}

template <typename T>
void divide_typed(T* buf, size_t count, int divisor) {
  const T d = static_cast<T>(divisor);
  for (size_t i = 0; i < count; ++i) buf[i] /= d;
}

}  // namespace

void reduce_sources(DType dtype, ReduceOp op, int nsrc, const void* const* srcs, size_t count,
                    int ndst, void* const* dsts) {
  const bool avg = op == ReduceOp::kAvg;
  switch (dtype) {
    case DType::kFloat32:
      return reduce_dispatch<float, VecF>(avg, nsrc, srcs, count, ndst, dsts);
    case DType::kFloat64:
      return reduce_dispatch<double, VecD>(avg, nsrc, srcs, count, ndst, dsts);
    case DType::kBFloat16:
      return reduce_bf16(avg, nsrc, srcs, count, ndst, dsts);
  }
}

void divide_in_place(DType dtype, void* buf, size_t count, int divisor) {
  switch (dtype) {
    case DType::kFloat32:
      return divide_typed(static_cast<float*>(buf), count, divisor);
    case DType::kFloat64:
      return divide_typed(static_cast<double*>(buf), count, divisor);
    case DType::kBFloat16: {
      bf16* b = static_cast<bf16*>(buf);
      const float d = static_cast<float>(divisor);
      for (size_t i = 0; i < count; ++i) b[i] = to_bf16(to_float(b[i]) / d);
      return;
    }
  }
}

}  // namespace rm::detail
