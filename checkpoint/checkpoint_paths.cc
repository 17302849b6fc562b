#include "checkpoint/checkpoint_paths.h"

#include <cstdio>

#include "io/posix_io.h"

namespace rm {

std::string checkpoints_root(const std::string& run_dir) {
  return io::join(run_dir, "checkpoints");
}

std::string step_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

std::string checkpoint_path(const std::string& run_dir, int64_t step) {
  return io::join(checkpoints_root(run_dir), step_dir_name(step));
}

std::string checkpoint_tmp_path(const std::string& run_dir, int64_t step) {
  return checkpoint_path(run_dir, step) + ".tmp";
}

std::string shard_file_name(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "shard_%05d.bin", rank);
  return buf;
}

std::string shard_descriptor_name(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "shard_%05d.json", rank);
  return buf;
}

std::string shard_failure_name(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "shard_%05d.failed", rank);
  return buf;
}

std::string uncommitted_save_refusal(const std::string& dir) {
  std::string name = dir;
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  name = name.substr(name.find_last_of('/') == std::string::npos ? 0 : name.find_last_of('/') + 1);
  const auto parsed = parse_step_dir_name(name);
  if (!parsed || parsed->committed) return "";
  return "a save never committed (" + name + "): use a committed checkpoint (" +
         step_dir_name(parsed->step) + ", or another)";
}

std::optional<StepDirName> parse_step_dir_name(const std::string& name) {
  const std::string prefix = "step_";
  if (name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  size_t i = prefix.size();
  int64_t step = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') {
    step = step * 10 + (name[i] - '0');
    if (step > kMaxStep) return std::nullopt;
    ++i;
  }
  // Only the canonical spelling counts, so "step_1" and "step_00000001" cannot both be step 1.
  if (i == prefix.size() || name.compare(0, i, step_dir_name(step)) != 0) return std::nullopt;
  if (i == name.size()) return StepDirName{step, true, ""};
  const std::string suffix = name.substr(i);
  const std::string tmp = ".tmp";
  if (suffix[0] == '.' && suffix.size() >= tmp.size() &&
      suffix.compare(suffix.size() - tmp.size(), tmp.size(), tmp) == 0) {
    return StepDirName{step, false, suffix};
  }
  return std::nullopt;
}

}  // namespace rm
