// The schema table: complete, consistent with job_config.h, and its helpers.
#include "configs/schema.h"
#include "configs/yaml_format.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <set>
#include <utility>

#include "configs/suggest.h"
#include "configs/value_parse.h"

namespace rm {
namespace {

// Counts the members of an aggregate: the largest N for which T{x1, ..., xN} compiles, with
// each xi convertible to anything. A field added to job_config.h without a schema key changes
// the count and fails SchemaCoversEveryField.
struct AnyField {
  template <typename T>
  operator T&() const;  // declared only: used in unevaluated contexts
};
template <typename T, typename... A>
constexpr auto braces_ok(int) -> decltype(T{std::declval<A>()...}, true) {
  return true;
}
template <typename T, typename... A>
constexpr bool braces_ok(...) {
  return false;
}
template <typename T, typename... A>
constexpr size_t field_count() {
  if constexpr (braces_ok<T, A..., AnyField>(0)) {
    return field_count<T, A..., AnyField>();
  } else {
    return sizeof...(A);
  }
}

TEST(Schema, CoversEveryField) {
  // source_path is the only JobConfig field that is not a key.
  EXPECT_EQ(field_count<JobConfig>(), children("").size() + 1);
  EXPECT_EQ(field_count<ModelConfig>(), children("model").size());
  EXPECT_EQ(field_count<DataConfig>(), children("data").size());
  EXPECT_EQ(field_count<TrainConfig>(), children("train").size());
  EXPECT_EQ(field_count<OptimizerConfig>(), children("optimizer").size());
  EXPECT_EQ(field_count<ParallelConfig>(), children("parallel").size());
  EXPECT_EQ(field_count<CheckpointConfig>(), children("checkpoint").size());
  EXPECT_EQ(field_count<ResilienceConfig>(), children("resilience").size());
  EXPECT_EQ(field_count<ObservabilityConfig>(), children("observability").size());
  EXPECT_EQ(field_count<ClusterConfig>(), children("cluster").size());
}

TEST(Schema, KeysAreUniqueAndBindDistinctFields) {
  JobConfig cfg;
  std::set<std::string_view> paths;
  std::set<const void*> fields;
  for (const KeySpec& k : job_schema()) {
    EXPECT_TRUE(paths.insert(k.path).second) << k.path;
    const void* p = std::visit(
        [](auto f) -> const void* {
          if constexpr (std::is_same_v<decltype(f), ChoiceRef>) {
            return f.address();
          } else {
            return f;
          }
        },
        k.field(cfg));
    EXPECT_TRUE(fields.insert(p).second) << k.path;
  }
}

TEST(Schema, EveryKeyHasAOneLineDoc) {
  for (const KeySpec& k : job_schema()) {
    EXPECT_FALSE(k.doc.empty()) << k.path;
    EXPECT_EQ(k.doc.find('\n'), std::string_view::npos) << k.path;
    EXPECT_EQ(k.doc.back(), '.') << k.path;
  }
}

TEST(Schema, SectionsAreContiguousAndOneLevelDeep) {
  // to_yaml() writes each section once; a section split in two would be a duplicate key.
  std::vector<std::string> order;
  for (const KeySpec& k : job_schema()) {
    const size_t dot = k.path.find('.');
    EXPECT_EQ(k.path.find('.', dot == std::string_view::npos ? dot : dot + 1),
              std::string_view::npos)
        << k.path;
    const std::string section(dot == std::string_view::npos ? "" : k.path.substr(0, dot));
    if (order.empty() || order.back() != section) {
      EXPECT_EQ(std::count(order.begin(), order.end(), section), 0) << section;
      order.push_back(section);
    }
  }
}

TEST(Schema, DefaultsSatisfyTheirOwnRules) {
  // Parse each default's YAML text back through the key's own rules.
  for (const KeySpec& k : job_schema()) {
    if (!k.default_note.empty()) continue;
    JobConfig cfg;
    std::vector<ConfigError> errors;
    ErrorSink sink("defaults", &errors);
    const YAML::Node node = YAML::Load(k.default_text());
    EXPECT_TRUE(parse_value(k, node, YAML::Mark(), cfg, sink))
        << k.path << ": " << (errors.empty() ? "" : errors[0].str());
  }
}

TEST(Schema, Types) {
  EXPECT_EQ(find_key("model.width")->type_name(), "int");
  EXPECT_EQ(find_key("train.steps")->type_name(), "int64");
  EXPECT_EQ(find_key("seed")->type_name(), "uint64");
  EXPECT_EQ(find_key("optimizer.lr")->type(), KeyType::kFloat);
  EXPECT_EQ(find_key("parallel.overlap")->type(), KeyType::kBool);
  EXPECT_EQ(find_key("model.type")->type(), KeyType::kEnum);
  EXPECT_EQ(find_key("cluster.partition")->type(), KeyType::kString);
  EXPECT_EQ(find_key("data.train")->type(), KeyType::kStringList);
  EXPECT_EQ(find_key("cluster.env")->type(), KeyType::kStringMap);
  EXPECT_EQ(find_key("model"), nullptr);
  EXPECT_TRUE(is_section("model"));
  EXPECT_FALSE(is_section("model.width"));
  EXPECT_FALSE(is_section("mod"));
}

TEST(Schema, AllowedAndDefaultText) {
  EXPECT_EQ(find_key("model.width")->allowed_text(), ">= 1");
  EXPECT_EQ(find_key("optimizer.lr")->allowed_text(), "> 0");
  EXPECT_EQ(find_key("optimizer.beta2")->allowed_text(), "[0, 1)");
  EXPECT_EQ(find_key("data.val_fraction")->allowed_text(), "[0, 0.5]");
  EXPECT_EQ(find_key("model.type")->allowed_text(), "`gpt`, `mlp`");
  EXPECT_EQ(find_key("run_dir")->default_text(), "runs/<name>");
  EXPECT_EQ(find_key("optimizer.eps")->default_text(), "1.0e-8");
  EXPECT_EQ(find_key("cluster.partition")->default_text(), "\"\"");
  EXPECT_EQ(find_key("data.train")->default_text(), "[]");
}

TEST(Schema, FormatDoubleIsShortestExact) {
  EXPECT_EQ(format_double(0.002), "0.002");
  EXPECT_EQ(format_double(1e-8), "1.0e-8");
  EXPECT_EQ(format_double(25), "25");
  EXPECT_EQ(format_double(6e-5), "6.0e-5");
  EXPECT_EQ(format_double(1e20), "1.0e+20");
  EXPECT_EQ(format_double(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(format_double(300), "300");
  EXPECT_EQ(format_double(120), "120");
  EXPECT_EQ(format_double(-2.5e-3), "-0.0025");
  EXPECT_EQ(format_double(123456789012), "123456789012");
  EXPECT_EQ(format_double(1.5e300), "1.5e+300");
  EXPECT_EQ(format_double(0), "0");
}

TEST(Schema, YamlQuote) {
  EXPECT_EQ(yaml_quote("data/fineweb_train_*.bin"), "data/fineweb_train_*.bin");
  // yaml-cpp cannot read '?' in a plain scalar inside [ ], where lists are written.
  EXPECT_EQ(yaml_quote("data/shard_??.bin"), "\"data/shard_??.bin\"");
  EXPECT_EQ(yaml_quote("gpt2-124m"), "gpt2-124m");
  EXPECT_EQ(yaml_quote(""), "\"\"");
  EXPECT_EQ(yaml_quote("24:00:00"), "\"24:00:00\"");
  EXPECT_EQ(yaml_quote("yes"), "\"yes\"");
  EXPECT_EQ(yaml_quote("123"), "\"123\"");
  EXPECT_EQ(yaml_quote("--constraint=a100"), "\"--constraint=a100\"");
  EXPECT_EQ(yaml_quote("a \"b\"\\"), "\"a \\\"b\\\"\\\\\"");
  EXPECT_EQ(yaml_quote("*x"), "\"*x\"");
  // NEL, LS and PS are line breaks to YAML 1.1 readers (PyYAML folded NEL into a space):
  // escaped, and read back as the same bytes by yaml-cpp.
  const std::string breaks = "e\xc2\x85x\xe2\x80\xa8y\xe2\x80\xa9z\xc3\xa9";
  EXPECT_EQ(yaml_quote(breaks), "\"e\\u0085x\\u2028y\\u2029z\xc3\xa9\"");
  EXPECT_EQ(YAML::Load(yaml_quote(breaks)).as<std::string>(), breaks);
}

TEST(Suggest, EditDistance) {
  EXPECT_EQ(edit_distance("width", "width"), 0);
  EXPECT_EQ(edit_distance("widht", "width"), 1);
  EXPECT_EQ(edit_distance("gtp", "gpt"), 1);
  EXPECT_EQ(edit_distance("", "abc"), 3);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3);
}

TEST(Suggest, ClosestWordAndKey) {
  EXPECT_EQ(closest_word("BF16", {"fp32", "bf16"}), "bf16");
  EXPECT_EQ(closest_word("zero3", {"none", "optimizer", "gradients", "full"}), "");
  EXPECT_EQ(suggest_key("model.widht"), "model.width");
  EXPECT_EQ(suggest_key("modle.width"), "model.width");
  EXPECT_EQ(suggest_key("modle"), "model");
  EXPECT_EQ(suggest_key("train.lr"), "optimizer.lr");
  EXPECT_EQ(suggest_key("model.depth"), "");
  EXPECT_EQ(suggest_key("optimizer.warmup"), "optimizer.warmup_steps");
}

}  // namespace
}  // namespace rm
