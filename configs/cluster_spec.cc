#include "configs/cluster_spec.h"

#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <set>

#include "configs/config_error.h"
#include "configs/job_file.h"
#include "configs/value_parse.h"
#include "configs/yaml_format.h"
#include "configs/yaml_guard.h"

namespace rm {
namespace {

// At least kSmallest where not 0: a bandwidth of 1e-320 GB/s was taken, and every step of the
// plan took inf s. At most kLargest: far past any machine's (a node of 1e9 GiB, a failure every
// 10^5 years), where the plan's products stay finite (node_mtbf_hours 1e306 made the expected
// loss inf/inf, printed as 100%).
constexpr double kSmallest = 1e-6, kLargest = 1e9;
// Beyond any machine: the planner's products of them stay far inside an int.
constexpr int kMaxNodes = 100000;
constexpr int kMaxDevicesPerNode = 1024;
constexpr int kMaxDevices = 1 << 20;

// What the errors are in, for the count after them.
constexpr const char* kSubject = "the cluster file";

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  void error(const YAML::Node& at, const std::string& key, const std::string& message) {
    ConfigError e;
    e.file = path_;
    if (at && at.Mark().line >= 0) {
      e.line = at.Mark().line + 1;
      e.col = at.Mark().column + 1;
    }
    e.key = key;
    e.message = message;
    errors_.push_back(e);
  }

  // Every key of `map` must be one of `known`, once; names the others. A key given twice is
  // refused as the job loader does: yaml-cpp hands out the first, and which one was meant is a
  // guess (a `nodes: 40` appended below `nodes: 8` planned 8 nodes, silently).
  void only(const YAML::Node& map, const std::string& prefix, const std::set<std::string>& known) {
    if (!map.IsMap()) return;
    std::map<std::string, int> seen;  // key -> its 1-based line
    for (const auto& kv : map) {
      if (!kv.first.IsScalar()) {  // named as the job loader names it ("unknown key" said nothing)
        error(kv.first, prefix, "expected a key name, got " + describe_node(kv.first));
        continue;
      }
      const std::string k = kv.first.Scalar();
      if (!known.count(k)) {
        error(kv.first, prefix + k, "unknown key");
      } else if (const auto [first, fresh] = seen.emplace(k, kv.first.Mark().line + 1); !fresh) {
        error(kv.first, prefix + k,
              "duplicate key (first set on line " + std::to_string(first->second) + ")");
      }
    }
  }

  const YAML::Node* need(const YAML::Node& map, const std::string& prefix, const char* key) {
    if (!map.IsMap() || !map[key]) {
      error(map, prefix + key, "missing");
      return nullptr;
    }
    nodes_.push_back(map[key]);
    return &nodes_.back();
  }

  // A section of keys (device:, intra_node:, ...): a map, else one error naming it -- not one
  // "missing" per key it should hold.
  const YAML::Node* section(const YAML::Node& map, const char* key, const char* holds) {
    const YAML::Node* n = need(map, "", key);
    if (n != nullptr && !n->IsMap()) {
      error(*n, key, std::string("must be a map of ") + holds);
      return nullptr;
    }
    return n;
  }

  // Where not 0: at least kSmallest, and at most `largest` (kLargest unless the caller bounds
  // the value itself).
  double positive(const YAML::Node& map, const std::string& prefix, const char* key,
                  bool zero_ok = false, double largest = kLargest) {
    const YAML::Node* n = need(map, prefix, key);
    if (n == nullptr) return 0;
    // A quoted or tagged scalar ("3", !!str 3) is a string, as the job file reads it too: not
    // read as the number it spells.
    if (n->IsScalar() && n->Tag() != "?") {
      error(*n, prefix + key,
            std::string("must be a ") + (zero_ok ? "non-negative" : "positive") + " number, not " +
                describe_node(*n));
      return 0;
    }
    std::string why = std::string("must be a ") + (zero_ok ? "non-negative" : "positive") +
                      " number, not " +
                      (n->IsNull()     ? std::string("empty")
                       : n->IsScalar() ? "'" + n->Scalar() + "'"
                                       : std::string("a collection"));
    try {
      const double v = n->as<double>();
      if (std::isfinite(v) && v <= largest && (v >= kSmallest || (zero_ok && v == 0))) return v;
      if (std::isfinite(v) && v > largest) {
        why = n->Scalar() + " is too large: at most " + format_double(largest);
      }
      if (std::isfinite(v) && v > 0 && v < kSmallest) {
        why = n->Scalar() + " is too small: at least 1e-06";
      }
    } catch (const YAML::Exception&) {
    }
    error(*n, prefix + key, why);
    return 0;
  }

  // A whole number in [1, max] (a count the planner multiplies: 2^31 nodes overflowed it, and
  // divided by zero). 0 when wrong, with the error added.
  int whole(const YAML::Node& map, const std::string& prefix, const char* key, int max) {
    const double v = positive(map, prefix, key, false, std::numeric_limits<double>::max());
    if (v == 0) return 0;
    if (v != std::floor(v) || v > max) {
      const YAML::Node* n = &nodes_.back();
      error(*n, prefix + key,
            "must be a whole number from 1 to " + std::to_string(max) + ", not '" + n->Scalar() +
                "'");
      return 0;
    }
    return static_cast<int>(v);
  }

