// `ringmaster ckpt list|verify|inspect|export`: the checkpoint tools.
//
// Exit codes: 0 when the checkpoints asked about are good; 1 when one is bad (verify names the
// file and what failed); 2 when the path is not there at all or the arguments are wrong. `list`
// is a listing: 0 once it could list, its table saying which checkpoints are bad and why.
// Reports go to stdout; errors to stderr.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <optional>

#include "base/error_report.h"
#include "base/exit_codes.h"
#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_pin.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/llmc_model_file.h"
#include "checkpoint/safetensors_writer.h"
#include "checkpoint/weights_file.h"
#include "io/atomic_file.h"
#include "io/posix_io.h"
#include "launcher/cli_checks.h"
#include "launcher/cmd_common.h"
#include "launcher/loaded_run.h"
#include "model/model_export.h"
#include "worker/checkpointing.h"

namespace rm {

namespace fs = std::filesystem;

namespace {

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

// "-" for 0: a time that could not be read (the directory went as it was listed).
std::string utc_time(int64_t unix_seconds) {
  if (unix_seconds == 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

void require_directory(const std::string& path) {
  if (!fs::is_directory(path)) throw IoError(path + ": no such directory");
}

// A checkpoint holds manifest.json; a run directory config.yaml (every run writes it first) or
// checkpoints/. A directory named as a checkpoint (step_N, step_N.tmp) or holding shards is a
// checkpoint too, one that lost its manifest: damage (exit 1), not a wrong path (exit 2).
bool is_checkpoint(const std::string& path) {
  if (fs::exists(fs::path(path) / "manifest.json")) return true;
  if (parse_step_dir_name(fs::path(path).lexically_normal().filename().string()) ||
      parse_step_dir_name(fs::path(path).lexically_normal().parent_path().filename().string())) {
    return fs::is_directory(path);
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("shard_", 0) == 0 && name.size() > 10 &&
        name.compare(name.size() - 4, 4, ".bin") == 0) {
      return true;
    }
  }
  return false;
}
bool is_run_dir(const std::string& path) {
  return !is_checkpoint(path) && (fs::exists(fs::path(path) / "config.yaml") ||
                                  fs::is_directory(fs::path(path) / "checkpoints"));
}

// Refuses, as bad input, a directory that is neither.
void require_run_dir_or_checkpoint(const std::string& path) {
  require_directory(path);
  if (!is_checkpoint(path) && !is_run_dir(path)) {
    throw IoError(path +
                  ": neither a checkpoint (no manifest.json) nor a run directory (no "
                  "config.yaml or checkpoints/)");
  }
}

// One line per checkpoint: step, time, size, and "ok" or why not. Returns how many are bad
// (scratch directories of a save in progress or interrupted are listed but not counted).
int print_checkpoint_table(const std::vector<CheckpointInfo>& list) {
  std::printf("%-14s %-20s %10s  %s\n", "step", "saved (UTC)", "size", "status");
  int bad = 0;
  for (const CheckpointInfo& c : list) {
    std::string step = std::to_string(c.step) + (c.committed ? "" : " (tmp)");
    std::printf("%-14s %-20s %10s  %s\n", step.c_str(), utc_time(c.mtime_unix).c_str(),
                human_bytes(c.bytes).c_str(), c.verify ? "ok" : c.verify.error.c_str());
    if (c.committed && !c.verify) ++bad;
  }
  return bad;
}

}  // namespace

int cmd_ckpt_list(const CkptArgs& args) {
  return report_errors([&] {
    require_directory(args.path);
    if (is_checkpoint(args.path)) {
      throw IoError(args.path +
                    ": is a checkpoint, not a run directory: `ringmaster ckpt verify` "
                    "or `inspect` it, or list its run directory");
    }
    if (!is_run_dir(args.path)) {
      throw IoError(args.path + ": not a run directory (no config.yaml or checkpoints/)");
    }
    const auto list = list_checkpoints(args.path, VerifyLevel::kChecksums);
    if (list.empty()) {
      std::printf("%s: no checkpoints\n", args.path.c_str());
      return kExitOk;
    }
    std::printf("%s: %zu checkpoint%s\n", args.path.c_str(), list.size(), list.size() == 1 ? "" : "s");
    print_checkpoint_table(list);
    const auto newest_good = std::find_if(list.rbegin(), list.rend(), [](const CheckpointInfo& c) {
      return c.committed && c.verify.ok;
    });
    if (newest_good != list.rend()) {
      std::printf("a resume would start from %s\n", newest_good->path.c_str());
    } else {
      std::printf("no checkpoint verifies: a run would start from the beginning\n");
    }
    const std::string best = describe_best_checkpoint(args.path);
    if (!best.empty()) std::printf("the lowest validation loss: %s\n", best.c_str());
    return kExitOk;
  });
}

int cmd_ckpt_verify(const CkptArgs& args) {
  return report_errors([&] {
    require_run_dir_or_checkpoint(args.path);
    if (is_run_dir(args.path)) {
      // A live run's retention removes its oldest checkpoint as it saves a new one: one that
      // went before it was verified is left out, one being verified stays until it is done.
      const std::vector<CheckpointInfo> list = list_checkpoints(args.path, VerifyLevel::kChecksums);
      if (list.empty()) {
        std::printf("%s: no checkpoints yet (nothing to verify)\n", args.path.c_str());
        return kExitOk;
      }
      int bad = print_checkpoint_table(list);
      // The run's final weights too: what sample, eval and export read first.
      const std::string weights = (fs::path(args.path) / "weights.bin").string();
      if (fs::exists(weights)) {
        try {
          const size_t count = verify_weights(weights);
          std::printf("%s: ok (%zu parameters, its checksum verified)\n", weights.c_str(), count);
        } catch (const IoError& e) {
          std::printf("%s\n", e.what());
          ++bad;
        }
      }
      if (bad > 0) {
        print_error(args.path + ": " + std::to_string(bad) + (bad == 1 ? " file" : " files") +
                    " of the run (checkpoints, weights.bin) " + (bad == 1 ? "does" : "do") +
                    " not verify");
        return kExitFailure;
      }
      return kExitOk;
    }
    const VerifyResult r = verify_checkpoint(args.path, VerifyLevel::kChecksums);
    if (!r) {
      print_error(r.error);
      return kExitFailure;
    }
    std::printf("%s: ok (step %" PRId64 ", %s, every file's size and every checksum verified)\n",
                args.path.c_str(), r.step, human_bytes(r.data_bytes).c_str());
    return kExitOk;
  });
}

int cmd_ckpt_inspect(const CkptArgs& args) {
  return report_errors([&] {
    require_run_dir_or_checkpoint(args.path);
    std::string path = args.path;
    std::optional<CheckpointPin> pin;  // a live run's retention leaves it alone while it is read
    if (is_run_dir(path)) {
      std::vector<std::string> skipped;
      const auto newest = find_resume_checkpoint(path, &skipped);
      if (!newest) {
        std::string why;
        for (const std::string& s : skipped) why += "\n  " + s;
        throw IoError(path + ": no checkpoint that verifies" + why);
      }
      path = newest->path;
      pin = CheckpointPin::take(path);  // found pinned: it is still there
      std::printf("run         %s: its newest checkpoint that verifies\n", args.path.c_str());
    } else {
      pin = CheckpointPin::take(path);
    }
    pause_before_reading_for_tests();
    if (pin) path = pin->path();  // checkpoints/best resolved once, read whole
    Manifest m;
    try {
      m = load_manifest(path);
    } catch (const CheckpointError& e) {
      print_error(e.what());
      return kExitFailure;
    } catch (const IoError& e) {
      print_error(e.what());
      return kExitFailure;
    }
    const VerifyResult files = verify_checkpoint(path, VerifyLevel::kStructure);
    std::printf("checkpoint  %s\n", path.c_str());
    std::printf("step        %" PRId64 "\n", m.step);
    std::printf("written by  %d rank%s, shard mode %s\n", m.world_size, m.world_size == 1 ? "" : "s",
                m.shard_mode.c_str());
    std::printf("files       %zu, %s: %s\n", m.files.size(), human_bytes(m.data_bytes()).c_str(),
                files ? "all present with the right sizes (checksums: ringmaster ckpt verify)"
                      : files.error.c_str());
    std::printf("state       %s\n", m.state.dump().c_str());
    std::printf("buffers    ");
    for (const BufferInfo& b : m.buffers) {
      std::printf(" %s[%" PRIu64 "] %s", b.name.c_str(), b.count, b.dtype.c_str());
    }
    std::printf("\n\n%-40s %-6s %-18s %12s %12s\n", "tensor", "dtype", "shape", "offset", "elements");
    for (const TensorInfo& t : m.tensors) {
      std::string shape = "[";
      uint64_t n = 1;
      for (size_t i = 0; i < t.shape.size(); ++i) {
        shape += (i ? ", " : "") + std::to_string(t.shape[i]);
        n *= static_cast<uint64_t>(t.shape[i]);
      }
      shape += "]";
      std::printf("%-40s %-6s %-18s %12" PRIu64 " %12" PRIu64 "\n", t.name.c_str(), t.dtype.c_str(),
                  shape.c_str(), t.offset, n);
    }
    std::printf("\njob (resolved):\n%s", m.job.c_str());
    if (!m.job.empty() && m.job.back() != '\n') std::printf("\n");
    return files ? kExitOk : kExitFailure;
  });
}

namespace {

// The run's gpt as an llm.c model file (version 3, fp32, or 5, bf16), the vocabulary padded as
// llm.c pads it; what llm.c's trainers and its train_gpt2.py's files hold. Returns a bad-input
// exit code, having said why, for a model llm.c has no format for.
int export_llmc(const LoadedRun& run, const CkptArgs& args) {
  const ModelConfig& c = run.job.model;
  if (c.type != ModelType::kGpt) {
    print_error("ckpt export --format " + args.format +
                ": llm.c's files hold GPT-2 models; this checkpoint's model.type is " +
                choice_name(c.type));
    return kExitBadInput;
  }
  LlmcModelFile shape;
  shape.version = args.format == "llmc-bf16" ? 5 : 3;
  shape.max_seq_len = c.seq_len;
  shape.vocab_size = c.vocab_size;
  shape.padded_vocab_size = llmc_padded_vocab(c.vocab_size);
  shape.num_layers = c.layers;
  shape.num_heads = c.heads;
  shape.channels = c.width;
  std::map<std::string, const TensorSpec*> by_name;
  for (const TensorSpec& t : run.model->layout().tensors()) by_name[t.name] = &t;
  write_llmc_model_file(args.output, shape, [&](LlmcTensor kind, int64_t layer) {
    return run.params.data() + by_name.at(llmc_gpt2_name(kind, layer))->offset;
  });
  std::printf(
      "wrote %s: llm.c model file, version %d (%s), %zu tensors, vocabulary %d padded to "
      "%lld, from %s\n",
      args.output.c_str(), shape.version, shape.version == 5 ? "bf16" : "fp32", by_name.size(),
      c.vocab_size, static_cast<long long>(shape.padded_vocab_size), run.source.c_str());
  return kExitOk;
}

}  // namespace

int cmd_ckpt_export(const CkptArgs& args) {
  return report_errors([&] {
    cli::refuse_overwriting_input("-o", args.output, args.path);
    LoadedRun run = load_trained_model(args.path, 1);
    if (args.format != "safetensors") return export_llmc(run, args);
    const ModelExport exported = export_model(run.job.model, *run.model, run.params.data());
    std::vector<SafetensorsTensor> tensors;
    uint64_t bytes = 0;
    for (const ExportedTensor& t : exported.tensors) {
      tensors.push_back({t.name, "F32", t.shape, t.data});
      uint64_t n = 4;
      for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
      bytes += n;
    }
    auto metadata = exported.metadata;
    metadata["ringmaster.source"] = run.source;
    if (run.step >= 0) metadata["ringmaster.step"] = std::to_string(run.step);
    write_safetensors(args.output, tensors, metadata);
    std::printf("wrote %s: %zu tensors, %s, from %s%s\n", args.output.c_str(), tensors.size(),
                human_bytes(bytes).c_str(), run.source.c_str(),
                run.job.model.type == ModelType::kGpt ? " (Hugging Face GPT2LMHeadModel names)" : "");
    return kExitOk;
  });
}

}  // namespace rm
