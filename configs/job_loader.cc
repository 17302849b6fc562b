#include "configs/job_loader.h"

#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include <yaml-cpp/yaml.h>

#include "configs/job_checks.h"
#include "configs/job_file.h"
#include "configs/schema.h"
#include "configs/suggest.h"
#include "configs/value_parse.h"
#include "configs/yaml_guard.h"

namespace rm {
namespace {

// Where a key or section got its value, so cross-field errors can point at it.
struct Origin {
  bool from_override = false;
  YAML::Mark mark;  // in the job file
};

// A key longer than this is no schema key; it is reported cut short (and never spell-checked).
constexpr size_t kMaxKeyBytes = 256;

// One load: the config being filled, the errors so far, and what came from where.
class Loader {
 public:
  Loader(std::string display_name, std::string source_path) : file_(std::move(display_name)) {
    cfg_.source_path = std::move(source_path);
  }

  void load_text(const std::string& text);
  void apply_override(const std::string& text);
  // Fills derived defaults, runs the cross-field checks, throws if anything was wrong.
  // cross_field: the rules between keys (check_job_if) too; a stored job is read without them.
  JobConfig finish(int dp_ranks, bool cross_field = true);
  // The text read without an error, and gave no key at all.
  bool gave_nothing() const { return origins_.empty() && errors_.empty(); }

 private:
  // Refuses the whole text (an error without a key): the guards of yaml_guard.h.
  void refuse_text(ErrorSink& sink, int line, int col, const std::string& message);
  void walk_map(const YAML::Node& map, const std::string& prefix, ErrorSink& sink);
  void apply(const std::string& path, const YAML::Node& value, const YAML::Mark& key_mark,
             ErrorSink& sink);
  // The map-typed key `path` is an entry of ("cluster.env.FOO" -> cluster.env), or nullptr.
  static const KeySpec* map_parent(const std::string& path);
  bool usable(std::string_view key) const;
  void locate(ConfigError& e) const;

