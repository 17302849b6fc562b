// to_yaml() and the generated reference doc.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "configs/job_loader.h"
#include "configs/schema.h"
#include "configs/test_util.h"

namespace rm {
namespace {

using testing::repo_path;

// The key paths of a YAML document, stopping at schema keys (a map-typed key is one key).
void collect_keys(const YAML::Node& map, const std::string& prefix, std::set<std::string>* out) {
  for (const auto& kv : map) {
    const std::string path = prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar();
    if (kv.second.IsMap() && !find_key(path)) {
      collect_keys(kv.second, path, out);
    } else {
      out->insert(path);
    }
  }
}

TEST(ToYaml, HasExactlyTheSchemasKeys) {
  JobConfig cfg;
  cfg.cluster.env = {{"A", "1"}};
  std::set<std::string> written, schema;
  collect_keys(YAML::Load(to_yaml(cfg)), "", &written);
  for (const KeySpec& k : job_schema()) schema.insert(std::string(k.path));
  EXPECT_EQ(written, schema);
}

TEST(ToYaml, RoundTrips) {
  JobConfig cfg = load_job(repo_path("configs/gpt2-124m.yaml"), {}, 64);
  // Values that need quoting or exact float printing.
  cfg.cluster.env = {{"NCCL_DEBUG", "INFO"}, {"WEIRD", "a: b, \"c\" #d"}};
  cfg.cluster.sbatch_extra = {"--constraint=a100", "--exclusive"};
  cfg.optimizer.lr = 0.1 + 0.2;
  cfg.seed = 18446744073709551615ull;
  cfg.name = "123";
  const std::string once = to_yaml(cfg);
  const JobConfig back = load_job_from_string(once, "resolved.yaml", {}, 64);
  EXPECT_EQ(to_yaml(back), once);
  EXPECT_EQ(back.cluster.env, cfg.cluster.env);
  EXPECT_EQ(back.optimizer.lr, cfg.optimizer.lr);
  EXPECT_EQ(back.name, "123");
  EXPECT_EQ(back.run_dir, "runs/gpt2-124m");
}

TEST(ToYaml, CodeBuiltConfigRoundTrips) {
  JobConfig cfg;
  cfg.name = "coded";
  cfg.data.train = {"a.txt"};
  const std::string once = to_yaml(cfg);
  EXPECT_NE(once.find("run_dir: runs/coded\n"), std::string::npos);
  EXPECT_EQ(to_yaml(load_job_from_string(once, "resolved.yaml")), once);
}

TEST(ToYaml, Layout) {
  const std::string yaml = to_yaml(load_job(repo_path("configs/shakespeare.yaml")));
  EXPECT_NE(yaml.find("name: shakespeare\nrun_dir: runs/shakespeare\nseed: 1337\n\nmodel:\n"
                      "  type: gpt\n"),
            std::string::npos)
      << yaml;
  EXPECT_NE(yaml.find("  train: [data/tinyshakespeare.txt]\n"), std::string::npos);
  EXPECT_NE(yaml.find("  lr: 0.003\n"), std::string::npos);
  EXPECT_NE(yaml.find("  env: {}\n"), std::string::npos);
}

TEST(ReferenceDoc, OneRowPerKey) {
  const std::string md = job_reference_markdown();
  EXPECT_EQ(static_cast<size_t>(std::count(md.begin(), md.end(), '\n')), job_schema().size() + 2);
  EXPECT_NE(md.find("| `model.type` | enum | `gpt` | `gpt`, `mlp` | "), std::string::npos);
  EXPECT_NE(md.find("| `run_dir` | string | `runs/<name>` |  | "), std::string::npos);
}

// docs/job-reference.md must hold exactly what the schema generates between its markers.
TEST(ReferenceDoc, CommittedCopyIsCurrent) {
  const std::string path = repo_path("docs/job-reference.md");
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string doc = buf.str();
  const std::string begin = "<!-- BEGIN GENERATED -->\n", end = "<!-- END GENERATED -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_TRUE(b != std::string::npos && e != std::string::npos && b < e)
      << path << " lacks the markers " << begin << " and " << end;
  const std::string generated = job_reference_markdown();
  if (doc.substr(b + begin.size(), e - b - begin.size()) == generated) return;
  const std::string fresh = std::string(RM_CONFIGS_BUILD_DIR) + "/job-reference.md";
  std::ofstream(fresh) << doc.substr(0, b + begin.size()) << generated << doc.substr(e);
  FAIL() << "docs/job-reference.md is out of date with configs/schema.cc. The regenerated file "
            "is\n  "
         << fresh << "\nto update: cp " << fresh << " " << path;
}

}  // namespace
}  // namespace rm
