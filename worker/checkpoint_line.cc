#include "worker/checkpoint_line.h"

#include <filesystem>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_reader.h"

namespace rm {

namespace fs = std::filesystem;

namespace {

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
  return ec ? path : p.string();
}

}  // namespace

nlohmann::json checkpoint_line_origin(const std::string& ckpt) {
  std::string digest;
  const int64_t step = load_manifest(ckpt, &digest).step;
  return {{"checkpoint", absolute_path(ckpt)}, {"step", step}, {"manifest_digest", digest}};
}

bool goes_on_from(const nlohmann::json& state, const std::string& from) {
  if (!state.is_object() || from.empty()) return false;
  const auto it = state.find("line_from");
  if (it == state.end() || !it->is_object()) return false;
  const nlohmann::json& line = *it;
  try {
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
