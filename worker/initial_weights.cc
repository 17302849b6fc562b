#include "worker/initial_weights.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>

#include <xxhash.h>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/json_guard.h"
#include "checkpoint/llmc_model_file.h"
#include "configs/job_loader.h"
#include "io/io_error.h"
#include "io/posix_io.h"
#include "model/model.h"
#include "model/model_export.h"

namespace rm {
namespace fs = std::filesystem;
namespace {

std::string dims(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The job keys a tensor's shape comes from, for a mismatch's message.
std::string shape_keys(const ModelConfig& c, const std::string& name) {
  if (c.type == ModelType::kGpt) {
    if (name == "wte") return "model.vocab_size x model.width";
    if (name == "wpe") return "at least model.seq_len rows of model.width";
    return "model.width";
  }
  return "model.vocab_size, model.mlp_embed, model.mlp_context, model.width";
}

// The job's model in a few words, for a source that is another model.
std::string model_summary(const ModelConfig& c) {
  const std::string common = std::to_string(c.layers) + " layers, width " +
                             std::to_string(c.width) + ", vocab_size " +
                             std::to_string(c.vocab_size);
  if (c.type == ModelType::kGpt) return "gpt: " + common + ", seq_len " + std::to_string(c.seq_len);
  return "mlp: " + common + ", mlp_embed " + std::to_string(c.mlp_embed) + ", mlp_context " +
         std::to_string(c.mlp_context);
}

// A file's size and a hash of its first and last 64 KiB: the same on every host that holds the
// same file (a copy on each node's own disk included), unlike its inode or time; most of a
// weights file's bytes are in its tensors, so two other models' files differ in these.
std::string edges_identity(const std::string& path) {
  constexpr uint64_t kEdge = 64 << 10;
  const io::Fd fd = io::open_read(path);
  const uint64_t size = io::regular_file_size(fd.get(), path);
  std::vector<char> bytes(static_cast<size_t>(std::min(size, kEdge)));
  XXH3_state_t* state = XXH3_createState();
  if (state == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(state);
  io::pread_exact(fd.get(), bytes.data(), bytes.size(), 0, path);
  XXH3_64bits_update(state, bytes.data(), bytes.size());
  if (size > kEdge) {
    const uint64_t tail = std::min(size - kEdge, kEdge);
    io::pread_exact(fd.get(), bytes.data(), tail, size - tail, path);
    XXH3_64bits_update(state, bytes.data(), tail);
  }
  const uint64_t h = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  char text[64];
  std::snprintf(text, sizeof text, "%llu bytes, edges %016llx",
                static_cast<unsigned long long>(size), static_cast<unsigned long long>(h));
  return text;
}

// The first 8 bytes of a file (fewer if it is shorter), to tell its kind.
std::string leading_bytes(const std::string& path, size_t count = 8) {
  char bytes[16] = {};
  count = std::min(count, sizeof bytes);
  std::ifstream in(path, std::ios::binary);
  in.read(bytes, static_cast<std::streamsize>(count));
  return std::string(bytes, static_cast<size_t>(in.gcount()));
}

}  // namespace

InitialWeights::InitialWeights(const std::string& path, const ModelConfig& config,
                               const ParamLayout& layout, VerifyLevel level,
                               const std::string& pinned)
    : path_(path), source_(path), layout_(layout) {
  try {
    std::error_code ec;
    // A checkpoint pinned before it is opened. One that a live source run's retention renamed
    // away between being chosen and being pinned: what the path stands for now, if it stands
    // for something else (a run directory's newest checkpoint, a link's target); a few times,
    // since each try finds a newer checkpoint.
    for (int tries = 1;; ++tries) {
      source_ = pinned.empty() ? resolve() : pinned;
      if (fs::is_regular_file(source_, ec)) break;  // a file: retention does not remove it
      pin_ = CheckpointPin::take(source_);          // nullopt: not there (any more)
      if (pin_ || !pinned.empty() || source_ == path_ || tries == 5) break;
    }
    // Read through the directory pinned, its links resolved: a path through checkpoints/best
    // (best/. , a link to it) would name another checkpoint once retention repoints the link.
    if (pin_) source_ = pin_->path();
    const fs::file_status st = fs::status(source_, ec);
    if (ec || !fs::exists(st)) {
      fail(source_ == path_ ? "no such file or directory"
                            : source_ +
                                  ": no such file or directory (removed as it was opened: "
                                  "the source run's retention?)");
    }
    if (fs::is_directory(st)) {
      if (!fs::exists(fs::path(source_) / "manifest.json")) {
        fail(
            "a directory, but neither a checkpoint (no manifest.json) nor a run directory "
            "(no checkpoints/)");
      }
      open_checkpoint(source_, config, level);
    } else if (fs::is_regular_file(st)) {
      // Before anything of it is read: what check_unchanged() compares with, and what the
      // ranks compare (file_identity()).
      file_version_ = io::file_version(source_);
      file_identity_ = edges_identity(source_);
      if (leading_bytes(source_) == "RMWGHT01") {
        fail(
            "a weights.bin holds no tensor names or shapes to match: name its run directory "
            "(its newest checkpoint) instead, or a file `ringmaster ckpt export` wrote");
      } else if (looks_like_llmc_model_file(source_)) {
        open_llmc(config);
      } else if (const std::string head = leading_bytes(source_, 9);
                 head.size() < 9 || head[8] != '{') {
        // A safetensors file's JSON header starts right after its 8-byte length.
        fail(
            "neither a safetensors file (no JSON header after the first 8 bytes) nor an llm.c "
            "model file (no llm.c magic) -- give one of those, a checkpoint directory or a run "
            "directory");
      } else {
        safetensors_ = read_safetensors_header(source_);
        open_safetensors(config);
      }
    } else {
      fail("neither a file nor a directory");
    }
  } catch (const InitialWeightsError&) {
    throw;
  } catch (const std::runtime_error& e) {  // CheckpointError, IoError: they name the file
    fail(without_path(e.what()));
  }
  if (!crop_note_.empty()) description_ += " (" + crop_note_ + ")";
}

InitialWeights::~InitialWeights() = default;

std::string InitialWeights::resolve() const {
  fs::path p = fs::path(path_);
  if (!p.has_filename()) p = p.parent_path();  // "runs/a/": the link itself, not its target
  std::error_code ec;
  // A link: what it leads to, every link on the way resolved as the kernel does (a relative
  // target's ".." is taken from the link's real directory). The source run's retention may point
  // checkpoints/best elsewhere at any moment; the target stays. A link that leads nowhere is
  // left as it is: opening it fails, naming it.
  if (fs::is_symlink(fs::symlink_status(p, ec))) {
    const fs::path target = fs::canonical(p, ec);
    if (!ec) p = target;
  }
  if (fs::is_directory(p, ec) && !fs::exists(p / "manifest.json", ec) &&
      fs::is_directory(p / "checkpoints", ec)) {
    // A run directory: its newest committed checkpoint, which must verify. Not the newest that
    // verifies: a damaged newest one is worth stopping for, not silently passing over.
    std::optional<CheckpointInfo> newest;
    for (const CheckpointInfo& c : list_checkpoints(p.string(), VerifyLevel::kStructure)) {
      if (c.committed) newest = c;
    }
    if (!newest) fail("a run directory without a committed checkpoint");
    return newest->path;
  }
  return p == fs::path(path_) ? path_ : p.string();
}

std::string InitialWeights::without_path(const std::string& what) const {
  const std::string prefix = path_ + ": ";  // fail() names the source already
  return what.compare(0, prefix.size(), prefix) == 0 ? what.substr(prefix.size()) : what;
}

std::string InitialWeights::file_identity() const {
  return file_identity_;
}

void InitialWeights::check_unchanged() const {
  if (!file_version_) return;
  io::FileVersion now;
  try {
    now = io::file_version(source_);
  } catch (const IoError& e) {
    fail(std::string("gone while it was read: ") + e.what());
  }
  if (now != *file_version_) {
    fail(
        "replaced or rewritten while it was read (its inode, size or time changed): the "
        "weights taken may mix two files; start the run again once the file is in place");
  }
}

void InitialWeights::fail(const std::string& what) const {
  throw InitialWeightsError("model.init_from: " + path_ + ": " + what);
}

void InitialWeights::open_checkpoint(const std::string& dir, const ModelConfig& config,
                                     VerifyLevel level) {
  kind_ = "checkpoint";
  source_ = dir;
  if (const std::string refusal = uncommitted_save_refusal(dir); !refusal.empty()) fail(refusal);
  checkpoint_ = std::make_unique<CheckpointReader>(dir);
  if (level == VerifyLevel::kChecksums) {
    checkpoint_->verify_all();
  } else {
    checkpoint_->check_files();
  }
  const Manifest& m = checkpoint_->manifest();
  if (!m.find_buffer("params")) fail(dir + ": the checkpoint has no \"params\" buffer");
  std::map<std::string, const TensorInfo*> tensors;
  for (const TensorInfo& t : m.tensors) {
    if (t.dtype != "f32") fail(dir + ": tensor '" + t.name + "' is " + t.dtype + ", not f32");
    tensors[t.name] = &t;
  }
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& [name, t] : tensors) shapes[name] = t->shape;
  // Ringmaster's own names and layouts (another model type's names do not match).
  match(
      config, shapes, [](const std::string& name) { return std::vector<std::string>{name}; },
      false);
  for (Match& x : matches_) x.source_offset = tensors.at(x.source)->offset;
  if (config.type == ModelType::kGpt) {  // the heads are in the job the checkpoint records
    int64_t heads = -1;
    try {
      heads = load_stored_job(m.job, dir + "/manifest.json's job").model.heads;
    } catch (const std::exception&) {
      // A job of an older schema: its shapes matched, which is what can be checked.
    }
    if (heads > 0) check_heads(config, heads);
  }
  step_ = m.step;
  description_ = "checkpoint " + dir + " (step " + std::to_string(m.step) + " of " +
                 std::to_string(m.world_size) + " rank" + (m.world_size == 1 ? "" : "s") +
                 ", shard " + m.shard_mode + "), " + std::to_string(matches_.size()) + " tensors";
}

void InitialWeights::open_safetensors(const ModelConfig& config) {
  kind_ = "safetensors";
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::string> dtypes;
  for (const SafetensorsEntry& e : safetensors_.tensors) {
    shapes[e.name] = e.shape;
    dtypes[e.name] = e.dtype;
  }
  const bool gpt = config.type == ModelType::kGpt;
  match(
      config, shapes,
      [gpt](const std::string& name) {
        if (!gpt) return std::vector<std::string>{name};
        const std::string hf = name == "wte" || name == "wpe" ? name + ".weight" : name;
        return std::vector<std::string>{"transformer." + hf, hf};  // GPT2LMHeadModel's, GPT2Model's
      },
      gpt);
  for (const Match& m : matches_) {
    if (dtypes[m.source] != "F32") {
      fail("tensor '" + m.source + "' is " + dtypes[m.source] + ": only F32 tensors are read");
    }
  }
  // `ckpt export` writes a gpt2_config; Hugging Face's own files carry none. A hostile one is
  // not parsed (json_guard.h), and one that does not parse is not a model description.
  const auto config_text = safetensors_.metadata.find("gpt2_config");
  if (gpt && config_text != safetensors_.metadata.end() &&
      check_json_shape(config_text->second).empty()) {
    const nlohmann::json c = nlohmann::json::parse(config_text->second, nullptr, false);
    if (c.is_object() && c.contains("n_head") && c["n_head"].is_number_integer()) {
      check_heads(config, c["n_head"].get<int64_t>());
    }
  }
  const std::string head = "lm_head.weight";
  if (gpt && shapes.count(head)) {
    const Match& wte = *std::find_if(matches_.begin(), matches_.end(),
                                     [](const Match& m) { return m.target->name == "wte"; });
    if (shapes[head] != wte.source_shape || dtypes[head] != "F32") {
      fail("tensor '" + head + "' is " + dtypes[head] + " " + dims(shapes[head]) + ", not " +
           wte.source + "'s F32 " + dims(wte.source_shape) +
           ": Ringmaster's GPT ties its head to wte");
    }
    tied_head_ = head;
  }
  description_ = std::string("safetensors, ") + (gpt ? "GPT-2 layout, " : "") +
                 std::to_string(matches_.size()) + " tensors";
}

void InitialWeights::check_heads(const ModelConfig& config, int64_t heads) const {
  if (heads != config.heads) {
    fail("its model has " + std::to_string(heads) + " attention heads, this job's model.heads is " +
         std::to_string(config.heads) + " (the shapes would match, the model would not)");
  }
}

void InitialWeights::open_llmc(const ModelConfig& config) {
  kind_ = "llm.c";
  llmc_ = std::make_unique<LlmcModelFile>(read_llmc_header(source_));
  const LlmcModelFile& f = *llmc_;
  if (config.type != ModelType::kGpt) {
    fail("an llm.c GPT-2 model file, and this job's model.type is mlp");
  }
  // The header names the model: the job's, or one message saying what differs.
  auto differs = [this](const std::string& file_says, const char* key, int64_t job) {
    fail(file_says + ", this job's " + key + " is " + std::to_string(job));
  };
  if (f.num_layers != config.layers) {
    differs("its model has " + std::to_string(f.num_layers) + " layers", "model.layers",
            config.layers);
  }
  if (f.channels != config.width) {
    differs("its model is " + std::to_string(f.channels) + " wide", "model.width", config.width);
  }
  if (f.vocab_size != config.vocab_size) {
    differs("its vocabulary has " + std::to_string(f.vocab_size) + " tokens", "model.vocab_size",
            config.vocab_size);
  }
  check_heads(config, f.num_heads);
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, uint64_t> offsets;
  auto add = [&](const std::string& name, const LlmcSpan& span) {
    shapes[name] =
        span.cols ? std::vector<int64_t>{span.rows, span.cols} : std::vector<int64_t>{span.rows};
    offsets[name] = span.offset;
  };
  // GPT-2's names, which are the layout's (gpt_model.cc); f.num_layers is the job's, checked above.
  for_each_llmc_tensor(f.num_layers, [&](LlmcTensor kind, int64_t l) {
    add(llmc_gpt2_name(kind, l), llmc_span(f, kind, l));
  });
  match(
      config, shapes, [](const std::string& name) { return std::vector<std::string>{name}; },
      false);
  for (Match& x : matches_) x.source_offset = offsets.at(x.source);
  description_ = "llm.c model file, version " + std::to_string(f.version) + " (" +
                 (f.element_bytes == 2 ? "bf16" : "fp32") + "), " +
                 std::to_string(matches_.size()) + " tensors";
}

template <typename Shapes, typename Rename>
void InitialWeights::match(const ModelConfig& config, const Shapes& shapes, Rename rename,
                           bool gpt2_file) {
  const bool gpt = config.type == ModelType::kGpt;
  std::map<std::string, bool> used;
  for (const auto& [name, shape] : shapes) used[name] = false;
  for (const TensorSpec& t : layout_.tensors()) {
    Match m{&t, "", {}, 0, gpt2_file && is_gpt2_conv1d_weight(t.name)};
    const std::vector<std::string> names = rename(t.name);
    for (const std::string& n : names) {
      if (shapes.count(n)) {
        m.source = n;
        break;
      }
    }
    if (m.source.empty()) {
      fail("no tensor '" + names.front() + "'" +
           (names.front() == t.name ? "" : " for the model's " + t.name) + " " + dims(t.shape) +
           " among its " + std::to_string(shapes.size()) + ": another model? (this job's is " +
           model_summary(config) + ")");
    }
    used[m.source] = true;
    m.source_shape = shapes.at(m.source);
    std::vector<int64_t> want = t.shape;
    if (m.transpose) std::swap(want[0], want[1]);
    const std::vector<int64_t>& got = m.source_shape;
    const bool cropped_wpe = gpt && t.name == "wpe" && got.size() == 2 && want.size() == 2 &&
                             got[1] == want[1] && got[0] > want[0];
    if (got != want && !cropped_wpe) {
      fail("tensor '" + m.source + "' is " + dims(got) + ", the model's " + t.name + " needs " +
           dims(want) + " (" + shape_keys(config, t.name) + ")");
    }
    if (cropped_wpe) {
      crop_note_ = "wpe: the first " + std::to_string(want[0]) + " of its " +
                   std::to_string(got[0]) + " rows";
    }
    matches_.push_back(std::move(m));
  }
  std::vector<std::string> extra;
  for (const auto& [name, is_used] : used) {
    if (!is_used && !(gpt2_file && (is_gpt2_mask_buffer(name) || name == "lm_head.weight"))) {
      extra.push_back(name);
    }
  }
  if (!extra.empty()) {
    std::string list;
    for (size_t i = 0; i < extra.size() && i < 4; ++i) list += (i ? ", " : "") + extra[i];
    if (extra.size() > 4) list += ", ...";
    fail("holds " + std::to_string(extra.size()) + " tensor" + (extra.size() == 1 ? "" : "s") +
         " the model has no place for (" + list + "): another model? (this job's is " +
         model_summary(config) + ")");
  }
}

std::vector<float> InitialWeights::whole(const Match& m) {
  std::vector<float> src = read_safetensors_f32(source_, safetensors_, m.source);
  const TensorSpec& t = *m.target;
  if (m.transpose) {  // [in, out] -> [out, in]
    const int64_t out = t.shape[0], in = t.shape[1];
    std::vector<float> dst(src.size());
    for (int64_t i = 0; i < in; ++i) {
      for (int64_t o = 0; o < out; ++o) dst[o * in + i] = src[i * out + o];
    }
    return dst;
  }
  src.resize(t.numel);  // wpe: its first seq_len rows
  return src;
}

void InitialWeights::read(size_t begin, size_t end, float* dst) {
  try {
    for (const Match& m : matches_) {
      const size_t off = m.target->offset, lo = std::max(begin, off);
      const size_t hi = std::min(end, off + m.target->numel);
      if (lo >= hi) continue;
      float* out = dst + (lo - begin);
      if (llmc_) {  // contiguous, [out, in]; a cropped tensor is a prefix
        read_llmc_parameters(source_, *llmc_, m.source_offset + (lo - off), hi - lo, out);
        check_finite(m, lo - off, out, hi - lo);
        continue;
      }
      if (checkpoint_) {  // nothing transposed; a cropped wpe is a prefix of the source's
        checkpoint_->read_range("params", m.source_offset + (lo - off),
                                m.source_offset + (hi - off), out);
        check_finite(m, lo - off, out, hi - lo);
        continue;
      }
      if (cached_ != &m) {
        cached_ = nullptr;
        cached_head_.clear();
        cached_values_ = whole(m);
        cached_ = &m;
      }
      const std::vector<float>& values = cached_values_;
      std::copy(values.begin() + (lo - off), values.begin() + (hi - off), out);
      check_finite(m, lo - off, out, hi - lo);
      if (!tied_head_.empty() && m.target->name == "wte") {
        if (cached_head_.empty()) {
          cached_head_ = read_safetensors_f32(source_, safetensors_, tied_head_);
        }
        const std::vector<float>& head = cached_head_;
        if (std::memcmp(head.data() + (lo - off), out, (hi - lo) * sizeof(float)) != 0) {
          fail("'" + tied_head_ + "' differs from '" + m.source +
               "': an untied output layer, and Ringmaster's GPT ties its head to wte");
        }
      }
    }
  } catch (const InitialWeightsError&) {
    throw;
  } catch (const std::runtime_error& e) {
    fail(without_path(e.what()));
  }
}

void InitialWeights::check_finite(const Match& m, size_t first, const float* values,
                                  size_t count) const {
  for (size_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) {
      fail("'" + m.source + "' holds " + (std::isnan(values[i]) ? "NaN" : "an infinity") +
           " (its element " + std::to_string(first + i) +
           "): training from it would give NaN from the first step");
    }
  }
}

nlohmann::json InitialWeights::event_fields() const {
  nlohmann::json f = {{"from", path_}, {"kind", kind_}, {"tensors", matches_.size()}};
  if (source_ != path_) f["checkpoint"] = source_;
  if (step_ >= 0) f["step"] = step_;
  return f;
}

std::string check_initial_weights(const JobConfig& job, VerifyLevel level) {
  const std::string& from = job.model.init_from;
  if (from.empty()) return "";
  std::error_code ec;
  auto normal = [&ec](const std::string& p) {  // absolute, links resolved, no trailing "/"
    fs::path n = fs::weakly_canonical(fs::absolute(p), ec);
    return n.has_filename() ? n : n.parent_path();
  };
  const fs::path source = normal(from), run_dir = normal(job.run_dir);
  const auto [end, at] =
      std::mismatch(run_dir.begin(), run_dir.end(), source.begin(), source.end());
  if (!ec && end == run_dir.end()) {
    throw InitialWeightsError("model.init_from: " + from + ": inside this job's run_dir (" +
                              job.run_dir +
                              "): a run does not start from its own weights (run it again to "
                              "resume it, or give the new run a run_dir of its own)");
  }
  const ParamLayout layout = model_param_layout(job.model);
  return InitialWeights(from, job.model, layout, level).description();
}

}  // namespace rm
