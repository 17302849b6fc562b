#include "worker/data/sample_order.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <vector>

namespace rm {
namespace {

std::vector<uint64_t> order(uint64_t seed, uint64_t epoch, uint64_t n) {
  std::vector<uint64_t> out(n);
  for (uint64_t i = 0; i < n; ++i) out[i] = permute_index(seed, epoch, i, n);
  return out;
}

TEST(SampleOrder, IsABijectionForManySizes) {
  for (uint64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 100, 1000, 1023, 1024, 1025, 4097, 65537}) {
    for (uint64_t epoch : {0, 1, 7}) {
      std::vector<bool> hit(n, false);
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t p = permute_index(1234, epoch, i, n);
        ASSERT_LT(p, n) << "n=" << n;
        ASSERT_FALSE(hit[p]) << "n=" << n << " epoch=" << epoch << " repeats " << p;
        hit[p] = true;
      }
    }
  }
}

TEST(SampleOrder, IsAPureFunction) {
  EXPECT_EQ(order(5, 3, 1000), order(5, 3, 1000));
  // Any single query agrees with the full order, in any call order.
  const std::vector<uint64_t> full = order(5, 3, 1000);
  for (uint64_t i : {999, 0, 500, 17}) EXPECT_EQ(permute_index(5, 3, i, 1000), full[i]);
}

TEST(SampleOrder, EpochsAndSeedsGiveDifferentOrders) {
  for (uint64_t n : {10, 11, 1000, 4097}) {
    EXPECT_NE(order(1, 0, n), order(1, 1, n)) << n;
    EXPECT_NE(order(1, 0, n), order(2, 0, n)) << n;
  }
  std::set<std::vector<uint64_t>> orders;
  for (uint64_t epoch = 0; epoch < 20; ++epoch) orders.insert(order(99, epoch, 1000));
  EXPECT_EQ(orders.size(), 20u);
}

TEST(SampleOrder, ShufflesWell) {
  for (uint64_t n : {10, 12, 1000, 4097}) {
    std::vector<uint64_t> identity(n);
    for (uint64_t i = 0; i < n; ++i) identity[i] = i;
    EXPECT_NE(order(7, 0, n), identity) << n;
  }
  // A random permutation has about 1 fixed point, and its first and second halves mix.
  const uint64_t n = 10000;
  int fixed = 0, first_half_to_first_half = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t p = permute_index(7, 0, i, n);
    fixed += p == i;
    first_half_to_first_half += i < n / 2 && p < n / 2;
  }
  EXPECT_LE(fixed, 8);
  EXPECT_NEAR(first_half_to_first_half, n / 4, 250);  // sd ~25
}

TEST(SampleOrder, HugeDomainsStayInRange) {
  for (uint64_t n : {uint64_t{1} << 40, (uint64_t{1} << 40) + 3, ~uint64_t{0}}) {
    std::set<uint64_t> seen;
    for (uint64_t i = 0; i < 1000; ++i) {
      const uint64_t p = permute_index(3, 1, i * 7919, n);
      EXPECT_LT(p, n);
      seen.insert(p);
    }
    EXPECT_EQ(seen.size(), 1000u);
  }
}

TEST(SampleOrder, KnownValuesAreStable) {
  // Pins the order, like CounterRng.KnownValueIsStable: resume across versions depends on it.
  EXPECT_EQ(permute_index(1337, 0, 0, 1000), 371u);
  EXPECT_EQ(permute_index(1337, 1, 0, 1000), 974u);
}

TEST(SampleOrder, RejectsIndicesOutOfRange) {
  EXPECT_THROW(permute_index(0, 0, 0, 0), std::out_of_range);
  EXPECT_THROW(permute_index(0, 0, 5, 5), std::out_of_range);
  EXPECT_EQ(permute_index(0, 0, 0, 1), 0u);
}

}  // namespace
}  // namespace rm
