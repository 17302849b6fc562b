#include "kernels/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/parallel_util.h"

namespace rm::cpu {
namespace {

// Messages are built only on failure: sgemm runs inside attention's inner loop, so the checks
// must cost a few compares, never an allocation.
[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("rm::cpu::sgemm: " + what);
}

void check_ld(const char* name, int ld, int min_ld) {
  if (ld < min_ld) {
    fail(std::string(name) + "=" + std::to_string(ld) + " is smaller than the row length " +
         std::to_string(min_ld));
  }
}

// dbias[o] += sum_n dout[n, o], one column block per thread (see kColBlock).
void add_column_sums(float* dbias, const float* dout, int N, int OC) {
  const int nblocks = detail::num_col_blocks(OC);
  const bool parallel = static_cast<size_t>(N) * OC >= detail::kMinParallelElems;
#pragma omp parallel for schedule(static) if (parallel)
  for (int blk = 0; blk < nblocks; ++blk) {
    const int c0 = blk * detail::kColBlock;
    const int w = std::min(detail::kColBlock, OC - c0);
    float acc[detail::kColBlock] = {};
    for (int n = 0; n < N; ++n) {
      const float* __restrict row = dout + detail::row_offset(n, OC) + c0;
#pragma omp simd
      for (int j = 0; j < w; ++j) acc[j] += row[j];
    }
    for (int j = 0; j < w; ++j) dbias[c0 + j] += acc[j];
  }
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  if (M < 0 || N < 0 || K < 0) {
    fail("negative size M=" + std::to_string(M) + " N=" + std::to_string(N) +
         " K=" + std::to_string(K));
  }
  // Row lengths of the stored (untransposed) matrices.
  check_ld("lda", lda, std::max(1, trans_a ? M : K));
  check_ld("ldb", ldb, std::max(1, trans_b ? K : N));
  check_ld("ldc", ldc, std::max(1, N));
  if (M == 0 || N == 0) return;
  if (C == nullptr) fail("C is null");
  if (K > 0 && (A == nullptr || B == nullptr)) fail("A or B is null");
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC) {
  float beta = 0.0f;
  if (bias != nullptr && N > 0 && OC > 0) {
    // Seed every row with the bias and let the GEMM add onto it (beta = 1): one pass over out
    // instead of a GEMM pass plus a separate bias pass.
    const bool parallel = static_cast<size_t>(N) * OC >= detail::kMinParallelElems;
#pragma omp parallel for schedule(static) if (parallel)
    for (int n = 0; n < N; ++n) {
      std::memcpy(out + detail::row_offset(n, OC), bias, sizeof(float) * OC);
    }
    beta = 1.0f;
  }
  sgemm(false, true, N, OC, C, 1.0f, inp, C, weight, C, beta, out, OC);
}

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC) {
  if (dinp != nullptr) sgemm(false, false, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C);
  sgemm(true, false, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
  if (dbias != nullptr && N > 0 && OC > 0) add_column_sums(dbias, dout, N, OC);
}

}  // namespace rm::cpu
