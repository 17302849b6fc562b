// Helpers for the CPU kernel tests: random data, tolerance checks, central differences.
// The tests compare float kernels against small double-precision reference loops.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

namespace rm::cpu::testing {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

inline std::vector<int> random_ints(size_t n, uint32_t seed, int lo, int hi_inclusive) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(lo, hi_inclusive);
  std::vector<int> v(n);
  for (int& x : v) x = dist(gen);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Passes when |got[i] - want[i]| <= atol + rtol * |want[i]| for every i (NaN never passes).
inline ::testing::AssertionResult all_close(const float* got, const double* want, size_t n,
                                            double rtol, double atol) {
  size_t bad = 0, first = 0;
  double worst = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= atol + rtol * std::fabs(want[i]))) {
      if (bad++ == 0) first = i;
      if (!(err <= worst)) worst = err;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os.precision(9);
  os << bad << " of " << n << " elements differ; first at " << first << ": got " << got[first]
     << " want " << want[first] << "; worst abs err " << worst << " (rtol " << rtol << ", atol "
     << atol << ")";
  return ::testing::AssertionFailure() << os.str();
}

inline ::testing::AssertionResult all_close(const std::vector<float>& got,
                                            const std::vector<double>& want, double rtol,
                                            double atol) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size mismatch";
  return all_close(got.data(), want.data(), got.size(), rtol, atol);
}

// Gradient comparison: element-wise relative, with an absolute floor scaled to the largest
// entry (entries near zero have no meaningful relative error).
inline ::testing::AssertionResult grad_close(const std::vector<float>& got,
                                             const std::vector<double>& want, double rtol = 1e-4) {
  return all_close(got, want, rtol, rtol * std::max(max_abs(want), 1e-30));
}

// Central differences of loss() with respect to x[i], for i in indices (all when empty).
// x is perturbed in place and restored. Entries not in indices are left 0.
template <class Loss>
std::vector<double> numeric_grad(std::vector<double>& x, Loss&& loss,
                                 const std::vector<size_t>& indices = {}, double h = 1e-6) {
  std::vector<double> g(x.size(), 0.0);
  auto one = [&](size_t i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double up = loss();
    x[i] = x0 - h;
    const double down = loss();
    x[i] = x0;
    g[i] = (up - down) / (2 * h);
  };
  if (indices.empty()) {
    for (size_t i = 0; i < x.size(); ++i) one(i);
  } else {
    for (size_t i : indices) one(i);
  }
  return g;
}

// count distinct random indices in [0, n), sorted.
inline std::vector<size_t> sample_indices(size_t n, size_t count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<size_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = i;
  std::shuffle(all.begin(), all.end(), gen);
  all.resize(std::min(n, count));
  std::sort(all.begin(), all.end());
  return all;
}

// Keeps only the entries at indices (for comparing against a sampled numeric gradient).
template <class T>
std::vector<T> pick(const std::vector<T>& v, const std::vector<size_t>& indices) {
  std::vector<T> out;
  out.reserve(indices.size());
  for (size_t i : indices) out.push_back(v[i]);
  return out;
}

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

}  // namespace rm::cpu::testing
