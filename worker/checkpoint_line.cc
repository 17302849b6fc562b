#include "worker/checkpoint_line.h"

#include <filesystem>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_reader.h"
#include "io/atomic_file.h"
#include "io/posix_io.h"

namespace rm {

namespace fs = std::filesystem;

namespace {

constexpr const char* kLineFile = "line.json";

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
  return ec ? path : p.string();
}

// A path as the user gave it, absolute, links not followed, without the trailing "/" or "/." a
// shell's completion adds after a link to a directory ("checkpoints/best/"): the link itself,
// whose name is what names a line's start.
fs::path spelling(const std::string& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  while (!p.has_filename() && p.has_relative_path()) p = p.parent_path();
  return p;
}

}  // namespace

nlohmann::json checkpoint_line_origin(const std::string& ckpt, const std::string& as_given) {
  std::string digest;
  const int64_t step = load_manifest(ckpt, &digest).step;
  return {{"checkpoint", absolute_path(ckpt)},
          {"as_given", spelling(as_given.empty() ? ckpt : as_given).string()},
          {"step", step},
          {"manifest_digest", digest}};
}

void record_line_start(const std::string& run_dir, const nlohmann::json& line_from) {
  const std::string text = line_from.dump() + "\n";
  write_file_atomic((fs::path(run_dir) / kLineFile).string(), text.data(), text.size());
}

nlohmann::json recorded_line_start(const std::string& run_dir) {
  try {
    const std::string path = (fs::path(run_dir) / kLineFile).string();
    if (!io::exists(path)) return nullptr;
    nlohmann::json line = nlohmann::json::parse(io::read_file(path, 1 << 16));
    return line.is_object() ? line : nullptr;
  } catch (const std::exception&) {
    return nullptr;
  }
}

void forget_line_start(const std::string& run_dir) {
  const std::string path = (fs::path(run_dir) / kLineFile).string();
  if (!io::exists(path)) return;
  io::unlink_file(path);
  io::fsync_directory(run_dir);
}

nlohmann::json line_of_checkpoint(const std::string& run_dir, const std::string& ckpt,
                                  const nlohmann::json& state) {
  const nlohmann::json own =
      state.is_object() ? state.value("line_from", nlohmann::json()) : nlohmann::json();
  const nlohmann::json line = recorded_line_start(run_dir);
  if (line.is_null()) return own;
  try {
    std::string digest;
    load_manifest(ckpt, &digest);
    if (line.value("manifest_digest", std::string()) == digest) return line;
  } catch (const std::exception&) {
  }
  return own;
}

bool goes_on_from(const nlohmann::json& state, const std::string& from) {
  if (!state.is_object() || from.empty()) return false;
  const auto it = state.find("line_from");
  if (it == state.end() || !it->is_object()) return false;
  const nlohmann::json& line = *it;
  try {
    // A link (RUN_DIR/checkpoints/best) names the line's start by its name: what it points to
    // moves on as the line (or another run) saves new bests.
    // Both sides spelled alike: records written before spelling() kept a trailing "/".
    std::error_code ec;
    const fs::path link = spelling(from);
    const std::string given = line.value("as_given", std::string());
    if (!given.empty() && fs::is_symlink(link, ec) && spelling(given) == link) {
      return true;
    }
    if (fs::exists(fs::path(from) / kManifestFileName)) {
      const nlohmann::json now = checkpoint_line_origin(from);
      return line.value("manifest_digest", std::string()) == now["manifest_digest"] &&
             line.value("step", int64_t{-1}) == now["step"].get<int64_t>();
    }
    return line.value("checkpoint", std::string()) == absolute_path(from);
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace rm