  std::string file_;
  JobConfig cfg_;
  std::vector<ConfigError> errors_;
  std::map<std::string, Origin> origins_;
  std::set<std::string> bad_;  // keys and sections whose value was rejected; "" = the whole file
};

void Loader::refuse_text(ErrorSink& sink, int line, int col, const std::string& message) {
  YAML::Mark mark = YAML::Mark::null_mark();
  if (line > 0) {
    mark = YAML::Mark();
    mark.line = line - 1;
    mark.column = col - 1;
  }
  sink.add("", mark, message);
  bad_.insert("");
}

void Loader::load_text(const std::string& text) {
  ErrorSink sink(file_, &errors_);
  // Before yaml-cpp: size, encoding, nesting, aliases, entries (yaml_guard.h says why).
  if (const auto p = check_job_text(text)) return refuse_text(sink, p->line, p->col, p->message);
  std::vector<YAML::Node> docs;
  try {
    docs = load_all_documents(text);  // YAML::LoadAll, which can hang on invalid YAML
  } catch (const YAML::Exception& e) {
    sink.add("", e.mark, "invalid YAML: " + e.msg);  // yaml-cpp stops at the first
    bad_.insert("");
    return;
  }
  for (size_t i = 1; i < docs.size(); ++i) {
    if (docs[i].IsNull()) continue;  // a trailing "---" is harmless
    sink.add("", docs[i].Mark(), "a job file holds one YAML document; found a second one");
    bad_.insert("");
    return;
  }
  const YAML::Node root = docs.empty() ? YAML::Node() : docs[0];
  if (!root.IsDefined() || root.IsNull()) return;  // empty: the required keys will say so
  // After: yaml-cpp shares aliased nodes, a walk expands them ("billion laughs").
  if (yaml_expands_beyond(root)) {
    return refuse_text(sink, 0, 0,
                       "aliases expand to more than " + std::to_string(kMaxYamlNodes) +
                           " nodes (anchors that reference anchors: a \"billion laughs\" file?)");
  }
  if (!root.IsMap()) {
    sink.add("", root.Mark(),
             "the top level must be a map of sections (name:, model:, data:, train:, ...), got " +
                 describe_node(root));
    bad_.insert("");
    return;
  }
  walk_map(root, "", sink);
}

void Loader::walk_map(const YAML::Node& map, const std::string& prefix, ErrorSink& sink) {
  std::map<std::string, int> seen;  // key -> its 1-based line
  for (const auto& kv : map) {
    const YAML::Mark key_mark = kv.first.Mark();
    if (!kv.first.IsScalar()) {
      sink.add(prefix, key_mark, "expected a key name, got " + describe_node(kv.first));
      continue;
    }
    const std::string name = kv.first.Scalar();
    if (name.empty()) {
      // "" would name the whole job again (a section path of ""), applied over the keys set
      // before it with no duplicate seen: `"": {model: {width: 8}}` silently replaced width.
      sink.add(prefix, key_mark, "expected a key name, got an empty string");
      continue;
    }
    if (name.size() > kMaxKeyBytes) {
      sink.add(prefix, key_mark, "unknown key " + shown_text(name));
      continue;
    }
    const std::string path = prefix.empty() ? name : prefix + "." + name;
    const auto [first, fresh] = seen.emplace(name, key_mark.line + 1);
    if (!fresh) {
      // yaml-cpp keeps both entries of a duplicated key; YAML forbids them, and which one
      // should win is a guess, so neither is applied silently.
      sink.add(path, key_mark,
               "duplicate key (first set on line " + std::to_string(first->second) + ")");
      bad_.insert(path);
      continue;
    }
    if (name.find('.') != std::string::npos) {
      sink.add(path, key_mark,
               "unknown key '" + name +
                   "'; a job file nests keys as maps (model: then width: indented); dotted "
                   "paths are for --set");
      continue;
    }
    apply(path, kv.second, key_mark, sink);
  }
}

const KeySpec* Loader::map_parent(const std::string& path) {
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos) return nullptr;
  const KeySpec* parent = find_key(path.substr(0, dot));
  return parent && parent->type() == KeyType::kStringMap ? parent : nullptr;
}

void Loader::apply(const std::string& path, const YAML::Node& value, const YAML::Mark& key_mark,
                   ErrorSink& sink) {
  if (const KeySpec* spec = find_key(path)) {
    origins_[path] = {sink.is_override(), value_mark(value, key_mark)};
    if (parse_value(*spec, value, key_mark, cfg_, sink)) {
      // A good override after a bad file value: the file's error stands, but the cross-field
      // checks may use the value now.
      bad_.erase(path);
    } else {
      bad_.insert(path);
    }
    return;
  }
  if (is_section(path)) {
    origins_[path] = {sink.is_override(), key_mark};
    if (!value.IsDefined() || value.IsNull()) return;  // an empty section: all defaults
    if (!value.IsMap()) {
      std::string keys;
      for (const std::string& c : children(path)) keys += (keys.empty() ? "" : ", ") + c;
      sink.add(
          path, value_mark(value, key_mark),
          "is a section: expected a map of its keys (" + keys + "), got " + describe_node(value));
      bad_.insert(path);
      return;
    }
    walk_map(value, path, sink);
    return;
  }
  if (const KeySpec* parent = map_parent(path)) {
    const std::string parent_path(parent->path);
    // The entry's own origin, not the map's: an override of cluster.env.B made an error in the
    // file's cluster.env.A read as the override's, losing its file and line. The map keeps its
    // origin for the entries set with it.
    origins_[path] = {sink.is_override(), key_mark};
    if (!origins_.count(parent_path)) origins_[parent_path] = {sink.is_override(), key_mark};
    if (!parse_map_entry(*parent, path.substr(parent_path.size() + 1), value, key_mark, cfg_,
                         sink)) {
      bad_.insert(parent_path);
    }
    return;
  }
  std::string message = "unknown key";
  // YAML 1.1's merge key is not YAML 1.2's, which yaml-cpp reads: "<<" is a key like any other.
  if (path == "<<" || (path.size() > 2 && path.compare(path.size() - 3, 3, ".<<") == 0)) {
    sink.add(path, key_mark, "merge keys (<<: *anchor) are not supported: write the keys out");
    return;
  }
  const std::string guess = suggest_key(path);
  if (!guess.empty()) message += "; did you mean " + guess + "?";
  sink.add(path, key_mark, message);
}

void Loader::apply_override(const std::string& text) {
  ErrorSink sink(kOverrideSource, &errors_);
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    sink.add(text, YAML::Mark::null_mark(), "expected key.path=value");
    return;
  }
  const std::string path = text.substr(0, eq), raw = text.substr(eq + 1);
  // A key that long is no key (a file's keys are cut alike): not echoed back in full.
  if (path.size() > kMaxKeyBytes) {
    sink.add("", YAML::Mark::null_mark(), "unknown key " + shown_text(path));
    return;
  }
  const KeySpec* spec = find_key(path);
  const bool known = spec || is_section(path) || map_parent(path);
  // An override ends up in the resolved job that `run` writes into the run directory, and that
  // must load again (status, resume): it is held to a job file's text rules (UTF-8, no NUL or
  // control characters). Unchecked, --set data.train=$'\xb0.bin' was accepted and the run's own
  // resolved job then refused as "not UTF-8 text". Found by configs/job_fuzz.cc.
  if (const auto p = check_text_encoding(text)) {
    sink.add(check_text_encoding(path) ? "" : path, YAML::Mark::null_mark(), p->message);
    if (known) bad_.insert(path);
    return;
  }
  // Strings are taken verbatim: "cluster.time=24:00:00" or "name=" should not need YAML
  // quoting on a shell command line.
  if ((spec && spec->type() == KeyType::kString) || map_parent(path)) {
    apply(path, YAML::Node(raw), YAML::Mark::null_mark(), sink);
    return;
  }
  // A list of files given as one glob that YAML reads as an alias (`*.txt`) or an anchor
  // (`&x`) instead of a plain value: the one-item list of that text, as a string key's value is
  // taken verbatim. Anything else (a flow list, a quoted value) is still YAML's to read.
  if (spec && spec->type() == KeyType::kStringList && (raw[0] == '*' || raw[0] == '&')) {
    YAML::Node list(YAML::NodeType::Sequence);
    list.push_back(raw);
    apply(path, list, YAML::Mark::null_mark(), sink);
    return;
  }
  // Read as a job file is (load_all_documents): a value of more than one document is refused,
  // not cut to its first ("8\n---\n9" set 8), and one yaml-cpp reads as no document at all (",")
  // is named, not taken for an empty value.
  YAML::Node value;
  std::string problem;
  try {
    const std::vector<YAML::Node> docs = load_all_documents(raw);
    for (size_t i = 1; i < docs.size(); ++i) {
      if (!docs[i].IsNull()) problem = "holds more than one YAML document";
    }
    if (docs.empty() && raw.find_first_not_of(" \t") != std::string::npos) {
      problem = "is no YAML value";
    }
    if (!docs.empty()) value = docs[0];
  } catch (const YAML::Exception& e) {
    problem = "is not YAML: " + e.msg;
  }
  if (!problem.empty()) {
    if (known) {
      sink.add(path, YAML::Mark::null_mark(), shown_text(raw) + " " + problem);
      bad_.insert(path);
      return;
    }
    value = YAML::Node();  // report the unknown key rather than its value
  }
  apply(path, value, YAML::Mark::null_mark(), sink);
}

