#include "kernels/cpu/layernorm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/test_util.h"
#include "kernels/cpu/threads.h"

namespace rm::cpu {
namespace {

using testing::all_close;
using testing::grad_close;
using testing::numeric_grad;
using testing::random_floats;
using testing::to_double;

struct LnRef {
  std::vector<double> out, mean, rstd;
};

LnRef layernorm_ref(const std::vector<double>& x, const std::vector<double>& w,
                    const std::vector<double>& b, int N, int C) {
  LnRef r{std::vector<double>(x.size()), std::vector<double>(N), std::vector<double>(N)};
  for (int n = 0; n < N; ++n) {
    double m = 0.0, v = 0.0;
    for (int c = 0; c < C; ++c) m += x[n * C + c];
    m /= C;
    for (int c = 0; c < C; ++c) v += (x[n * C + c] - m) * (x[n * C + c] - m);
    v /= C;
    const double s = 1.0 / std::sqrt(v + 1e-5);
    for (int c = 0; c < C; ++c) r.out[n * C + c] = (x[n * C + c] - m) * s * w[c] + b[c];
    r.mean[n] = m;
    r.rstd[n] = s;
  }
  return r;
}

// Rows get different offsets and scales, including a large mean (the residual stream drifts).
std::vector<float> make_input(int N, int C, uint32_t seed) {
  auto x = random_floats(static_cast<size_t>(N) * C, seed);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) x[n * C + c] = x[n * C + c] * (1 + n % 3) + (n % 4 == 3 ? 50 : n);
  return x;
}

TEST(LayerNorm, ForwardMatchesReference) {
  const int N = 9, C = 12;
  const auto x = make_input(N, C, 1);
  const auto w = random_floats(C, 2), b = random_floats(C, 3);
  std::vector<float> out(N * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  const LnRef r = layernorm_ref(to_double(x), to_double(w), to_double(b), N, C);
  EXPECT_TRUE(all_close(out, r.out, 1e-4, 1e-5));
  EXPECT_TRUE(all_close(mean, r.mean, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(rstd, r.rstd, 1e-4, 0));
  // mean/rstd are optional (inference).
  std::vector<float> out2(N * C);
  layernorm_forward(out2.data(), nullptr, nullptr, x.data(), w.data(), b.data(), N, C);
  EXPECT_EQ(out, out2);
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  const int N = 9, C = 12;
  const auto x = make_input(N, C, 10);
  const auto w = random_floats(C, 11), b = random_floats(C, 12);
  const auto dout = random_floats(N * C, 13);
  std::vector<float> out(N * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);

  auto xx = to_double(x), xw = to_double(w), xb = to_double(b);
  const auto wd = to_double(dout);
  auto loss = [&] { return testing::dot(layernorm_ref(xx, xw, xb, N, C).out, wd); };
  EXPECT_TRUE(grad_close(dx, numeric_grad(xx, loss))) << "dinp";
  EXPECT_TRUE(grad_close(dw, numeric_grad(xw, loss))) << "dweight";
  EXPECT_TRUE(grad_close(db, numeric_grad(xb, loss))) << "dbias";
}

// dinp ADDS (it is the residual gradient), and so do dweight and dbias.
TEST(LayerNorm, BackwardAddsIntoAllGradients) {
  const int N = 5, C = 12;
  const auto x = make_input(N, C, 20);
  const auto w = random_floats(C, 21), b = random_floats(C, 22);
  const auto dout = random_floats(N * C, 23);
  std::vector<float> out(N * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  std::vector<float> gx(N * C, 0.0f), gw(C, 0.0f), gb(C, 0.0f);
  layernorm_backward(gx.data(), gw.data(), gb.data(), dout.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);

  const auto dx0 = random_floats(N * C, 24), dw0 = random_floats(C, 25), db0 = random_floats(C, 26);
  std::vector<float> dx = dx0, dw = dw0, db = db0;
  for (int rep = 0; rep < 2; ++rep) {
    layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                       mean.data(), rstd.data(), N, C);
  }
  auto twice = [](const std::vector<float>& base, const std::vector<float>& g) {
    std::vector<double> r(base.size());
    for (size_t i = 0; i < r.size(); ++i) r[i] = base[i] + 2.0 * g[i];
    return r;
  };
  EXPECT_TRUE(all_close(dx, twice(dx0, gx), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(dw, twice(dw0, gw), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(db, twice(db0, gb), 1e-6, 1e-6));
}

// GPT-2 width: the parallel paths (rows and column blocks), checked by sampled central
// differences, and the same bits for any thread count.
TEST(LayerNorm, WideBackwardSampledAndThreadCountInvariant) {
  const int N = 50, C = 768;
  const auto x = make_input(N, C, 30);
  const auto w = random_floats(C, 31), b = random_floats(C, 32);
  const auto dout = random_floats(N * C, 33);
  std::vector<float> out(N * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  auto xx = to_double(x), xw = to_double(w), xb = to_double(b);
  EXPECT_TRUE(all_close(out, layernorm_ref(xx, xw, xb, N, C).out, 1e-4, 1e-5));

  const int saved = num_threads();
  std::vector<std::vector<float>> runs;
  for (int threads : {2, 1}) {
    set_num_threads(threads);
    std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
    layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                       mean.data(), rstd.data(), N, C);
    for (auto* v : {&dx, &dw, &db}) runs.push_back(*v);
  }
  set_num_threads(saved);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(runs[i], runs[i + 3]) << "gradient " << i;

  const auto wd = to_double(dout);
  auto loss = [&] { return testing::dot(layernorm_ref(xx, xw, xb, N, C).out, wd); };
  const auto ix = testing::sample_indices(xx.size(), 40, 34);
  const auto iw = testing::sample_indices(C, 20, 35);
  const auto gx = numeric_grad(xx, loss, ix), gw = numeric_grad(xw, loss, iw);
  const auto gb = numeric_grad(xb, loss, iw);
  EXPECT_TRUE(grad_close(testing::pick(runs[0], ix), testing::pick(gx, ix)));
  EXPECT_TRUE(grad_close(testing::pick(runs[1], iw), testing::pick(gw, iw)));
  EXPECT_TRUE(grad_close(testing::pick(runs[2], iw), testing::pick(gb, iw)));
}

}  // namespace
}  // namespace rm::cpu
