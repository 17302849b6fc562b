// The typed choices: each enum's words round-trip, a wrong word is refused, and the facts a
// shard mode implies are the ZeRO table of docs/DESIGN.md.
#include "configs/job_choices.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "configs/schema.h"

namespace rm {
namespace {

template <typename E>
void expect_round_trip() {
  std::set<std::string> seen;
  for (const E e : every_choice<E>()) {
    const std::string word = choice_name(e);
    EXPECT_TRUE(seen.insert(word).second) << word << " spelled twice";
    E back{};
    ASSERT_TRUE(parse_choice(word, &back)) << word;
    EXPECT_EQ(back, e) << word;
    EXPECT_EQ(choice_of<E>(word), e) << word;
  }
  E untouched = every_choice<E>().back();
  EXPECT_FALSE(parse_choice("FULL", &untouched));  // exact and case-sensitive
  EXPECT_EQ(untouched, every_choice<E>().back());
}

TEST(JobChoices, EveryWordRoundTrips) {
  expect_round_trip<ModelType>();
  expect_round_trip<DataFormat>();
  expect_round_trip<OptimizerName>();
  expect_round_trip<LrScheduleKind>();
  expect_round_trip<Backend>();
  expect_round_trip<ShardMode>();
  expect_round_trip<Precision>();
  expect_round_trip<OnSaveError>();
  expect_round_trip<OnNan>();
}

TEST(JobChoices, AWordOfNoChoiceIsRefusedNamingTheChoices) {
  try {
    choice_of<ShardMode>("zero3");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "'zero3' is not one of none|optimizer|gradients|full");
  }
}

// What each ZeRO stage keeps whole on every rank and what it shards.
TEST(JobChoices, ShardModesKeepAndShardWhatZeroSays) {
  struct Row {
    ShardMode mode;
    bool all_params, all_grads, sharded_moments;
  };
  for (const Row& r : {Row{ShardMode::kNone, true, true, false},
                       Row{ShardMode::kOptimizer, true, true, true},
                       Row{ShardMode::kGradients, true, false, true},
                       Row{ShardMode::kFull, false, false, true}}) {
    SCOPED_TRACE(choice_name(r.mode));
    EXPECT_EQ(keeps_all_params(r.mode), r.all_params);
    EXPECT_EQ(keeps_all_grads(r.mode), r.all_grads);
    EXPECT_EQ(shards_optimizer_state(r.mode), r.sharded_moments);
  }
  EXPECT_EQ(bytes_per_element(Precision::kFp32), 4);
  EXPECT_EQ(bytes_per_element(Precision::kBf16), 2);
}

// The schema takes each choice-valued key's words from its enum, so the reference and the
// loader cannot list other words.
TEST(JobChoices, TheSchemaListsTheEnumsWords) {
  const KeySpec* shard = find_key("parallel.shard");
  ASSERT_NE(shard, nullptr);
  EXPECT_EQ(shard->type(), KeyType::kEnum);
  EXPECT_EQ(shard->allowed.choices, choice_words<ShardMode>());
  EXPECT_EQ(shard->allowed_text(), "`none`, `optimizer`, `gradients`, `full`");
  const KeySpec* reduce = find_key("parallel.grad_reduce");
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(reduce->allowed.choices, choice_words<Precision>());
  EXPECT_EQ(reduce->default_text(), "fp32");
}

}  // namespace
}  // namespace rm
