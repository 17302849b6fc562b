// Writing from the schema: the resolved job (to_yaml) and the reference table.
#include <string>
#include <vector>

#include "configs/job_loader.h"
#include "configs/schema.h"
#include "configs/yaml_format.h"

namespace rm {
namespace {

// A markdown table cell: '|' would end the cell.
std::string cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string to_yaml(const JobConfig& cfg) {
  JobConfig c = cfg;  // KeySpec::field hands out mutable pointers; read them from a copy
  if (c.run_dir.empty()) c.run_dir = "runs/" + c.name;  // as load_job() resolves it
  std::string out = "# The resolved job: every key, defaults filled in (docs/job-reference.md).\n";
  std::vector<std::string> open;  // the sections the previous key sat in
  for (const KeySpec& spec : job_schema()) {
    std::vector<std::string> parts = split_path(spec.path);
    const std::string leaf = parts.back();
    parts.pop_back();
    size_t common = 0;
    while (common < open.size() && common < parts.size() && open[common] == parts[common]) {
      ++common;
    }
    for (size_t i = common; i < parts.size(); ++i) {
      if (i == 0) out += "\n";  // a blank line between top-level sections
      out += std::string(2 * i, ' ') + parts[i] + ":\n";
    }
    open = parts;
    out += std::string(2 * parts.size(), ' ') + leaf + ": " + yaml_text(spec.field(c)) + "\n";
  }
  return out;
}

std::string job_reference_markdown() {
  std::string out =
      "| key | type | default | allowed | meaning |\n"
      "|---|---|---|---|---|\n";
  for (const KeySpec& spec : job_schema()) {
    const std::string allowed = spec.allowed_text();
    out += "| `" + std::string(spec.path) + "` | " + std::string(spec.type_name()) + " | `" +
           cell(spec.default_text()) + "` | " + cell(allowed) + " | " + cell(spec.doc) + " |\n";
  }
  return out;
}

}  // namespace rm
