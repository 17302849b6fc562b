// The next-token choice of `ringmaster sample`: greedy, the plain softmax draw, and top-k and
// nucleus filtering on logits whose probabilities are known.
#include "model/token_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <stdexcept>
#include <vector>

namespace rm {
namespace {

// Logits whose softmax at temperature 1 is p.
std::vector<float> logits_of(const std::vector<double>& p) {
  std::vector<float> out;
  for (double x : p) out.push_back(static_cast<float>(std::log(x)));
  return out;
}

std::set<int> picks(const std::vector<float>& logits, const SamplingOptions& o, int draws = 1000) {
  std::set<int> out;
  for (int i = 0; i < draws; ++i) {
    out.insert(pick_token(logits.data(), static_cast<int>(logits.size()), o, (i + 0.5f) / draws));
  }
  return out;
}

TEST(TokenSampler, TemperatureZeroAndTopKOneAreGreedy) {
  const std::vector<float> l = logits_of({0.1, 0.2, 0.4, 0.2, 0.1});
  EXPECT_EQ(picks(l, {0.0, 0, 1.0}), std::set<int>({2}));
  EXPECT_EQ(picks(l, {1.0, 1, 1.0}), std::set<int>({2}));
  // The first of equal logits.
  const std::vector<float> tie = {1.0f, 3.0f, 3.0f};
  EXPECT_EQ(picks(tie, {0.0, 0, 1.0}), std::set<int>({1}));
  EXPECT_EQ(picks(tie, {1.0, 1, 1.0}), std::set<int>({1}));
}

// No filtering: the inverse CDF in id order, as sample always drew (same seed, same text).
TEST(TokenSampler, UnfilteredIsTheSoftmaxInverseCdfInIdOrder) {
  const std::vector<float> l = logits_of({0.25, 0.5, 0.25});
  const SamplingOptions o{1.0, 0, 1.0};
  EXPECT_EQ(pick_token(l.data(), 3, o, 0.10f), 0);
  EXPECT_EQ(pick_token(l.data(), 3, o, 0.30f), 1);
  EXPECT_EQ(pick_token(l.data(), 3, o, 0.70f), 1);
  EXPECT_EQ(pick_token(l.data(), 3, o, 0.80f), 2);
  EXPECT_EQ(picks(l, o), std::set<int>({0, 1, 2}));
  // top_k at least the vocabulary is no filtering.
  EXPECT_EQ(pick_token(l.data(), 3, {1.0, 3, 1.0}, 0.10f), 0);
}

TEST(TokenSampler, TopKDrawsOnlyAmongTheKMostLikely) {
  std::vector<float> l(50);
  for (int i = 0; i < 50; ++i) l[i] = static_cast<float>((i * 37) % 50) * 0.1f;  // a permutation
  std::set<int> top;
  for (int i = 0; i < 50; ++i) {
    if ((i * 37) % 50 >= 45) top.insert(i);
  }
  ASSERT_EQ(top.size(), 5u);
  EXPECT_EQ(picks(l, {1.0, 5, 1.0}), top);
  EXPECT_EQ(picks(l, {1.0, 0, 1.0}).size(), 50u) << "unfiltered, every token can come";
}

// Probabilities 0.5, 0.3, 0.15, 0.05 in the order 2, 0, 3, 1 of ids.
TEST(TokenSampler, TopPKeepsTheShortestPrefixThatReachesIt) {
  const std::vector<float> l = logits_of({0.3, 0.05, 0.5, 0.15});
  EXPECT_EQ(picks(l, {1.0, 0, 0.5}), std::set<int>({2}));
  EXPECT_EQ(picks(l, {1.0, 0, 0.79}), std::set<int>({2, 0}));
  EXPECT_EQ(picks(l, {1.0, 0, 0.81}), std::set<int>({2, 0, 3}));
  EXPECT_EQ(picks(l, {1.0, 0, 1.0}), std::set<int>({0, 1, 2, 3}));
  // Within the nucleus {2, 0} the draw is renormalised: 2 for u < 0.5 / 0.8, then 0.
  const SamplingOptions o{1.0, 0, 0.79};
  EXPECT_EQ(pick_token(l.data(), 4, o, 0.62f), 2);
  EXPECT_EQ(pick_token(l.data(), 4, o, 0.63f), 0);
  // top_k first, then top_p over what top_k kept: {2, 0} renormalised to 0.625, 0.375.
  EXPECT_EQ(picks(l, {1.0, 2, 0.6}), std::set<int>({2}));
  EXPECT_EQ(picks(l, {1.0, 2, 0.7}), std::set<int>({2, 0}));
}

TEST(TokenSampler, RefusesOptionsOutOfRange) {
  const std::vector<float> l = {0.0f, 1.0f};
  EXPECT_THROW(pick_token(l.data(), 2, {-1.0, 0, 1.0}, 0.5f), std::invalid_argument);
  EXPECT_THROW(pick_token(l.data(), 2, {1.0, -1, 1.0}, 0.5f), std::invalid_argument);
  EXPECT_THROW(pick_token(l.data(), 2, {1.0, 0, 0.0}, 0.5f), std::invalid_argument);
  EXPECT_THROW(pick_token(l.data(), 2, {1.0, 0, 1.5}, 0.5f), std::invalid_argument);
}

// A NaN or infinite logit is said, naming the token, in every mode (before: the last token every
// time unfiltered, token 0 greedy, a broken ordering for the sort with top-k or top-p).
TEST(TokenSampler, ALogitThatIsNotFiniteIsSaid) {
  for (const float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    const std::vector<float> l = {0.5f, bad, 1.0f};
    for (const SamplingOptions& o : {SamplingOptions{0.0, 0, 1.0}, SamplingOptions{1.0, 0, 1.0},
                                     SamplingOptions{1.0, 2, 0.9}}) {
      try {
        pick_token(l.data(), 3, o, 0.5f);
        ADD_FAILURE() << "no error for " << bad;
      } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("logit of token 1"), std::string::npos) << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace rm