bool Loader::usable(std::string_view key) const {
  if (bad_.count(std::string(key))) return false;
  for (size_t dot = 0; (dot = key.find('.', dot)) != std::string_view::npos; ++dot) {
    if (bad_.count(std::string(key.substr(0, dot)))) return false;
  }
  return !bad_.count("");
}

void Loader::locate(ConfigError& e) const {
  e.file = file_;
  // The key itself, else the nearest enclosing key or section that was set (cluster.env.A ->
  // cluster.env -> cluster).
  auto it = origins_.find(e.key);
  for (std::string k = e.key; it == origins_.end() && k.find('.') != std::string::npos;) {
    k.erase(k.rfind('.'));
    it = origins_.find(k);
  }
  if (it == origins_.end()) return;
  if (it->second.from_override) {
    e.file = kOverrideSource;
  } else if (!it->second.mark.is_null() && it->second.mark.line >= 0) {
    e.line = it->second.mark.line + 1;
    e.col = it->second.mark.column + 1;
  }
}

JobConfig Loader::finish(int dp_ranks, bool cross_field) {
  if (cfg_.run_dir.empty()) cfg_.run_dir = "runs/" + cfg_.name;
  // The batch arithmetic needs the rank count; `submit` takes it from the cluster section.
  bool ranks_known = true;
  if (dp_ranks == kRanksFromCluster) {
    // In 64 bits: two values in range can overflow an int (65536 x 65536), which was undefined
    // behaviour and then a rank count < 1 that check_batch_arithmetic() threw
    // std::invalid_argument for. Found by configs/job_fuzz.cc.
    const long long ranks =
        static_cast<long long>(cfg_.cluster.nodes) * cfg_.cluster.tasks_per_node;
    if (!usable("cluster.nodes") || !usable("cluster.tasks_per_node")) {
      // Refused already (said): the count from the default left in its place would add a
      // second, wrong error about the batch.
      ranks_known = false;
    } else if (ranks > std::numeric_limits<int>::max()) {
      ConfigError e{file_, 0, 0, "cluster.tasks_per_node",
                    "cluster.nodes × cluster.tasks_per_node = " + std::to_string(ranks) +
                        " ranks, more than an MPI job can have (" +
                        std::to_string(std::numeric_limits<int>::max()) + ")"};
      locate(e);
      errors_.push_back(std::move(e));
      ranks_known = false;
    } else {
      dp_ranks = static_cast<int>(ranks);
    }
  }
  const auto checkable = [&](std::string_view key) {
    return usable(key) && (ranks_known || key != "train.global_batch");
  };
  if (cross_field) {
    for (ConfigError& e : check_job_if(cfg_, ranks_known ? dp_ranks : 1, checkable)) {
      locate(e);
      errors_.push_back(std::move(e));
    }
  }
  if (!errors_.empty()) throw JobConfigError(errors_);
  return cfg_;
}

