#include "testing/order_checking_compute.h"

#include <cstdint>

namespace rm {
namespace {

// Bytes spanned by a row-major rows x cols float matrix with row stride ld.
size_t matrix_bytes(int rows, int cols, int ld) {
  if (rows <= 0 || cols <= 0) return 0;
  return (static_cast<size_t>(rows - 1) * ld + cols) * sizeof(float);
}

}  // namespace

// ---- Memory ----------------------------------------------------------------------------------

void* OrderCheckingCompute::named(void* p, size_t bytes, const char* kind, int& count) {
  ledger_.name_memory(p, bytes, kind + ("#" + std::to_string(++count)));
  return p;
}

void OrderCheckingCompute::forget(const char* call, void* memory) {
  // Both cuda releases wait for the compute and the side stream first: a fence of every
  // download. A collective still using the memory is another matter.
  ledger_.fence_downloads(UINT64_MAX);
  ledger_.release(call, memory);
  ledger_.forget_memory(memory);
}

void* OrderCheckingCompute::allocate(size_t bytes) {
  return named(inner_.allocate(bytes), bytes, "compute.allocate", allocations_);
}

void OrderCheckingCompute::release(void* memory) {
  if (memory == nullptr) return;
  forget("release", memory);
  inner_.release(memory);
}

void* OrderCheckingCompute::allocate_host(size_t bytes) {
  return named(inner_.allocate_host(bytes), bytes, "allocate_host", host_allocations_);
}

void OrderCheckingCompute::release_host(void* memory) {
  if (memory == nullptr) return;
  forget("release_host", memory);
  inner_.release_host(memory);
}

void OrderCheckingCompute::upload(void* dst, const void* host_src, size_t bytes) {
  ledger_.host_access("upload", host_src, bytes, OrderLedger::Access::kRead);
  write("upload", dst, bytes);
  inner_.upload(dst, host_src, bytes);
}

void OrderCheckingCompute::download(void* host_dst, const void* src, size_t bytes) {
  read("download", src, bytes);
  ledger_.host_access("download", host_dst, bytes, OrderLedger::Access::kWrite);
  inner_.download(host_dst, src, bytes);
}

void OrderCheckingCompute::copy(void* dst, const void* src, size_t bytes) {
  elementwise("copy", static_cast<char*>(dst), static_cast<const char*>(src), bytes);
  inner_.copy(dst, src, bytes);
}

void OrderCheckingCompute::zero(void* dst, size_t bytes) {
  write("zero", dst, bytes);
  inner_.zero(dst, bytes);
}

void OrderCheckingCompute::download_async(void* host_dst, const void* src, size_t bytes) {
  // The side stream starts after the compute calls made so far, but not after a collective in
  // flight: it would copy values that are still changing.
  read("download_async", src, bytes);
  if (bytes > 0) ledger_.add_download(host_dst, src, bytes);
}


std::function<void()> OrderCheckingCompute::downloads_fence() {
  // Covers the downloads queued so far, not later ones (as a cuda event recorded now would).
  OrderLedger* ledger = &ledger_;
  const uint64_t last = ledger_.last_download_id();
  return [ledger, last] { ledger->fence_downloads(last); };
}

// ---- GEMM, optimizer, reductions, casts -----------------------------------------------------

void OrderCheckingCompute::sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                                 const float* A, int lda, const float* B, int ldb, float beta,
                                 float* C, int ldc) {
  read("sgemm", A, trans_a ? matrix_bytes(K, M, lda) : matrix_bytes(M, K, lda));
  read("sgemm", B, trans_b ? matrix_bytes(N, K, ldb) : matrix_bytes(K, N, ldb));
  write("sgemm", C, matrix_bytes(M, N, ldc));
  inner_.sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void OrderCheckingCompute::adamw_update(float* params, const float* grads, float* m, float* v,
                                        size_t n, float lr, float beta1, float beta2, float eps,
                                        float weight_decay, int64_t t, float grad_scale) {
  const size_t bytes = n * sizeof(float);
  read("adamw_update", grads, bytes);
  write("adamw_update", params, bytes);
  write("adamw_update", m, bytes);
  write("adamw_update", v, bytes);
  inner_.adamw_update(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, t, grad_scale);
}

double OrderCheckingCompute::sum_squares(const float* x, size_t n) {
  read("sum_squares", x, n * sizeof(float));
  return inner_.sum_squares(x, n);
}

void OrderCheckingCompute::sum_squares_into(double* dst, const float* x, size_t n) {
  read("sum_squares_into", x, n * sizeof(float));
  write("sum_squares_into", dst, sizeof(double));
  inner_.sum_squares_into(dst, x, n);
}

void OrderCheckingCompute::adamw_update_ranges(float* params, const float* grads, float* m,
                                               float* v, const std::vector<AdamWRange>& ranges,
                                               float lr, float beta1, float beta2, float eps,
                                               float weight_decay, int64_t t, float grad_scale,
                                               bf16* rounded, const AdamWGuard* guard) {
  if (guard != nullptr) read("adamw_update_ranges", guard->scalars, sizeof(StepScalars));
  // The default: adamw_update (checked above) and cast per range.
  Compute::adamw_update_ranges(params, grads, m, v, ranges, lr, beta1, beta2, eps, weight_decay, t,
                               grad_scale, rounded, guard);
}

void OrderCheckingCompute::add_inplace(float* acc, const float* x, size_t n) {
  elementwise("add_inplace", acc, x, n);
  inner_.add_inplace(acc, x, n);
}

void OrderCheckingCompute::add_inplace(float* acc, const bf16* x, size_t n) {
  elementwise("add_inplace(bf16)", acc, x, n);
  inner_.add_inplace(acc, x, n);
}

void OrderCheckingCompute::scale(float* x, size_t n, float s) {
  write("scale", x, n * sizeof(float));
  inner_.scale(x, n, s);
}

void OrderCheckingCompute::cast(bf16* dst, const float* src, size_t n) {
  elementwise("cast(f32->bf16)", dst, src, n);
  inner_.cast(dst, src, n);
}

void OrderCheckingCompute::cast(float* dst, const bf16* src, size_t n) {
  elementwise("cast(bf16->f32)", dst, src, n);
  inner_.cast(dst, src, n);
}

}  // namespace rm