  std::string text(const YAML::Node& map, const std::string& prefix, const char* key) {
    const YAML::Node* n = need(map, prefix, key);
    if (n == nullptr) return "";
    if (!n->IsScalar()) {
      error(*n, prefix + key, "must be a string");
      return "";
    }
    return n->Scalar();
  }

  LinkSpec link(const YAML::Node& map, const char* key) {
    LinkSpec l;
    const YAML::Node* n = section(map, key, "bandwidth_gbs and latency_us");
    if (n == nullptr) return l;
    const std::string prefix = std::string(key) + ".";
    only(*n, prefix, {"bandwidth_gbs", "latency_us"});
    l.bandwidth_gbs = positive(*n, prefix, "bandwidth_gbs");
    l.latency_us = positive(*n, prefix, "latency_us", true);
    return l;
  }

  void finish() {
    if (!errors_.empty()) throw JobConfigError(errors_, kSubject);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<ConfigError> errors_;
  // The nodes need() hands out, kept alive while the reader runs. A deque: callers hold pointers
  // to earlier nodes (and pass them back in as maps) while later ones are added, and a vector's
  // growth would free them under them (ASan caught it in `plan --cluster`).
  std::deque<YAML::Node> nodes_;
};

}  // namespace

ClusterSpec read_cluster_file(const std::string& path) {
  Reader r(path);
  std::string body;
  if (const std::string why = read_job_file(path, &body, "cluster file"); !why.empty()) {
    throw JobConfigError({ConfigError{path, 0, 0, "", why}}, kSubject);
  }
  if (const auto problem = check_job_text(body)) {
    throw JobConfigError({ConfigError{path, problem->line, problem->col, "", problem->message}},
                         kSubject);
  }
  YAML::Node root;
  try {
    const std::vector<YAML::Node> docs = load_all_documents(body);
    // A trailing "---" is harmless, as in a job file.
    size_t documents = docs.empty() ? 0 : 1;
    for (size_t i = 1; i < docs.size(); ++i) documents += docs[i].IsNull() ? 0 : 1;
    if (documents != 1) {
      throw JobConfigError({ConfigError{path, 0, 0, "", "expected one YAML document"}}, kSubject);
    }
    root = docs[0];
  } catch (const YAML::Exception& e) {
    throw JobConfigError({ConfigError{path, e.mark.line + 1, e.mark.column + 1, "", e.msg}},
                         kSubject);
  }
  if (!root.IsMap() || yaml_expands_beyond(root)) {
    throw JobConfigError({ConfigError{path, 0, 0, "", "expected a map of cluster keys"}}, kSubject);
  }
  r.only(root, "", {"name", "nodes", "devices_per_node", "device", "node_memory_gib", "intra_node",
                    "inter_node", "filesystem", "node_mtbf_hours"});
  ClusterSpec c;
  c.name = r.text(root, "", "name");
  c.nodes = r.whole(root, "", "nodes", kMaxNodes);
  c.devices_per_node = r.whole(root, "", "devices_per_node", kMaxDevicesPerNode);
  if (int64_t{c.nodes} * c.devices_per_node > kMaxDevices) {
    r.error(root["nodes"], "nodes",
            std::to_string(c.nodes) + " nodes x " + std::to_string(c.devices_per_node) +
                " devices is more than the " + std::to_string(kMaxDevices) +
                " devices the planner plans for");
  }
  if (const YAML::Node* d = r.section(root, "device", "type, name, tflops, mfu, memory_gib")) {
    r.only(*d, "device.", {"type", "name", "tflops", "mfu", "memory_gib"});
    c.device_type = r.text(*d, "device.", "type");
    if (!c.device_type.empty() && c.device_type != "cpu" && c.device_type != "gpu") {
      r.error((*d)["type"], "device.type", "must be cpu or gpu, not '" + c.device_type + "'");
    }
    c.device_name = r.text(*d, "device.", "name");
    c.tflops = r.positive(*d, "device.", "tflops");
    c.mfu = r.positive(*d, "device.", "mfu");
    if (c.mfu > 1) r.error((*d)["mfu"], "device.mfu", "must be at most 1");
    if (c.device_type == "gpu") c.device_memory_gib = r.positive(*d, "device.", "memory_gib");
  }
  c.node_memory_gib = r.positive(root, "", "node_memory_gib");
  c.intra_node = r.link(root, "intra_node");
  c.inter_node = r.link(root, "inter_node");
  if (const YAML::Node* f = r.section(root, "filesystem", "write_gbs")) {
    r.only(*f, "filesystem.", {"write_gbs"});
    c.fs_write_gbs = r.positive(*f, "filesystem.", "write_gbs");
  }
  c.node_mtbf_hours = r.positive(root, "", "node_mtbf_hours");
  r.finish();
  return c;
}

}  // namespace rm