JobConfig load(const std::string& text, const std::string& display_name,
               const std::string& source_path, const std::vector<std::string>& overrides,
               int dp_ranks, bool cross_field = true) {
  if (dp_ranks < 1 && dp_ranks != kRanksFromCluster) {
    throw std::invalid_argument("load_job: dp_ranks must be >= 1, got " + std::to_string(dp_ranks));
  }
  Loader loader(display_name, source_path);
  loader.load_text(text);
  // A run stores its job with every key: one that gives none is damage, not a job of defaults
  // (before: `status` showed such a run as job "job" of 1000 steps).
  if (!cross_field && loader.gave_nothing()) {
    throw JobConfigError({ConfigError{display_name, 0, 0, "",
                                      "holds no key: a run stores its job here with every key, "
                                      "so this one is empty or damaged"}});
  }
  for (const std::string& o : overrides) loader.apply_override(o);
  return loader.finish(dp_ranks, cross_field);
}

}  // namespace

JobConfig load_job(const std::string& path, const std::vector<std::string>& overrides,
                   int dp_ranks) {
  std::string text;
  if (const std::string why = read_job_file(path, &text); !why.empty()) {
    throw JobConfigError({ConfigError{path, 0, 0, "", why}});
  }
  return load(text, path, path, overrides, dp_ranks);
}

JobConfig load_job_from_string(const std::string& yaml_text, const std::string& display_name,
                               const std::vector<std::string>& overrides, int dp_ranks) {
  return load(yaml_text, display_name, "", overrides, dp_ranks);
}

JobConfig load_stored_job(const std::string& yaml_text, const std::string& display_name) {
  return load(yaml_text, display_name, "", {}, 1, /*cross_field=*/false);
}

JobConfig load_stored_job_file(const std::string& path) {
  std::string text;
  if (const std::string why = read_job_file(path, &text); !why.empty()) {
    throw JobConfigError({ConfigError{path, 0, 0, "", why}});
  }
  return load(text, path, path, {}, 1, /*cross_field=*/false);
}

}  // namespace rm
