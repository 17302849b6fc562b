// The CUDA element-wise kernels (gelu.cu, adamw.cu) against the CPU kernels. Skips without a GPU.
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/gelu.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cuda/cuda_check.h"

namespace rm::cuda {
namespace {

bool have_gpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

std::vector<float> random_floats(size_t n, unsigned seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// A device copy of a host vector, freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<float>& host) : n_(host.size()) {
    RM_CUDA_CHECK(cudaMalloc(&ptr_, n_ * sizeof(float)));
    RM_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), n_ * sizeof(float), cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  float* get() { return static_cast<float*>(ptr_); }
  std::vector<float> to_host() const {
    std::vector<float> h(n_);
    RM_CUDA_CHECK(cudaMemcpy(h.data(), ptr_, n_ * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
  }

 private:
  size_t n_;
  void* ptr_ = nullptr;
};

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float rtol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rtol * std::fabs(want[i]) + 1e-7f) << "at " << i;
  }
}

TEST(CudaElementwise, GeluMatchesCpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int N = 100003;
  const auto x = random_floats(N, 1, -8.0f, 8.0f), dout = random_floats(N, 2, -1.0f, 1.0f);
  std::vector<float> want(N), want_d(N);
  rm::cpu::gelu_forward(want.data(), x.data(), N);
  rm::cpu::gelu_backward(want_d.data(), x.data(), dout.data(), N);
  const std::vector<float> zeros(N, 0.0f);
  DeviceBuffer dx(x), dd(dout), out(zeros), din(zeros);
  gelu_forward(out.get(), dx.get(), N, nullptr);
  gelu_backward(din.get(), dx.get(), dd.get(), N, nullptr);
  RM_CUDA_CHECK(cudaDeviceSynchronize());
  expect_close(out.to_host(), want, 1e-5f);
  expect_close(din.to_host(), want_d, 1e-5f);
}

TEST(CudaElementwise, AdamWMatchesCpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const size_t n = 100003;
  auto p = random_floats(n, 3, -1.0f, 1.0f), m = std::vector<float>(n, 0.0f), v = m;
  DeviceBuffer dp(p), dm(m), dv(v);
  for (int t = 1; t <= 3; ++t) {
    const auto g = random_floats(n, 10 + t, -2.0f, 2.0f);
    DeviceBuffer dg(g);
    rm::cpu::adamw_update(p.data(), g.data(), m.data(), v.data(), n, 1e-2f, 0.9f, 0.95f, 1e-8f,
                          0.1f, t, 0.5f);
    adamw_update(dp.get(), dg.get(), dm.get(), dv.get(), n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t,
                 0.5f, nullptr);
    RM_CUDA_CHECK(cudaDeviceSynchronize());
  }
  expect_close(dp.to_host(), p, 1e-6f);
  expect_close(dm.to_host(), m, 1e-6f);
  expect_close(dv.to_host(), v, 1e-6f);
}

}  // namespace
}  // namespace rm::cuda
