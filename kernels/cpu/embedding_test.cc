#include "kernels/cpu/embedding.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/cpu/test_util.h"
#include "kernels/cpu/threads.h"

namespace rm::cpu {
namespace {

using testing::all_close;
using testing::grad_close;
using testing::numeric_grad;
using testing::random_floats;
using testing::random_ints;
using testing::to_double;

std::vector<double> embedding_ref(const std::vector<int>& tok, const std::vector<double>& wte,
                                  const std::vector<double>& wpe, int B, int T, int C) {
  std::vector<double> out(static_cast<size_t>(B) * T * C);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < C; ++c)
        out[(b * T + t) * C + c] =
            wte[tok[b * T + t] * C + c] + (wpe.empty() ? 0.0 : wpe[t * C + c]);
  return out;
}

TEST(Embedding, ForwardMatchesReference) {
  const int B = 3, T = 7, C = 12, V = 10, Tmax = 9;
  const auto tok = random_ints(B * T, 1, 0, V - 1);
  const auto wte = random_floats(V * C, 2), wpe = random_floats(Tmax * C, 3);
  std::vector<float> out(B * T * C, testing::kNaN);
  embedding_forward(out.data(), tok.data(), wte.data(), wpe.data(), B, T, C);
  EXPECT_TRUE(all_close(out, embedding_ref(tok, to_double(wte), to_double(wpe), B, T, C), 1e-7, 0));
  embedding_forward(out.data(), tok.data(), wte.data(), nullptr, B, T, C);
  EXPECT_TRUE(all_close(out, embedding_ref(tok, to_double(wte), {}, B, T, C), 0, 0));
}

// Few tokens, so most are repeated: the scatter-add must not lose updates.
TEST(Embedding, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const int B = 3, T = 7, C = 12, V = 5;
  const auto tok = random_ints(B * T, 4, 0, V - 1);
  const auto wte = random_floats(V * C, 5), wpe = random_floats(T * C, 6);
  const auto dout = random_floats(B * T * C, 7);
  const auto dwte0 = random_floats(V * C, 8), dwpe0 = random_floats(T * C, 9);
  std::vector<float> dwte = dwte0, dwpe = dwpe0;
  embedding_backward(dwte.data(), dwpe.data(), dout.data(), tok.data(), B, T, C);

  auto xte = to_double(wte), xpe = to_double(wpe);
  const auto wd = to_double(dout);
  auto loss = [&] { return testing::dot(embedding_ref(tok, xte, xpe, B, T, C), wd); };
  auto gte = numeric_grad(xte, loss), gpe = numeric_grad(xpe, loss);
  for (size_t i = 0; i < gte.size(); ++i) gte[i] += dwte0[i];  // ACCUMULATED onto the prefill
  for (size_t i = 0; i < gpe.size(); ++i) gpe[i] += dwpe0[i];
  EXPECT_TRUE(grad_close(dwte, gte, 1e-6));
  EXPECT_TRUE(grad_close(dwpe, gpe, 1e-6));

  std::vector<float> only_te = dwte0;  // null dwpe: only the token table is touched
  embedding_backward(only_te.data(), nullptr, dout.data(), tok.data(), B, T, C);
  EXPECT_EQ(only_te, dwte);
}

// Parallel path (channel slices per thread), many repeated tokens, and the same bits for any
// thread count.
TEST(Embedding, LargeBackwardIsExactAndThreadCountInvariant) {
  const int B = 4, T = 64, C = 200, V = 3;
  const auto tok = random_ints(B * T, 10, 0, V - 1);
  const auto dout = random_floats(B * T * C, 11);
  std::vector<double> want_te(V * C, 0.0), want_pe(T * C, 0.0);
  for (int n = 0; n < B * T; ++n)
    for (int c = 0; c < C; ++c) {
      want_te[tok[n] * C + c] += dout[n * C + c];
      want_pe[(n % T) * C + c] += dout[n * C + c];
    }
  const int saved = num_threads();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    std::vector<float> dwte(V * C, 0.0f), dwpe(T * C, 0.0f);
    embedding_backward(dwte.data(), dwpe.data(), dout.data(), tok.data(), B, T, C);
    EXPECT_TRUE(all_close(dwte, want_te, 1e-5, 1e-5)) << threads << " threads";
    EXPECT_TRUE(all_close(dwpe, want_pe, 1e-5, 1e-5)) << threads << " threads";
    results.push_back(dwte);
  }
  set_num_threads(saved);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

}  // namespace
}  // namespace rm::cpu
